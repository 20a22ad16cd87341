"""The NCCL / libfabric environment a job needs on a node, from the instance's facts."""

from __future__ import annotations

from collections.abc import Mapping

from gpucluster.facts.catalog import InstanceFacts

# Where the AWS EFA installer and the DLAMIs put libfabric and the aws-ofi-nccl plugin.
EFA_LIB_DIRS = ("/opt/amazon/efa/lib", "/opt/amazon/ofi-nccl/lib", "/opt/aws-ofi-nccl/lib")
# Families whose EFA supports RDMA read/write, i.e. GPUDirect RDMA over EFA (p4d and newer, trn).
RDMA_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200", "trn1", "trn1n", "trn2", "trn2u")


def nccl_environment(facts: InstanceFacts, efa_enabled: bool, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for collective communication on ``facts`` nodes; ``overrides`` win."""
    env: dict[str, str] = {
        "NCCL_DEBUG": "WARN",
        "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
    }
    if efa_enabled and facts.efa_supported:
        env.update(
            {
                "FI_PROVIDER": "efa",
                "FI_EFA_FORK_SAFE": "1",
            }
        )
        if facts.family in RDMA_FAMILIES:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    env.update(overrides or {})
    return dict(sorted(env.items()))


def library_dirs(facts: InstanceFacts, efa_enabled: bool) -> tuple[str, ...]:
    """Directories to prepend to ``LD_LIBRARY_PATH`` (libfabric with EFA, the aws-ofi-nccl plugin)."""
    return EFA_LIB_DIRS if efa_enabled and facts.efa_supported else ()
