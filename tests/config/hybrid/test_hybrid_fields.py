"""The hybrid section's field validators (gpucluster.config.hybrid, hybrid_access): one bad value per validator,
loaded through the real loader; the finding names the field path, the value (in the message or as the finding's
value), what is wrong and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.load import load_spec
from tests.config.hybrid.test_hybrid_checks import H, eks_site, setter, slurm_site

PEM_BODY = "MIIB" + "A" * 60
PEM = f"-----BEGIN CERTIFICATE-----\n{PEM_BODY}\n-----END CERTIFICATE-----"

# (id, config, path, message, fix fragment, value the finding carries)
CASES: list[tuple[str, dict[str, Any], str, str, str | None, object]] = [
    (
        "controller-host",
        slurm_site(setter("controller", "host", value="slurm ctl;reboot")),
        f"{H}.controller.host",
        "controller host 'slurm ctl;reboot' is not a host name.",
        "use the name slurm.conf's SlurmctldHost has, e.g. slurmctl01",
        "slurm ctl;reboot",
    ),
    (
        "controller-address",
        slurm_site(setter("controller", "address", value="slurmctl01")),
        f"{H}.controller.address",
        "controller address 'slurmctl01' is not an IPv4 address.",
        "write a dotted quad, e.g. 10.20.0.10",
        "slurmctl01",
    ),
    (
        "controller-port",
        slurm_site(setter("controller", "port", value=70000)),
        f"{H}.controller.port",
        "input should be less than or equal to 65535",
        "slurmctld's port (`SlurmctldPort`)",
        70000,
    ),
    (
        "controller-slurm-version",
        slurm_site(setter("controller", "slurmVersion", value="21.08")),
        f"{H}.controller.slurmVersion",
        "Slurm '21.08' is not a release gpucluster renders for.",
        "use one of 22.05, 23.02, 23.11, 24.05, 24.11, 25.05 (YY.MM; a maintenance release such as 23.11.4 counts as 23.11)",
        "21.08",
    ),
    (
        "cloud-slurm-version",
        slurm_site(setter("controller", "cloudSlurmVersion", value="26.05")),
        f"{H}.controller.cloudSlurmVersion",
        "cloudSlurmVersion '26.05' is not a Slurm major release.",
        "use one of 20.11, 21.08, 22.05, 23.02, 23.11, 24.05, 24.11, 25.05",
        "26.05",
    ),
    (
        "controller-partition",
        slurm_site(setter("controller", "partitions", value=["gpu", "big gpu"])),
        f"{H}.controller.partitions",
        "partition 'big gpu' is not a Slurm partition name.",
        "use letters, digits, _ . -",
        None,
    ),
    (
        "controller-conf-dir",
        slurm_site(setter("controller", "confDir", value="/etc/slurm $(id)")),
        f"{H}.controller.confDir",
        "conf_dir '/etc/slurm $(id)' is not a plain absolute path.",
        "use letters, digits and . _ - + / only, starting with /",
        "/etc/slurm $(id)",
    ),
    (
        "controller-resume-program-relative",
        slurm_site(setter("controller", "resumeProgram", value="../bin/resume")),
        f"{H}.controller.resumeProgram",
        "resume_program '../bin/resume' is not a plain absolute path.",
        "starting with /",
        "../bin/resume",
    ),
    (
        "controller-install-dir-dotdot",
        slurm_site(setter("controller", "installDir", value="/opt/../etc")),
        f"{H}.controller.installDir",
        "install_dir '/opt/../etc' is not a plain absolute path.",
        "starting with /",
        "/opt/../etc",
    ),
    (
        "controller-slurm-user",
        slurm_site(setter("controller", "slurmUser", value="Slurm")),
        f"{H}.controller.slurmUser",
        "slurmUser 'Slurm' is not a user name.",
        "use lowercase letters, digits, _ and -",
        "Slurm",
    ),
    (
        "controller-slurm-uid",
        slurm_site(setter("controller", "slurmUid", value=0)),
        f"{H}.controller.slurmUid",
        "input should be greater than or equal to 1",
        "UID of `SlurmUser` at the site",
        0,
    ),
    (
        "site-name",
        slurm_site(setter("site", value="On Prem")),
        f"{H}.site",
        "site name 'On Prem' is not a valid name: use 1-32 lowercase letters, digits and '-', starting with a letter",
        None,  # check_name says the remedy in its message
        "On Prem",
    ),
    (
        "on-prem-cidr-host-bits",
        slurm_site(setter("onPremCidrs", value=["10.20.0.1/16"])),
        f"{H}.onPremCidrs",
        "on_prem_cidrs '10.20.0.1/16' is not an IPv4 network: 10.20.0.1/16 has host bits set.",
        "write it as address/prefix with no host bits, e.g. 10.20.0.0/16",
        None,
    ),
    (
        "on-prem-cidrs-empty",
        slurm_site(setter("onPremCidrs", value=[])),
        f"{H}.onPremCidrs",
        "tuple should have at least 1 item after validation, not 0",
        "The site's networks that talk to the cluster",
        None,
    ),
    (
        "login-cidr",
        slurm_site(setter("loginNodeCidrs", value=["login01"])),
        f"{H}.loginNodeCidrs",
        "login_node_cidrs 'login01' is not an IPv4 network:",
        "e.g. 10.20.0.0/16",
        None,
    ),
    (
        "srun-port-range",
        slurm_site(setter("srunPortRange", value="63000-60001")),
        f"{H}.srunPortRange",
        "srunPortRange '63000-60001' is not a port range.",
        "write low-high with 1024 ≤ low < high ≤ 65535, e.g. 60001-63000",
        "63000-60001",
    ),
    (
        "neither-controller-nor-kubernetes",
        slurm_site(setter("controller", value=None)),
        H,
        "the hybrid section names neither a controller (Slurm) nor kubernetes (EKS Hybrid Nodes).",
        "add controller: for a Slurm site, kubernetes: for a Kubernetes site",
        None,
    ),
    (
        "remote-node-cidr",
        eks_site(setter("kubernetes", "remoteNodeCidrs", value=["10.20.0.0/33"])),
        f"{H}.kubernetes.remoteNodeCidrs",
        "remote_node_cidrs '10.20.0.0/33' is not an IPv4 network:",
        "write it as address/prefix with no host bits",
        None,
    ),
    (
        "remote-pod-cidr",
        eks_site(setter("kubernetes", "remotePodCidrs", value=["fd00::/64"])),
        f"{H}.kubernetes.remotePodCidrs",
        "remote_pod_cidrs 'fd00::/64' is not an IPv4 network:",
        "write it as address/prefix with no host bits",
        None,
    ),
    (
        "customer-gateway-not-an-address",
        slurm_site(setter("connectivity", "customerGatewayIp", value="vpn.example.com")),
        f"{H}.connectivity.customerGatewayIp",
        "customerGatewayIp 'vpn.example.com' is not an IPv4 address.",
        "write a dotted quad",
        "vpn.example.com",
    ),
    (
        "customer-gateway-private",
        slurm_site(setter("connectivity", "customerGatewayIp", value="192.168.1.1")),
        f"{H}.connectivity.customerGatewayIp",
        "customerGatewayIp '192.168.1.1' is not a public address.",
        "give the VPN device's public IPv4 address (the one the internet sees; behind NAT, the NAT's)",
        "192.168.1.1",
    ),
    (
        "vpn-without-customer-gateway",
        slurm_site(setter("connectivity", "customerGatewayIp", value=None)),
        f"{H}.connectivity",
        "connectivity type vpn-tgw needs customerGatewayIp.",
        "set customerGatewayIp to the site VPN device's public IPv4 address",
        None,
    ),
    (
        "existing-tgw-without-id",
        slurm_site(setter("connectivity", value={"type": "existing-tgw"})),
        f"{H}.connectivity",
        "connectivity type existing-tgw needs transitGatewayId.",
        "set transitGatewayId: tgw-…",
        None,
    ),
    (
        "direct-connect-without-gateway",
        slurm_site(setter("connectivity", value={"type": "direct-connect"})),
        f"{H}.connectivity",
        "connectivity type direct-connect needs exactly one of transitGatewayId and vpnGatewayId.",
        "name the gateway your Direct Connect gateway is associated with",
        None,
    ),
    (
        "direct-connect-with-both-gateways",
        slurm_site(
            setter(
                "connectivity",
                value={
                    "type": "direct-connect",
                    "transitGatewayId": "tgw-0123456789abcdef0",
                    "vpnGatewayId": "vgw-0123456789abcdef0",
                },
            )
        ),
        f"{H}.connectivity",
        "connectivity type direct-connect needs exactly one of transitGatewayId and vpnGatewayId.",
        "name the gateway your Direct Connect gateway is associated with",
        None,
    ),
    (
        "transit-gateway-id-pattern",
        slurm_site(setter("connectivity", value={"type": "existing-tgw", "transitGatewayId": "tgw-XYZ"})),
        f"{H}.connectivity.transitGatewayId",
        "string should match pattern '^tgw-[0-9a-f]{8,17}$'",
        "The existing Transit Gateway",
        "tgw-XYZ",
    ),
    (
        "amazon-side-asn",
        slurm_site(setter("connectivity", "amazonSideAsn", value=65000 - 1000)),
        f"{H}.connectivity.amazonSideAsn",
        "input should be greater than or equal to 64512",
        "The ASN of the AWS side",
        64000,
    ),
    (
        "dns-domain",
        slurm_site(setter("dns", "onPremDomain", value="hpc_site.internal")),
        f"{H}.dns.onPremDomain",
        "onPremDomain 'hpc_site.internal' is not a DNS domain.",
        "write it like hpc.example.internal",
        "hpc_site.internal",
    ),
    (
        "dns-resolver",
        slurm_site(setter("dns", "onPremResolvers", value=["10.20.0.2", "ns1"])),
        f"{H}.dns.onPremResolvers",
        "onPremResolvers 'ns1' is not an IPv4 address.",
        "write a dotted quad",
        None,
    ),
    (
        "ca-not-pem",
        slurm_site(setter("credentials", value={"type": "rolesanywhere", "caCertificatePem": "MIIB..."})),
        f"{H}.credentials.caCertificatePem",
        "caCertificatePem is not a PEM certificate: it must be base64 lines between the BEGIN and END lines.",
        "paste the CA certificate from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----",
        "MIIB...",
    ),
    (
        "ca-too-long",
        slurm_site(
            setter(
                "credentials",
                value={"caCertificatePem": PEM.replace(PEM_BODY, "\n".join(["A" * 64] * 125))},
            )
        ),
        f"{H}.credentials.caCertificatePem",
        "caCertificatePem is 8178 characters; a trust anchor takes at most 8000.",
        "use the issuing CA alone",
        None,
    ),
    (
        "ca-with-a-smuggled-line",
        slurm_site(
            setter("credentials", value={"caCertificatePem": PEM.replace(PEM_BODY, PEM_BODY + "\nruncmd: [curl x | sh]")})
        ),
        f"{H}.credentials.caCertificatePem",
        "caCertificatePem is not a PEM certificate: it must be base64 lines between the BEGIN and END lines.",
        "paste the CA certificate",
        None,
    ),
    (
        "ca-with-carriage-returns",
        slurm_site(setter("credentials", value={"caCertificatePem": PEM.replace("\n", "\r\n")})),
        f"{H}.credentials.caCertificatePem",
        "contains a control character (U+000D at position 27); config values must be printable text",
        "remove the newline, tab, carriage return",
        None,
    ),
    (
        "newline-elsewhere-still-refused",
        slurm_site(setter("credentials", "certificateCn", value="slurm\nctld")),
        f"{H}.credentials.certificateCn",
        "contains a control character (U+000A at position 5); config values must be printable text",
        "remove the newline",
        None,
    ),
    (
        "both-anchors",
        slurm_site(setter("credentials", "caCertificatePem", value=PEM)),
        f"{H}.credentials",
        "credentials type rolesanywhere needs exactly one of caCertificatePem and acmPcaArn.",
        "paste the site CA's certificate in caCertificatePem, or name an AWS Private CA in acmPcaArn",
        None,
    ),
    (
        "pca-arn-pattern",
        slurm_site(setter("credentials", "acmPcaArn", value="arn:aws:acm-pca:us-east-1:123:certificate-authority/x")),
        f"{H}.credentials.acmPcaArn",
        "string should match pattern",
        "An AWS Private CA",
        "arn:aws:acm-pca:us-east-1:123:certificate-authority/x",
    ),
    (
        "certificate-cn",
        slurm_site(setter("credentials", "certificateCn", value="slurmctld/../x")),
        f"{H}.credentials.certificateCn",
        "certificateCn 'slurmctld/../x' is not a plain common name.",
        "use letters, digits, . _ -",
        "slurmctld/../x",
    ),
    (
        "signing-helper-path",
        slurm_site(setter("credentials", "signingHelperPath", value="aws_signing_helper")),
        f"{H}.credentials.signingHelperPath",
        "signing_helper_path 'aws_signing_helper' is not a plain absolute path.",
        "starting with /",
        "aws_signing_helper",
    ),
    (
        "duration",
        slurm_site(setter("credentials", "durationSeconds", value=600)),
        f"{H}.credentials.durationSeconds",
        "input should be greater than or equal to 900",
        "Session length (900–43200)",
        600,
    ),
]


@pytest.mark.parametrize(("config", "path", "message", "fix", "value"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_field_validator(config, path, message, fix, value, catalog):
    with pytest.raises(ConfigError) as caught:
        load_spec(config, stack="bad", catalog=catalog)
    errors = caught.value.errors
    assert {f.path for f in errors} == {path}, [f.render() for f in errors]
    matching = [f for f in errors if f.message.startswith(message)]
    assert matching, [f.message for f in errors]
    finding = matching[0]
    if fix is None:
        assert finding.fix == "" and "use " in finding.message
    else:
        assert fix in finding.fix and finding.fix, finding.fix
    if value is not None:
        assert finding.value == value
    assert path in str(caught.value) and "Traceback" not in str(caught.value)


def test_maintenance_release_counts_as_its_major(catalog):
    config = slurm_site(setter("controller", "slurmVersion", value="22.05.8"))
    assert load_spec(config, stack="ok", catalog=catalog).spec.hybrid.controller.slurm_version == "22.05"


def test_pem_is_kept_with_one_trailing_newline(catalog):
    config = slurm_site(setter("credentials", value={"caCertificatePem": f"\n{PEM}\n\n"}))
    creds = load_spec(config, stack="ok", catalog=catalog).spec.hybrid.credentials
    assert creds.ca_certificate_pem == PEM + "\n"
