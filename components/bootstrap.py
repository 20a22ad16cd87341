"""The base part of every GPU node's user data: node facts, the NCCL/EFA environment, an EFA check.

Storage, Slurm and Kubernetes add their own :class:`~components.render.CloudConfig` parts on top.
"""

from __future__ import annotations

import json

from components.render import CloudConfig, WriteFile, env_file, render
from components.spec.catalog import InstanceFacts
from components.spec.efa import efa_interface_count, interface_layout
from components.spec.nccl import library_dirs, nccl_environment
from components.spec.node_group import NodeGroupSpec

NODE_FACTS_PATH = "/etc/gpucluster/node.json"
NCCL_PROFILE_PATH = "/etc/profile.d/gpucluster-nccl.sh"
NCCL_ENV_PATH = "/etc/gpucluster/nccl.env"
EFA_CHECK_PATH = "/usr/local/sbin/gpucluster-efa-check"


def node_facts(cluster: str, group: NodeGroupSpec, facts: InstanceFacts) -> dict[str, object]:
    slots = interface_layout(facts, bool(group.enable_efa_support), group.efa_layout)
    return {
        "cluster": cluster,
        "nodeGroup": group.name,
        "instanceType": group.instance_type,
        "accelerator": facts.accelerator_model,
        "acceleratorCount": facts.accelerator_count,
        "efaInterfaces": efa_interface_count(slots),
        "efaLayout": group.efa_layout if group.enable_efa_support else None,
        "labels": dict(sorted(group.labels.items())),
    }


def base_bootstrap(cluster: str, group: NodeGroupSpec, facts: InstanceFacts) -> CloudConfig:
    efa = bool(group.enable_efa_support)
    env = nccl_environment(facts, efa, group.nccl_env)
    efa_count = efa_interface_count(interface_layout(facts, efa, group.efa_layout))
    profile = render(
        "node/nccl-env.sh.j2",
        instance_type=group.instance_type,
        cluster=cluster,
        node_group=group.name,
        efa_interfaces=efa_count,
        env=env,
        library_dirs=list(library_dirs(facts, efa)),
    )
    files = [
        WriteFile(NODE_FACTS_PATH, json.dumps(node_facts(cluster, group, facts), indent=2, sort_keys=True) + "\n"),
        WriteFile(NCCL_PROFILE_PATH, profile),
        WriteFile(NCCL_ENV_PATH, env_file(env)),
    ]
    runcmd: list[tuple[str, ...]] = []
    if efa_count:
        files.append(WriteFile(EFA_CHECK_PATH, render("node/efa-check.sh.j2", efa_interfaces=efa_count), "0755"))
        runcmd.append((EFA_CHECK_PATH,))
    return CloudConfig(write_files=tuple(files), runcmd=tuple(runcmd), sections=("node facts", "nccl/efa environment"))
