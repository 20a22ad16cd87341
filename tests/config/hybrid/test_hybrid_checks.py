"""The hybrid section's cross-field validators (gpucluster.config.checks.hybrid, hybrid_slurm), table-tested: each
row changes one thing in a shipped hybrid stack and names the exact finding (level, path, message, code; every
finding has a fix). The shipped stacks themselves load with no finding at all."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.config.checks.cluster import validate_cluster
from gpucluster.config.errors import ConfigError, Level
from gpucluster.load import load_spec
from tests.conftest import assert_finding
from tests.conftest import parse_spec as parse

STACKS = Path(__file__).resolve().parents[3] / "stacks"
H = "gpucluster:hybrid"


def stack(name: str) -> dict[str, Any]:
    return yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text())["config"]


def slurm_site(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    config = copy.deepcopy(stack("hybrid-slurm"))
    change(config)
    return config


def eks_site(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    config = copy.deepcopy(stack("hybrid-eks"))
    change(config)
    return config


def hy(config: dict[str, Any]) -> dict[str, Any]:
    return config[H]


def setter(*path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets gpucluster:hybrid.<path> (``None`` removes it)."""

    def change(config: dict[str, Any]) -> None:
        node = hy(config)
        for key in path[:-1]:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value

    return change


def both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        for c in changes:
            c(config)

    return change


def image(index: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        config["gpucluster:nodeGroups"][index].update(fields)

    return change


def extra_group(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        g = {"name": "cpu", "instanceType": "g6e.xlarge", "availabilityZones": ["us-east-1a"], "minSize": 0, "maxSize": 2}
        config["gpucluster:nodeGroups"].append({**g, **fields})

    return change


def drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda config: config.pop(key)


PCA = "arn:aws:acm-pca:us-east-1:123456789012:certificate-authority/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"

# (id, config, level, path, expected_message, code)
CASES = [
    (
        "site-cidr-overlaps-vpc",
        slurm_site(setter("onPremCidrs", value=["10.0.128.0/20"])),
        Level.ERROR,
        f"{H}.onPremCidrs[0]",
        "10.0.128.0/20 overlaps the VPC CIDR (gpucluster:network.vpcCidr 10.0.0.0/16): traffic for it would stay in "
        "AWS instead of crossing the link",
        "hybrid-cidr-overlaps-cloud",
    ),
    (
        "login-cidr-overlaps-vpc",
        slurm_site(
            both(
                setter("onPremCidrs", value=["10.0.0.0/8"]),
                lambda c: c.update({"gpucluster:network": {**c["gpucluster:network"], "vpcCidr": "172.31.0.0/16"}}),
                setter("loginNodeCidrs", value=["172.31.8.0/24"]),
            )
        ),
        Level.ERROR,
        f"{H}.loginNodeCidrs[0]",
        "172.31.8.0/24 overlaps the VPC CIDR (gpucluster:network.vpcCidr 172.31.0.0/16): traffic for it would stay in "
        "AWS instead of crossing the link",
        "hybrid-cidr-overlaps-cloud",
    ),
    (
        "remote-node-cidr-overlaps-eks-services",
        eks_site(
            both(
                setter("onPremCidrs", value=["10.20.0.0/16", "10.96.0.0/16", "10.100.0.0/16"]),
                setter("kubernetes", "remoteNodeCidrs", value=["10.100.0.0/20"]),
            )
        ),
        Level.ERROR,
        f"{H}.kubernetes.remoteNodeCidrs[0]",
        "10.100.0.0/20 overlaps EKS's service range 10.100.0.0/16 (EKS picks 10.100.0.0/16 or 172.20.0.0/16): traffic "
        "for it would stay in AWS instead of crossing the link",
        "hybrid-cidr-overlaps-cloud",
    ),
    (
        "pod-cidr-overlaps-eks-services",
        eks_site(
            both(
                setter("onPremCidrs", value=["10.20.0.0/16", "172.16.0.0/12"]),
                setter("kubernetes", "remotePodCidrs", value=["172.20.0.0/16"]),
            )
        ),
        Level.ERROR,
        f"{H}.kubernetes.remotePodCidrs[0]",
        "172.20.0.0/16 overlaps EKS's service range 172.20.0.0/16 (EKS picks 10.100.0.0/16 or 172.20.0.0/16): traffic "
        "for it would stay in AWS instead of crossing the link",
        "hybrid-cidr-overlaps-cloud",
    ),
    (
        "site-cidrs-overlap-each-other",
        slurm_site(setter("onPremCidrs", value=["10.20.0.0/16", "10.20.4.0/22"])),
        Level.ERROR,
        f"{H}.onPremCidrs[1]",
        f"10.20.4.0/22 overlaps 10.20.0.0/16 ({H}.onPremCidrs[0]): the same addresses cannot be two networks",
        "hybrid-cidr-overlap",
    ),
    (
        "pod-cidr-overlaps-node-cidr",
        eks_site(setter("kubernetes", "remotePodCidrs", value=["10.20.128.0/17"])),
        Level.ERROR,
        f"{H}.kubernetes.remotePodCidrs[0]",
        f"10.20.128.0/17 overlaps 10.20.0.0/16 ({H}.kubernetes.remoteNodeCidrs[0]): the same addresses cannot be two networks",
        "hybrid-cidr-overlap",
    ),
    (
        "login-cidr-outside-site",
        slurm_site(setter("loginNodeCidrs", value=["10.30.8.0/24"])),
        Level.ERROR,
        f"{H}.loginNodeCidrs[0]",
        "10.30.8.0/24 is not inside onPremCidrs (10.20.0.0/16): cloud nodes reach login nodes (srun) over the link, "
        "which routes only onPremCidrs",
        "hybrid-cidr-outside-site",
    ),
    (
        "remote-pod-cidr-outside-site",
        eks_site(setter("kubernetes", "remotePodCidrs", value=["10.97.0.0/16"])),
        Level.ERROR,
        f"{H}.kubernetes.remotePodCidrs[0]",
        "10.97.0.0/16 is not inside onPremCidrs (10.20.0.0/16, 10.96.0.0/16): the VPC routes only onPremCidrs over the "
        "link, so webhooks running on hybrid nodes would be unreachable from the EKS control plane",
        "hybrid-cidr-outside-site",
    ),
    (
        "remote-node-cidr-public",
        eks_site(
            both(
                setter("onPremCidrs", value=["10.20.0.0/16", "10.96.0.0/16", "198.51.100.0/24"]),
                setter("kubernetes", "remoteNodeCidrs", value=["198.51.100.0/24"]),
            )
        ),
        Level.ERROR,
        f"{H}.kubernetes.remoteNodeCidrs[0]",
        "198.51.100.0/24 is neither RFC 1918 nor 100.64.0.0/10, which EKS requires of remote node and pod networks",
        "hybrid-remote-cidr-range",
    ),
    (
        "controller-outside-site",
        slurm_site(setter("controller", "address", value="192.168.1.10")),
        Level.ERROR,
        f"{H}.controller.address",
        "controller address 192.168.1.10 is not inside onPremCidrs (10.20.0.0/16): cloud nodes could not reach "
        "slurmctld over the link",
        "hybrid-controller-outside-site",
    ),
    (
        "large-tunnels-on-vgw",
        slurm_site(
            both(setter("connectivity", "type", value="vpn-vgw"), setter("connectivity", "tunnelBandwidth", value="large"))
        ),
        Level.ERROR,
        f"{H}.connectivity.tunnelBandwidth",
        "large tunnels (up to 5 Gbps) run only on a Transit Gateway; connectivity type vpn-vgw has a virtual private "
        "gateway, limited to 1.25 Gbps per tunnel",
        "hybrid-large-tunnel-needs-tgw",
    ),
    (
        "large-tunnels-on-direct-connect",
        slurm_site(
            setter(
                "connectivity",
                value={"type": "direct-connect", "vpnGatewayId": "vgw-0123456789abcdef0", "tunnelBandwidth": "large"},
            )
        ),
        Level.ERROR,
        f"{H}.connectivity.tunnelBandwidth",
        "large tunnels (up to 5 Gbps) run only on a Transit Gateway; connectivity type direct-connect has no VPN tunnel",
        "hybrid-large-tunnel-needs-tgw",
    ),
    (
        "tgw-id-ignored-by-new-tgw",
        slurm_site(setter("connectivity", "transitGatewayId", value="tgw-0123456789abcdef0")),
        Level.ERROR,
        f"{H}.connectivity.transitGatewayId",
        "connectivity type vpn-tgw creates its own gateway and would ignore transitGatewayId",
        "hybrid-gateway-ignored",
    ),
    (
        "vgw-id-ignored-by-vpn",
        slurm_site(setter("connectivity", "vpnGatewayId", value="vgw-0123456789abcdef0")),
        Level.ERROR,
        f"{H}.connectivity.vpnGatewayId",
        "connectivity type vpn-tgw does not use an existing virtual private gateway",
        "hybrid-gateway-ignored",
    ),
    (
        "same-asn-both-sides",
        slurm_site(setter("connectivity", "bgpAsn", value=64512)),
        Level.ERROR,
        f"{H}.connectivity.bgpAsn",
        "the site's BGP ASN 64512 is also the AWS side's (amazonSideAsn): the BGP sessions would not come up",
        "hybrid-asn-equal",
    ),
    (
        "cloud-partition-is-site-partition",
        slurm_site(setter("controller", "partitions", value=["gpu", "AWS-P5"])),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups[0].partition",
        "cloud partition 'aws-p5' of node group 'p5' is also a partition of site 'onprem' (hybrid.controller.partitions): "
        "one partition would mix the sites' nodes, and jobs cannot span EFA and the site's fabric",
        "hybrid-partition-clash",
    ),
    (
        "default-partition-is-site-partition",
        slurm_site(both(lambda c: c.update({"gpucluster:slurm": {}}), setter("controller", "partitions", value=["p5"]))),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups",
        "cloud partition 'p5' of node group 'p5' is also a partition of site 'onprem' (hybrid.controller.partitions): "
        "one partition would mix the sites' nodes, and jobs cannot span EFA and the site's fabric",
        "hybrid-partition-clash",
    ),
    (
        "burst-group-unknown",
        slurm_site(setter("burstNodeGroups", value=["p5", "p4d"])),
        Level.ERROR,
        f"{H}.burstNodeGroups[1]",
        "no node group is named 'p4d'",
        "hybrid-burst-unknown",
    ),
    (
        "burst-group-not-slurm",
        slurm_site(both(extra_group(scheduler="none"), setter("burstNodeGroups", value=["p5", "cpu"]))),
        Level.ERROR,
        f"{H}.burstNodeGroups[1]",
        "node group 'cpu' is not run by Slurm, so the site's controller cannot launch it",
        "hybrid-burst-not-slurm",
    ),
    (
        "slurm-group-not-burst",
        slurm_site(extra_group(scheduler="slurm")),
        Level.ERROR,
        "gpucluster:nodeGroups[1]",
        "node group 'cpu' is run by Slurm but not in hybrid.burstNodeGroups: with a site controller there is no head "
        "node, so nothing would drive it",
        "hybrid-slurm-group-not-burst",
    ),
    (
        "controller-without-slurm",
        slurm_site(drop("gpucluster:slurm")),
        Level.ERROR,
        f"{H}.controller",
        "the site's controller bursts into this cluster's Slurm node groups, but the cluster has no gpucluster:slurm section",
        "hybrid-needs-slurm",
    ),
    (
        "burst-groups-without-controller",
        eks_site(setter("burstNodeGroups", value=["p5"])),
        Level.ERROR,
        f"{H}.burstNodeGroups",
        "burstNodeGroups lists node groups for a site controller, but the hybrid section has no controller",
        "hybrid-burst-without-controller",
    ),
    (
        "cloud-slurmd-newer-than-controller",
        slurm_site(both(setter("controller", "cloudSlurmVersion", value="23.02"), image(0, imageId="ami-0123456789abcdef0"))),
        Level.ERROR,
        f"{H}.controller.cloudSlurmVersion",
        "slurmd 23.02 cannot register with the site's slurmctld 22.05: slurmd may not be newer than slurmctld",
        "hybrid-slurm-window",
    ),
    (
        "cloud-slurmd-three-releases-older",
        slurm_site(
            both(
                setter("controller", "slurmVersion", value="24.05"),
                setter("controller", "cloudSlurmVersion", value="22.05"),
                image(0, imageId="ami-0123456789abcdef0"),
            )
        ),
        Level.ERROR,
        f"{H}.controller.cloudSlurmVersion",
        "slurmd 22.05 cannot register with the site's slurmctld 24.05: it is more than 2 releases older",
        "hybrid-slurm-window",
    ),
    (
        "ubuntu-24-04-image-under-22-05-controller",
        slurm_site(
            image(0, imageSsmParameter="/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id")
        ),
        Level.ERROR,
        "gpucluster:nodeGroups[0].imageSsmParameter",
        "node group 'p5' boots Ubuntu 24.04, whose slurmd 23.11 the site's slurmctld 22.05 does not accept",
        "hybrid-slurm-window",
    ),
    (
        "ubuntu-20-04-image-unknown-slurm",
        slurm_site(
            image(0, imageSsmParameter="/aws/service/canonical/ubuntu/server/20.04/stable/current/amd64/hvm/ebs-gp2/ami-id")
        ),
        Level.ERROR,
        "gpucluster:nodeGroups[0].imageSsmParameter",
        "node group 'p5' boots Ubuntu 20.04, whose slurm-wlm gpucluster does not know (Ubuntu 22.04: 21.08, Ubuntu 24.04: 23.11)",
        "hybrid-image-version-unknown",
    ),
    (
        "ubuntu-22-04-image-under-23-11-controller",
        slurm_site(
            both(
                image(0, imageSsmParameter="/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"),
                setter("controller", "slurmVersion", value="23.11"),
            )
        ),
        Level.ERROR,
        "gpucluster:nodeGroups[0].imageSsmParameter",
        "node group 'p5' boots Ubuntu 22.04, whose slurmd 21.08 the site's slurmctld 23.11 does not accept",
        "hybrid-slurm-window",
    ),
    (
        "own-image-without-version",
        slurm_site(image(0, imageId="ami-0123456789abcdef0")),
        Level.ERROR,
        "gpucluster:nodeGroups[0].imageId",
        "node group 'p5' boots its own image ami-0123456789abcdef0: gpucluster cannot tell whether its slurmd is one "
        "the site's slurmctld 22.05 accepts",
        "hybrid-image-version-unknown",
    ),
    (
        "controller-25-05-has-no-cloud-image",
        slurm_site(setter("controller", "slurmVersion", value="25.05")),
        Level.ERROR,
        f"{H}.controller.slurmVersion",
        "no cloud image gpucluster knows has a slurmd that slurmctld 25.05 accepts (Ubuntu 22.04: 21.08, Ubuntu 24.04: "
        "23.11; it accepts 24.05, 24.11, 25.05)",
        "hybrid-no-cloud-image",
    ),
    (
        "cloud-version-without-own-image",
        slurm_site(setter("controller", "cloudSlurmVersion", value="21.08")),
        Level.WARNING,
        f"{H}.controller.cloudSlurmVersion",
        "cloudSlurmVersion 21.08 describes your own image, but no burst node group sets imageId: they boot "
        "gpucluster's Ubuntu 22.04 image",
        "hybrid-cloud-version-unused",
    ),
    (
        "dns-in-one-zone",
        slurm_site(lambda c: c.update({"gpucluster:network": {"vpcCidr": "10.0.0.0/16"}})),
        Level.ERROR,
        f"{H}.dns",
        "Route 53 Resolver endpoints need subnets in two availability zones; the cluster has 1 (us-east-1a)",
        "hybrid-dns-zones",
    ),
    (
        "resolver-outside-site",
        slurm_site(setter("dns", "onPremResolvers", value=["10.20.0.2", "192.168.0.2"])),
        Level.ERROR,
        f"{H}.dns.onPremResolvers[1]",
        "resolver 192.168.0.2 is not inside onPremCidrs (10.20.0.0/16): the outbound endpoint could not reach it over the link",
        "hybrid-resolver-outside-site",
    ),
    (
        "hybrid-nodes-without-eks",
        eks_site(both(drop("gpucluster:kubernetes"), lambda c: c.update({"gpucluster:slurm": {}}))),
        Level.ERROR,
        f"{H}.kubernetes",
        "EKS Hybrid Nodes join this cluster's EKS control plane, but the cluster has no gpucluster:kubernetes section",
        "hybrid-needs-eks",
    ),
    (
        "eks-endpoint-public-and-private",
        eks_site(
            lambda c: c["gpucluster:kubernetes"].update(
                {"endpoint": {"publicAccess": True, "privateAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}}
            )
        ),
        Level.ERROR,
        "gpucluster:kubernetes.endpoint",
        "EKS Hybrid Nodes need the API endpoint public or private, not both: with both, the endpoint name resolves to "
        "public addresses for the site's nodes",
        "hybrid-eks-endpoint",
    ),
    (
        "hybrid-node-cn-not-a-node-name",
        eks_site(lambda c: hy(c)["credentials"].update({"certificateCn": "GPU_Node"})),
        Level.ERROR,
        f"{H}.credentials.certificateCn",
        "the hybrid nodes' certificates are named GPU_Node-<node>, their Kubernetes node names, which allow only "
        "lowercase letters, digits, . and -",
        "hybrid-node-cn",
    ),
    (
        "hybrid-node-cn-left-at-the-controllers-default",
        eks_site(lambda c: hy(c)["credentials"].pop("certificateCn")),
        Level.WARNING,
        f"{H}.credentials.certificateCn",
        "is not set: the hybrid node role then trusts only certificates named slurmctld-<node>",
        "hybrid-node-cn-default",
    ),
]


@pytest.mark.parametrize(
    ("config", "level", "path", "expected_message", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_hybrid_check(config, level, path, expected_message, code, catalog):
    assert_finding(validate_cluster(parse(config), catalog), level, path, expected_message, code)


@pytest.mark.parametrize("name", ["hybrid-slurm", "hybrid-eks"])
def test_shipped_hybrid_stacks_load_clean(name, catalog):
    """Not one finding of any level: a shipped stack is the example every site copies."""
    result = load_spec(stack(name), stack=name, catalog=catalog)
    assert [f.render() for f in result.findings] == []
    assert result.spec.hybrid is not None


def test_every_problem_reported_at_once_by_the_loader(catalog):
    """The loader raises one ConfigError listing every hybrid error (the user fixes them in one round)."""
    config = slurm_site(
        both(setter("controller", "address", value="192.168.1.10"), setter("connectivity", "bgpAsn", value=64512))
    )
    with pytest.raises(ConfigError) as caught:
        load_spec(config, stack="bad", catalog=catalog)
    paths = sorted(f.path for f in caught.value.errors)
    assert paths == [f"{H}.connectivity.bgpAsn", f"{H}.controller.address"]
    assert "Fix: give the site its own ASN" in str(caught.value)


def test_accepted_slurmd_releases_follow_the_window():
    from gpucluster.config.checks.hybrid.slurm import accepted

    assert accepted("22.05") == ["20.11", "21.08", "22.05"]
    assert accepted("25.05") == ["24.05", "24.11", "25.05"]


def test_a_check_never_fires_without_a_hybrid_section(catalog):
    from gpucluster.config.checks.hybrid import check_hybrid

    config = stack("hybrid-slurm")
    config = {k: v for k, v in config.items() if k != H}
    assert list(check_hybrid(parse(config), catalog)) == []


def test_ubuntu_22_04_image_under_a_22_05_controller_is_accepted(catalog):
    """The check judges the image's slurmd, not the head node's Ubuntu 24.04 rule (which hybrid mode replaces)."""
    param = "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"
    findings = validate_cluster(parse(slurm_site(image(0, imageSsmParameter=param))), catalog)
    assert [f.render() for f in findings if "imageSsmParameter" in f.path] == []
