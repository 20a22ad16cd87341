"""Preflight of the hybrid section: what AWS must already hold, or must not, before a site's link and credentials
are deployed. Your own VPC's CIDR blocks stay clear of the site's networks; the AWS Private CA named as the trust anchor exists and is ACTIVE; an existing Transit Gateway or
virtual private gateway exists and is available; the site's customer gateway address and ASN do not collide with
another site's customer gateway; the account has room for one more IAM Roles Anywhere trust anchor.

Part of :mod:`gpucluster.tools.preflight` (:mod:`.run` runs these); boto3 only, never imported by the program.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.facts.catalog import Catalog

if TYPE_CHECKING:
    from gpucluster.tools.preflight.clients import Clients

H = "gpucluster:hybrid"

TRUST_ANCHOR_QUOTA = 50
"""Trust anchors per account and region, IAM Roles Anywhere's default quota (adjustable; Roles Anywhere user guide,
"Quotas"). It is not in Service Quotas under a code preflight could read, so the default is what is compared."""


def _code(exc: Exception) -> str:
    response: Any = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def check_private_ca(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """A trust anchor on an AWS Private CA needs the CA to exist, in this partition, and to be ACTIVE."""
    hybrid = spec.hybrid
    arn = hybrid.credentials.acm_pca_arn if hybrid is not None else None
    if arn is None:
        return
    path = f"{H}.credentials.acmPcaArn"
    try:
        ca = aws.acm_pca.describe_certificate_authority(CertificateAuthorityArn=arn)["CertificateAuthority"]
    except Exception as exc:
        if _code(exc) not in ("ResourceNotFoundException", "InvalidArnException"):
            raise
        yield error(
            path,
            f"AWS Private CA {arn} does not exist ({_code(exc)})",
            "check the ARN (account and region), or paste the site CA's certificate in caCertificatePem instead",
            arn,
            "hybrid-pca-missing",
        )
        return
    status = ca.get("Status")
    if status != "ACTIVE":
        yield error(
            path,
            f"AWS Private CA {arn} is {status}, not ACTIVE: IAM Roles Anywhere cannot anchor trust in it",
            "install the CA certificate (a PENDING_CERTIFICATE CA) or restore and enable it, then run preflight again",
            status,
            "hybrid-pca-not-active",
        )


def check_gateways(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """The Transit Gateway or virtual private gateway the link attaches to exists and is available."""
    hybrid = spec.hybrid
    if hybrid is None:
        return
    link = hybrid.connectivity
    if link.type in ("existing-tgw", "direct-connect") and link.transit_gateway_id:
        path, tgw = f"{H}.connectivity.transitGatewayId", link.transit_gateway_id
        try:
            found = aws.ec2.describe_transit_gateways(TransitGatewayIds=[tgw])["TransitGateways"]
        except Exception as exc:
            if "NotFound" not in _code(exc):
                raise
            found = []
        if not found:
            yield error(path, f"Transit Gateway {tgw} does not exist in {spec.region}", "check the id and the region", tgw,
                        "hybrid-tgw-missing")  # fmt: skip
        elif found[0].get("State") != "available":
            yield error(
                path,
                f"Transit Gateway {tgw} is {found[0].get('State')}, not available",
                "wait until it is available, or name another one",
                tgw,
                "hybrid-tgw-state",
            )
    if link.type == "direct-connect" and link.vpn_gateway_id:
        path, vgw = f"{H}.connectivity.vpnGatewayId", link.vpn_gateway_id
        try:
            found = aws.ec2.describe_vpn_gateways(VpnGatewayIds=[vgw])["VpnGateways"]
        except Exception as exc:
            if "NotFound" not in _code(exc):
                raise
            found = []
        if not found:
            yield error(path, f"virtual private gateway {vgw} does not exist in {spec.region}", "check the id and the region",
                        vgw, "hybrid-vgw-missing")  # fmt: skip
        elif found[0].get("State") != "available":
            yield error(
                path,
                f"virtual private gateway {vgw} is {found[0].get('State')}, not available",
                "wait until it is available, or name another one",
                vgw,
                "hybrid-vgw-state",
            )


def check_customer_gateways(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """The site's VPN device against the account's customer gateways: one address has one ASN, and two sites that
    share an ASN on one Transit Gateway drop each other's routes (BGP loop prevention)."""
    hybrid = spec.hybrid
    if hybrid is None or hybrid.connectivity.customer_gateway_ip is None:
        return
    link = hybrid.connectivity
    gateways = aws.ec2.describe_customer_gateways(Filters=[{"Name": "state", "Values": ["available", "pending"]}])
    for cgw in gateways["CustomerGateways"]:
        if cgw.get("State") not in ("available", "pending"):
            continue  # deleted ones linger in the answer for a while
        ip, asn, cgw_id = cgw.get("IpAddress"), cgw.get("BgpAsn"), cgw.get("CustomerGatewayId")
        asn_number = int(asn) if asn and str(asn).isdigit() else None
        if ip == link.customer_gateway_ip and link.bgp_asn is not None and asn_number not in (None, link.bgp_asn):
            yield error(
                f"{H}.connectivity.bgpAsn",
                f"customer gateway {cgw_id} already has the address {ip} with ASN {asn_number}: one VPN device speaks "
                f"BGP with one ASN, not {link.bgp_asn}",
                f"use bgpAsn: {asn_number} (the device's), or check customerGatewayIp",
                link.bgp_asn,
                "hybrid-cgw-asn-clash",
            )
        elif ip == link.customer_gateway_ip:
            yield info(
                f"{H}.connectivity.customerGatewayIp",
                f"customer gateway {cgw_id} already has the address {ip}: the site's VPN device serves another connection too",
                "nothing to do if that is this site's device; AWS returns the existing customer gateway for the same "
                "address and ASN",
                ip,
                "hybrid-cgw-shared",
            )
        elif link.bgp_asn is not None and asn_number == link.bgp_asn:
            yield warning(
                f"{H}.connectivity.bgpAsn",
                f"customer gateway {cgw_id} ({ip}) of another device uses ASN {asn_number} too: on one Transit Gateway, "
                "each site drops the routes of the other (BGP sees its own ASN in the path)",
                "give each site its own private ASN (64512-65534 or 4200000000-4294967294)",
                link.bgp_asn,
                "hybrid-cgw-asn-shared",
            )


def check_trust_anchors(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """Room for the site's trust anchor (moto has no Roles Anywhere: tested with botocore's Stubber)."""
    hybrid = spec.hybrid
    if hybrid is None or hybrid.credentials.type != "rolesanywhere":
        return
    anchors: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = aws.rolesanywhere.list_trust_anchors(**({"nextToken": token} if token else {}))
        anchors += page.get("trustAnchors", [])
        token = page.get("nextToken")
        if not token:
            break
    path = f"{H}.credentials"
    if len(anchors) >= TRUST_ANCHOR_QUOTA:
        yield warning(
            path,
            f"the account has {len(anchors)} IAM Roles Anywhere trust anchors in {spec.region}; the default quota is "
            f"{TRUST_ANCHOR_QUOTA}, and creating this site's would fail unless it was raised",
            "delete unused trust anchors, or request a higher 'Trust anchors' quota for IAM Roles Anywhere",
            len(anchors),
            "hybrid-trust-anchor-quota",
        )
    arn = hybrid.credentials.acm_pca_arn
    same = [a for a in anchors if arn and a.get("source", {}).get("sourceData", {}).get("acmPcaArn") == arn]
    for anchor in same:
        state = "enabled" if anchor.get("enabled") else "disabled"
        yield info(
            f"{path}.acmPcaArn",
            f"trust anchor {anchor.get('name')} ({state}) already trusts this Private CA: a certificate it issues may "
            "also get that anchor's roles",
            "make sure the roles behind other anchors of this CA require their own certificate CN",
            arn,
            "hybrid-trust-anchor-shared",
        )


def check_vpc_overlap(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """With your own VPC the loader cannot know its CIDRs: every CIDR block of the VPC against the site's networks."""
    import ipaddress

    from gpucluster.config.checks.hybrid import site_networks

    hybrid, net = spec.hybrid, spec.network
    if hybrid is None or net.create_vpc or net.vpc_id is None:
        return
    vpcs = aws.ec2.describe_vpcs(VpcIds=[net.vpc_id])["Vpcs"]
    blocks = [a["CidrBlock"] for v in vpcs for a in v.get("CidrBlockAssociationSet", []) if a.get("CidrBlockState",
              {}).get("State", "associated") == "associated"]  # fmt: skip
    for path, site in site_networks(hybrid):
        for block in blocks:
            if site.overlaps(ipaddress.IPv4Network(block)):
                yield error(
                    path,
                    f"{site} overlaps {block}, a CIDR block of your VPC {net.vpc_id}: traffic for it would stay in AWS "
                    "instead of crossing the link",
                    "renumber the site network, or use a VPC whose CIDR blocks are outside every site network",
                    str(site),
                    "hybrid-cidr-overlaps-cloud",
                )


HYBRID_CHECKED: dict[Any, tuple[str, str]] = {
    check_vpc_overlap: ("your VPC's CIDR blocks", "gpucluster:network.vpcId"),
    check_private_ca: ("the AWS Private CA", f"{H}.credentials.acmPcaArn"),
    check_gateways: ("the existing Transit Gateway or VPN gateway", f"{H}.connectivity"),
    check_customer_gateways: ("the account's customer gateways", f"{H}.connectivity.customerGatewayIp"),
    check_trust_anchors: ("IAM Roles Anywhere trust anchors", f"{H}.credentials"),
}
"""The hybrid checks, with what each looks at and its config path (for "could not check …" findings)."""
