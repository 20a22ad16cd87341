"""Validators of the ``gpucluster:hybrid`` section across fields and with the rest of the cluster (pure: spec and
catalog in, findings out): the site's networks against the VPC, the EKS service range and each other; the link's
gateways; Resolver zones; EKS Hybrid Nodes. The Slurm side (partitions, burst node groups, version window) is
:mod:`gpucluster.config.checks.hybrid.slurm`'s; the shape of each value is checked by the model itself
(:mod:`gpucluster.config.hybrid`).

Each returns nothing when the cluster has no hybrid section.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from gpucluster.config.checks.hybrid.slurm import SLURM_SITE_CHECKS, hybrid_path
from gpucluster.config.checks.sections import SectionCheck, section_findings
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.hybrid import HybridSpec
from gpucluster.facts.catalog import Catalog

Net = ipaddress.IPv4Network

EKS_SERVICE_CIDRS = (Net("10.100.0.0/16"), Net("172.20.0.0/16"))
"""EKS gives Kubernetes services addresses from one of these when the cluster names no service range (gpucluster
names none); which one is EKS's choice, so the site must stay clear of both (EKS API KubernetesNetworkConfigRequest)."""

HYBRID_NODE_RANGES = (Net("10.0.0.0/8"), Net("172.16.0.0/12"), Net("192.168.0.0/16"), Net("100.64.0.0/10"))
"""Where EKS accepts remote node and pod networks: RFC 1918 or RFC 6598 (EKS Hybrid Nodes networking)."""

TGW_TYPES = ("vpn-tgw", "existing-tgw")


def site_networks(hybrid: HybridSpec) -> list[tuple[str, Net]]:
    """Every network the section names, with the config path of each."""
    out = [(hybrid_path(f"onPremCidrs[{i}]"), Net(c)) for i, c in enumerate(hybrid.on_prem_cidrs)]
    out += [(hybrid_path(f"loginNodeCidrs[{i}]"), Net(c)) for i, c in enumerate(hybrid.login_node_cidrs)]
    if hybrid.kubernetes is not None:
        k = hybrid.kubernetes
        out += [(hybrid_path(f"kubernetes.remoteNodeCidrs[{i}]"), Net(c)) for i, c in enumerate(k.remote_node_cidrs)]
        out += [(hybrid_path(f"kubernetes.remotePodCidrs[{i}]"), Net(c)) for i, c in enumerate(k.remote_pod_cidrs)]
    return out


def check_cloud_overlap(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """A site network inside the VPC (or EKS's service range) would be routed to the wrong side."""
    cloud: list[tuple[str, Net]] = []
    if spec.network.create_vpc:
        cloud.append((f"the VPC CIDR (gpucluster:network.vpcCidr {spec.network.vpc_cidr})", Net(spec.network.vpc_cidr)))
    if spec.kubernetes is not None:
        cloud += [(f"EKS's service range {n} (EKS picks 10.100.0.0/16 or 172.20.0.0/16)", n) for n in EKS_SERVICE_CIDRS]
    for path, net in site_networks(hybrid):
        for what, other in cloud:
            if net.overlaps(other):
                yield error(
                    path,
                    f"{net} overlaps {what}: traffic for it would stay in AWS instead of crossing the link",
                    "renumber one side: pick a vpcCidr outside every site network (e.g. 10.0.0.0/16 when the site uses "
                    "10.20.0.0/16), and keep site networks out of 10.100.0.0/16 and 172.20.0.0/16 with Kubernetes",
                    str(net),
                    "hybrid-cidr-overlaps-cloud",
                )


def check_site_overlap(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Networks that must be apart: the site's CIDRs from each other, pod networks from node and login networks
    (login nodes may sit in a node network: both are the site's hosts)."""
    nets = site_networks(hybrid)

    def kind(path: str) -> str:
        return path.rsplit(".", 1)[-1].split("[")[0]

    apart = {
        ("onPremCidrs", "onPremCidrs"),
        ("loginNodeCidrs", "loginNodeCidrs"),
        ("remoteNodeCidrs", "remoteNodeCidrs"),
        ("remotePodCidrs", "remotePodCidrs"),
        ("remotePodCidrs", "remoteNodeCidrs"),
        ("remotePodCidrs", "loginNodeCidrs"),
    }
    for j, (path, net) in enumerate(nets):
        for other_path, other in nets[:j]:
            if (kind(path), kind(other_path)) in apart and net.overlaps(other):
                yield error(
                    path,
                    f"{net} overlaps {other} ({other_path}): the same addresses cannot be two networks",
                    "list each network once; merge overlapping site ranges into the larger one, and give pods a range "
                    "of their own",
                    str(net),
                    "hybrid-cidr-overlap",
                )


WHY_INSIDE = {
    "loginNodeCidrs": "cloud nodes reach login nodes (srun) over the link, which routes only onPremCidrs",
    "remoteNodeCidrs": "the VPC routes only onPremCidrs over the link, so the EKS control plane could not reach kubelets",
    "remotePodCidrs": "the VPC routes only onPremCidrs over the link, so webhooks running on hybrid nodes would be "
    "unreachable from the EKS control plane",
}


def check_inside_site(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Login, remote node and pod networks and the controller sit inside onPremCidrs: only those are routed."""
    site = [Net(c) for c in hybrid.on_prem_cidrs]
    for path, net in site_networks(hybrid):
        field = path.rsplit(".", 1)[-1].split("[")[0]
        if field in WHY_INSIDE and not any(net.subnet_of(s) for s in site):
            yield error(
                path,
                f"{net} is not inside onPremCidrs ({', '.join(hybrid.on_prem_cidrs)}): {WHY_INSIDE[field]}",
                f"add {net} (or a network containing it) to onPremCidrs",
                str(net),
                "hybrid-cidr-outside-site",
            )
    if hybrid.controller is not None:
        address = ipaddress.IPv4Address(hybrid.controller.address)
        if not any(address in s for s in site):
            yield error(
                hybrid_path("controller.address"),
                f"controller address {address} is not inside onPremCidrs ({', '.join(hybrid.on_prem_cidrs)}): cloud "
                "nodes could not reach slurmctld over the link",
                "add the controller's network to onPremCidrs, or give the address the VPC routes to (no NAT between sites)",
                str(address),
                "hybrid-controller-outside-site",
            )
    if hybrid.kubernetes is not None:
        for path, net in site_networks(hybrid):
            if ".kubernetes." in path and not any(net.subnet_of(r) for r in HYBRID_NODE_RANGES):
                yield error(
                    path,
                    f"{net} is neither RFC 1918 nor 100.64.0.0/10, which EKS requires of remote node and pod networks",
                    "use networks inside 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10",
                    str(net),
                    "hybrid-remote-cidr-range",
                )


def check_link(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Large tunnels need a Transit Gateway; gateway ids the chosen type would ignore; the two BGP ASNs differ."""
    link = hybrid.connectivity
    if link.tunnel_bandwidth == "large" and link.type not in TGW_TYPES:
        yield error(
            hybrid_path("connectivity.tunnelBandwidth"),
            f"large tunnels (up to 5 Gbps) run only on a Transit Gateway; connectivity type {link.type} has "
            + ("a virtual private gateway, limited to 1.25 Gbps per tunnel" if link.type == "vpn-vgw" else "no VPN tunnel"),
            "set connectivity.type: vpn-tgw (or existing-tgw), or tunnelBandwidth: standard",
            "large",
            "hybrid-large-tunnel-needs-tgw",
        )
    if link.transit_gateway_id is not None and link.type in ("vpn-vgw", "vpn-tgw"):
        yield error(
            hybrid_path("connectivity.transitGatewayId"),
            f"connectivity type {link.type} creates its own gateway and would ignore transitGatewayId",
            "use type: existing-tgw to attach to your Transit Gateway, or remove transitGatewayId",
            link.transit_gateway_id,
            "hybrid-gateway-ignored",
        )
    if link.vpn_gateway_id is not None and link.type != "direct-connect":
        yield error(
            hybrid_path("connectivity.vpnGatewayId"),
            f"connectivity type {link.type} does not use an existing virtual private gateway",
            "use type: direct-connect for a gateway your Direct Connect already reaches, or remove vpnGatewayId",
            link.vpn_gateway_id,
            "hybrid-gateway-ignored",
        )
    if link.bgp_asn is not None and link.bgp_asn == link.amazon_side_asn:
        yield error(
            hybrid_path("connectivity.bgpAsn"),
            f"the site's BGP ASN {link.bgp_asn} is also the AWS side's (amazonSideAsn): the BGP sessions would not come up",
            "give the site its own ASN, or set amazonSideAsn to another private ASN (64512-65534)",
            link.bgp_asn,
            "hybrid-asn-equal",
        )


def check_dns(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Resolver endpoints take an address in two zones; the site's resolvers are reached over the link."""
    if hybrid.dns is None:
        return
    zones = sorted({s.availability_zone for s in spec.network.subnets}) if not spec.network.create_vpc else spec.zones
    if len(zones) < 2:
        where = "network.subnets" if not spec.network.create_vpc else "network.availabilityZones"
        yield error(
            hybrid_path("dns"),
            f"Route 53 Resolver endpoints need subnets in two availability zones; the cluster has {len(zones)} "
            f"({', '.join(zones) or 'none'})",
            f"add a second zone to gpucluster:{where}, e.g. [{spec.region}a, {spec.region}b]",
            list(zones),
            "hybrid-dns-zones",
        )
    site = [Net(c) for c in hybrid.on_prem_cidrs]
    for i, resolver in enumerate(hybrid.dns.on_prem_resolvers):
        if not any(ipaddress.IPv4Address(resolver) in s for s in site):
            yield error(
                hybrid_path(f"dns.onPremResolvers[{i}]"),
                f"resolver {resolver} is not inside onPremCidrs ({', '.join(hybrid.on_prem_cidrs)}): the outbound "
                "endpoint could not reach it over the link",
                "list the site's DNS servers by the addresses the VPC routes to, or add their network to onPremCidrs",
                resolver,
                "hybrid-resolver-outside-site",
            )


def check_eks(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """EKS Hybrid Nodes join this cluster's EKS control plane: it must exist and serve one endpoint kind."""
    if hybrid.kubernetes is None:
        return
    if spec.kubernetes is None:
        yield error(
            hybrid_path("kubernetes"),
            "EKS Hybrid Nodes join this cluster's EKS control plane, but the cluster has no gpucluster:kubernetes section",
            "add gpucluster:kubernetes (an EKS cluster), or remove hybrid.kubernetes",
            None,
            "hybrid-needs-eks",
        )
        return
    endpoint = spec.kubernetes.endpoint
    if endpoint.public_access and endpoint.private_access:
        yield error(
            "gpucluster:kubernetes.endpoint",
            "EKS Hybrid Nodes need the API endpoint public or private, not both: with both, the endpoint name resolves "
            "to public addresses for the site's nodes",
            "set privateAccess: false (public endpoint with publicAccessCidrs) or publicAccess: false (private, over the link)",
            None,
            "hybrid-eks-endpoint",
        )
    yield from _node_certificates(hybrid)


def _node_certificates(hybrid: HybridSpec) -> Iterator[Finding]:
    """With Roles Anywhere, the hybrid node role trusts only certificates named ``<certificateCn>-<node>``, and that
    name is the node's Kubernetes name."""
    creds = hybrid.credentials
    if creds.type != "rolesanywhere":
        return
    path = hybrid_path("credentials.certificateCn")
    if not re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", creds.certificate_cn):
        yield error(
            path,
            f"the hybrid nodes' certificates are named {creds.certificate_cn}-<node>, their Kubernetes node names, which "
            "allow only lowercase letters, digits, . and -",
            "use a lowercase name prefix, e.g. gpu-node (certificates gpu-node-01, gpu-node-02 …)",
            creds.certificate_cn,
            "hybrid-node-cn",
        )
    elif "certificate_cn" not in creds.model_fields_set:
        yield warning(
            path,
            f"is not set: the hybrid node role then trusts only certificates named {creds.certificate_cn}-<node>",
            "set certificateCn to the prefix your CA names the site's GPU nodes with (gpu-node for gpu-node-01)",
            None,
            "hybrid-node-cn-default",
        )


HybridCheck = SectionCheck[HybridSpec]

HYBRID_CHECKS: tuple[HybridCheck, ...] = (
    check_cloud_overlap,
    check_site_overlap,
    check_inside_site,
    check_link,
    check_dns,
    check_eks,
    *SLURM_SITE_CHECKS,
)


def check_hybrid(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Every hybrid check, when the cluster has a ``hybrid`` section (a cluster check of :mod:`.cluster`)."""
    return section_findings(spec.hybrid, spec, catalog, HYBRID_CHECKS)
