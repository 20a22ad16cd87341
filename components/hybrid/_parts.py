"""GpuCluster's hybrid parts: the link to an on-premises site and, for a Slurm site, its agent's credentials.

:class:`~gpucluster.components.gpu_cluster.GpuCluster` builds the Slurm node groups first (in hybrid mode,
without a head node: :mod:`gpucluster.components.slurm._hybrid`), then calls :func:`create_hybrid`: the link
needs the network, the credentials need the burst groups' launch templates, the nodes' role and the munge
secret.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from gpucluster.components._shared.build import part
from gpucluster.components.hybrid.hybrid_link import TOKEN as LINK
from gpucluster.components.hybrid.hybrid_link import LinkParts, LinkWiring, build_hybrid_link, check_link
from gpucluster.components.hybrid.onprem_credentials import TOKEN as CREDENTIALS
from gpucluster.components.hybrid.onprem_credentials import CredentialsParts, CredentialsWiring, build_onprem_credentials
from gpucluster.components.network.network import NetworkParts
from gpucluster.components.slurm.slurm_cluster import SlurmParts
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import burst_group_names, partition_of


@dataclass(frozen=True)
class HybridParts:
    link: LinkParts
    credentials: CredentialsParts | None
    """The site agent's credentials; none for a site without a controller (EKS Hybrid Nodes only)."""
    burst_node_groups: tuple[str, ...]
    """The Slurm node groups the site bursts into (``burstNodeGroups``, else every Slurm group)."""


def create_hybrid(
    name: str,
    spec: ClusterSpec,
    network: NetworkParts,
    slurm: SlurmParts | None,
    tags: dict[str, str],
    parent: pulumi.ComponentResource,
) -> HybridParts:
    """The link (every hybrid cluster) and the site agent's credentials (a Slurm site)."""
    hybrid = spec.hybrid
    if hybrid is None:
        raise ValueError("the cluster has no hybrid section")
    wiring = LinkWiring(
        cluster_name=spec.name,
        vpc_id=network.vpc_id,
        vpc_cidr=network.vpc_cidr,
        private_subnet_ids=list(network.private_subnet_ids.values()),
        private_route_table_ids=dict(network.private_route_table_ids),
        tags=tags,
    )
    check_link(hybrid, wiring)
    link = build_hybrid_link(part(LINK, f"{name}-link", parent), f"{name}-link", hybrid, wiring)
    groups = burst_group_names(spec)
    credentials = None
    if hybrid.controller is not None and slurm is not None and spec.slurm is not None:
        if slurm.munge_key_arn is None:
            raise ValueError("a site's munge secret has a KMS key of its own (hybrid mode)")
        slurm_spec = spec.slurm
        dynamic = tuple(g for g in groups if slurm_spec.group_settings(g).mode == "dynamic")
        credentials = build_onprem_credentials(
            part(CREDENTIALS, f"{name}-{hybrid.site}-agent", parent),
            f"{name}-{hybrid.site}-agent",
            hybrid,
            CredentialsWiring(
                cluster_name=spec.name,
                region=spec.region,
                munge_secret_arn=slurm.munge_secret_arn,
                munge_key_arn=slurm.munge_key_arn,
                rights=slurm.launch_rights(dynamic),
                tags=tags,
            ),
        )
    return HybridParts(link, credentials, groups)


def hybrid_secrets(parts: HybridParts) -> dict[str, pulumi.Output[Any]]:
    """The stack's secret hybrid outputs, each its own (a secret inside ``hybrid`` would make all of it
    secret): ``hybridTunnelKeys`` (the VPN tunnels' pre-shared keys) and ``hybridActivationCode``."""
    out: dict[str, pulumi.Output[Any]] = {}
    if parts.link.tunnel_preshared_keys is not None:
        out["hybridTunnelKeys"] = parts.link.tunnel_preshared_keys
    if parts.credentials is not None and parts.credentials.activation_code is not None:
        out["hybridActivationCode"] = parts.credentials.activation_code
    return out


def hybrid_outputs(
    parts: HybridParts,
    slurm: SlurmParts | None,
    spec: ClusterSpec,
    subnets_for: Callable[[NodeGroupSpec], Sequence[pulumi.Input[str]]],
) -> dict[str, Any]:
    """The stack's ``hybrid`` output (plain): what the site needs to connect (link, DNS), what the bundle for
    its controller is rendered from (credentials, munge secret, burst groups' templates and subnets) and the
    cloud nodes' Slurm security group. The secrets are outputs of their own (:func:`hybrid_secrets`)."""
    hybrid = spec.hybrid
    if hybrid is None:
        raise ValueError("the cluster has no hybrid section")
    link = parts.link
    out: dict[str, Any] = {
        "site": hybrid.site,
        "link": {
            "type": hybrid.connectivity.type,
            "gatewayId": link.gateway_id,
            "customerGatewayId": link.customer_gateway_id,
            "vpnConnectionId": link.vpn_connection_id,
            "transitGatewayAttachmentId": link.transit_gateway_attachment_id,
            "tunnelAddresses": link.tunnel_addresses,
        },
        "dns": {
            "outboundResolverEndpointId": link.outbound_resolver_endpoint_id,
            "inboundResolverIps": link.inbound_resolver_ips,
        },
    }
    creds = parts.credentials
    if creds is not None:
        out["credentials"] = {
            "type": hybrid.credentials.type,
            "roleArn": creds.role_arn,
            "trustAnchorArn": creds.trust_anchor_arn,
            "profileArn": creds.profile_arn,
            "activationId": creds.activation_id,
        }
    if slurm is not None and spec.slurm is not None and hybrid.controller is not None:
        slurm_spec = spec.slurm
        out["slurm"] = {
            "controller": hybrid.controller.address,
            "mungeKeySecretArn": slurm.munge_secret_arn,
            "mungeKeyKmsKeyArn": slurm.munge_key_arn,
            "nodeSecurityGroupId": slurm.hybrid_security_group_id,
            "nodeRoleArn": slurm.node_role_arn,
            "burstNodeGroups": {
                g: {
                    "partition": partition_of(slurm_spec.group_settings(g)),
                    "mode": slurm_spec.group_settings(g).mode,
                    "instanceType": spec.node_group(g).instance_type,
                    "launchTemplateId": slurm.node_groups[g].launch_template_id,
                    "subnetIds": subnets_for(spec.node_group(g)),
                    # with the two above, the agent's LaunchTarget (gpucluster.render.slurm.agent)
                    "placementGroupName": slurm.node_groups[g].placement_group_name,
                }
                for g in parts.burst_node_groups
            },
        }
    return out
