"""The NCCL environment on both sides of a hybrid Slurm cluster, and the guard that keeps a job on one side.

The site's GPU servers talk over their own fabric (RoCE v2 or InfiniBand, NCCL's internal ``IB`` transport over
verbs); the cloud nodes over EFA (the aws-ofi-nccl plugin, SRD). The two never interoperate: a communicator that
mixes them only works over TCP sockets across the VPN (docs/hybrid.md). So a job never spans
the two sides, enforced twice:

1. **Partition design** (the bundle's ``cloud.conf``): cloud partitions hold cloud nodes only, named apart from the
   site's partitions, and the cloud nodes get their own topology switch tree with no common parent with the site's.
2. **The TaskProlog** rendered here, which both sides run (``TaskProlog=`` names :data:`HYBRID_TASK_PROLOG`; the
   cloud nodes' user data writes it, the bundle ships it for the site's nodes): it expands the job's node list and,
   when it holds cloud nodes and site nodes both, fails every task of the step before the program starts (slurmstepd
   ends a task whose TaskProlog exits non-zero; the node stays in service). Otherwise it prints the node's side's
   environment: the EFA environment of the cloud node (``/etc/gpucluster/nccl.env``, written by its user data) or the
   site's RoCE / InfiniBand environment, which is part of the script itself. Variables the job set itself win.
"""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.hybrid import ControllerSpec, HybridSpec
from gpucluster.facts.nccl import EFA_LIB_DIRS
from gpucluster.render.compute.node import NCCL_ENV_PATH
from gpucluster.render.core import env_file, render
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup

HYBRID_TASK_PROLOG = "/etc/gpucluster/slurm/hybrid-task-prolog"
"""Where both sides keep the TaskProlog: the cloud nodes' user data writes it, the site installs it on its nodes."""

# NCCL's internal transport over verbs (InfiniBand and RoCE alike); forcing it means a site node that lost its HCAs
# fails loudly instead of falling back to TCP sockets at a fraction of the speed.
NCCL_IB_NET = "IB"
# Mellanox/NVIDIA ConnectX devices: a prefix, so every mlx5_N port of the node is used.
ONPREM_HCA_PREFIX = "mlx5"
# The GID table index of RoCE v2 over IPv4 on ConnectX adapters with the default GID table (0/1: RoCE v1/v2 over the
# link-local IPv6 address, 2/3: v1/v2 over the IPv4-mapped address).
ROCE_V2_GID_INDEX = "3"
BOOTSTRAP_IFNAME = "^docker,lo,veth"  # bootstrap sockets: every interface but these


def onprem_nccl_environment(fabric: str) -> dict[str, str]:
    """The NCCL environment of the site's GPU servers on ``fabric`` (``roce`` or ``infiniband``)."""
    if fabric not in ("roce", "infiniband"):
        raise ValueError(f"unknown site fabric {fabric!r}: roce or infiniband")
    env = {
        "NCCL_DEBUG": "WARN",
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_HCA": ONPREM_HCA_PREFIX,
        "NCCL_NET": NCCL_IB_NET,
        "NCCL_SOCKET_IFNAME": BOOTSTRAP_IFNAME,
    }
    if fabric == "roce":
        env["NCCL_IB_GID_INDEX"] = ROCE_V2_GID_INDEX
        env["NCCL_IB_ROCE_VERSION_NUM"] = "2"
    return dict(sorted(env.items()))


def cloud_node_patterns(groups: tuple[ResolvedNodeGroup, ...]) -> list[str]:
    """The node-name prefixes of the cloud nodes: the agent names them ``<group>-<n>``
    (:func:`gpucluster_agents.contract.node_names`)."""
    return [f"{g.name}-" for g in groups]


def hybrid_task_prolog(cluster: ResolvedCluster) -> str:
    """The TaskProlog both sides run (see the module's docstring): the bundle ships it, the cloud user data writes it."""
    hybrid = hybrid_of(cluster.spec)
    groups = cluster.burst_groups
    efa = any(g.uses_efa for g in groups)
    return render(
        "hybrid/compute/task-prolog.sh.j2",
        site=hybrid.site,
        fabric=hybrid.fabric,
        cloud_prefixes=cloud_node_patterns(groups),
        cloud_env=NCCL_ENV_PATH,
        onprem_env=env_file(onprem_nccl_environment(hybrid.fabric)),
        efa_library_dirs=list(EFA_LIB_DIRS) if efa else [],
    )


def hybrid_of(spec: ClusterSpec) -> HybridSpec:
    if spec.hybrid is None or spec.hybrid.controller is None:
        raise ValueError(f"cluster {spec.name!r} has no hybrid.controller: there is no site controller to join")
    return spec.hybrid


def site_controller(spec: ClusterSpec) -> ControllerSpec:
    """The site's own slurmctld the cloud nodes join (``hybrid.controller``); a ValueError when there is none."""
    controller = hybrid_of(spec).controller
    if controller is None:
        raise ValueError(f"cluster {spec.name!r} has no hybrid.controller: there is no site controller to join")
    return controller
