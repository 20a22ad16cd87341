"""Slurm's own files on the head node: ``slurm.conf`` (node, partition and GRES lines computed from the
resolved node groups' facts), ``gres.conf``, ``cgroup.conf``, the first ``topology.conf`` and
``slurmdbd.conf``. Compute nodes get them from slurmctld (configless)."""

from __future__ import annotations

from gpucluster.config.slurm import SLURM_VERSION, UBUNTU_RELEASE
from gpucluster.config.slurm.teams import gpu_type
from gpucluster.facts.catalog import InstanceFacts
from gpucluster.render.core import render
from gpucluster.render.slurm.containers import container_conf_lines
from gpucluster.render.slurm.health import health_conf_lines
from gpucluster.render.slurm.names import (
    AGENT_BIN,
    PROGRAMS,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMDBD_PORT,
    STATE_SAVE_LOCATION,
    TASK_PROLOG,
    SlurmContext,
    controller_address,
    head_hostname,
)
from gpucluster.render.slurm.priority import accounting_lines, billing_part
from gpucluster.render.slurm.privacy import merge_comma_keys, privacy_lines
from gpucluster.render.slurm.versions import version_lines
from gpucluster.resolve.compute.node_group import SlurmGroup
from gpucluster_agents.contract import hostrange

# RealMemory is 95 % of what EC2 lists (the kernel and the OS keep the rest): slurmd must report at
# least RealMemory or Slurm drains the node. AWS ParallelCluster uses the same share.
REAL_MEMORY_SHARE = 0.95
PURGE_KEYS = ("PurgeEventAfter", "PurgeJobAfter", "PurgeResvAfter", "PurgeStepAfter", "PurgeSuspendAfter", "PurgeTXNAfter")


# --- node and partition lines ---------------------------------------------------------------------------


def real_memory_mib(facts: InstanceFacts) -> int:
    return int(facts.memory_mib * REAL_MEMORY_SHARE)


def gres_name(facts: InstanceFacts) -> str | None:
    """``gpu`` for GPUs, ``neuron`` for Trainium/Inferentia devices, None without accelerators."""
    kinds = {a.kind for a in facts.accelerators}
    return "gpu" if "gpu" in kinds else "neuron" if "neuron" in kinds else None


def gres_type(facts: InstanceFacts) -> str:
    """A GPU's Slurm GRES type: its model in lower case (``H100`` → ``h100``), so ``--gres=gpu:h100:8``."""
    return gpu_type(facts)


def node_gres(facts: InstanceFacts) -> str | None:
    name = gres_name(facts)
    if name == "gpu":
        return f"gpu:{gres_type(facts)}:{facts.gpu_count}"
    if name == "neuron":
        return f"neuron:{facts.accelerator_count}"
    return None


def device_files(facts: InstanceFacts) -> str:
    """``/dev/nvidia[0-7]`` (GPUs) or ``/dev/neuron[0-15]`` (Neuron devices)."""
    base = "/dev/nvidia" if gres_name(facts) == "gpu" else "/dev/neuron"
    n = facts.accelerator_count
    return f"{base}0" if n == 1 else f"{base}[0-{n - 1}]"


def node_features(g: SlurmGroup) -> list[str]:
    """What ``--constraint`` can select: dynamic/static, instance type, accelerator model, efa, zones."""
    facts, entry = g.facts, g.entry
    features = [entry.mode, g.instance_type]
    if facts.accelerator_model:
        features.append(gres_type(facts) or facts.accelerator_model.lower())
    if g.efa:
        features.append("efa")
    features += list(g.spec.availability_zones)
    features += [f for f in entry.features if f not in features]
    return features


def node_line(g: SlurmGroup) -> str:
    facts, entry = g.facts, g.entry
    parts = [
        f"NodeName={hostrange(g.name, g.max_size)}",
        "State=CLOUD",
        f"CPUs={facts.vcpus}",
        f"RealMemory={real_memory_mib(facts)}",
    ]
    gres = node_gres(facts)
    if gres:
        parts.append(f"Gres={gres}")
    parts.append(f"Features={','.join(node_features(g))}")
    if entry.weight is not None:
        parts.append(f"Weight={entry.weight}")
    return " ".join(parts)


def partition_line(g: SlurmGroup, *, default: bool | None = None, billing: str | None = None) -> str:
    """The group's partition line; ``default`` overrides the group's own ``Default=`` (a site's cloud partitions);
    ``billing``: its ``TRESBillingWeights=…`` (with accounting)."""
    facts, entry = g.facts, g.entry
    is_default = entry.default if default is None else default
    parts = [
        f"PartitionName={g.partition}",
        f"Nodes={hostrange(g.name, g.max_size)}",
        f"Default={'YES' if is_default else 'NO'}",
        "MaxTime=INFINITE",
        "State=UP",
        # Memory is scheduled (CR_Core_Memory): a job that asks for none gets its cores' share.
        f"DefMemPerCPU={real_memory_mib(facts) // max(facts.vcpus, 1)}",
    ]
    if entry.priority_tier is not None:
        parts.append(f"PriorityTier={entry.priority_tier}")
    if billing is not None:
        parts.append(billing)
    return " ".join(parts)


def gres_line(g: SlurmGroup) -> str | None:
    facts = g.facts
    name = gres_name(facts)
    if name is None:
        return None
    typed = f" Type={gres_type(facts)}" if name == "gpu" else ""
    return f"NodeName={hostrange(g.name, g.max_size)} Name={name}{typed} File={device_files(facts)}"


# --- the files ----------------------------------------------------------------------------------------------


def slurm_conf(ctx: SlurmContext) -> str:
    slurm = ctx.slurm
    groups = ctx.node_groups
    ps = slurm.power_saving
    health = health_conf_lines(ctx)
    health += container_conf_lines(ctx, prolog_named=any(line.startswith("Prolog=") for line in health))
    versioned, privacy, health = merge_comma_keys(version_lines(ctx.slurm_version), privacy_lines(), health)
    return render(
        "slurm/slurm.conf.j2",
        cluster=ctx.cluster,
        slurm_version=ctx.slurm_version,
        ubuntu=UBUNTU_RELEASE if ctx.slurm_version == SLURM_VERSION else None,
        version_lines=versioned,
        privacy_lines=privacy,
        controller_host=head_hostname(ctx.cluster),
        controller_address=controller_address(ctx.cluster),
        slurmctld_port=SLURMCTLD_PORT,
        slurmd_port=SLURMD_PORT,
        srun_ports=ctx.srun_ports,
        state_save_location=STATE_SAVE_LOCATION,
        gres_types=sorted({n for g in groups if (n := gres_name(g.facts))}),
        task_prolog=TASK_PROLOG,
        accounting=slurm.accounting is not None,
        programs={key: f"{AGENT_BIN}/{name}" for key, name, _ in PROGRAMS},
        suspend_time=ps.suspend_time_seconds,
        resume_timeout=ps.resume_timeout_seconds,
        suspend_timeout=ps.suspend_timeout_seconds,
        suspend_exc_parts=[g.partition for g in groups if g.static],
        health_lines=health,
        accounting_lines=accounting_lines(ctx, [gres_type(g.facts) for g in groups if gres_name(g.facts) == "gpu"]),
        settings=[f"{key}={value}" for key, value in slurm.settings.items()],
        node_lines=[node_line(g) for g in groups],
        partition_lines=[partition_line(g, billing=billing_part(ctx)) for g in groups],
    )


def gres_conf(ctx: SlurmContext) -> str:
    lines = [line for g in ctx.node_groups if (line := gres_line(g))]
    return render("slurm/gres.conf.j2", cluster=ctx.cluster, lines=lines)


def cgroup_conf(ctx: SlurmContext) -> str:
    return render("slurm/cgroup.conf.j2", cluster=ctx.cluster)


def topology_conf(ctx: SlurmContext) -> str:
    """The topology.conf before any node runs: what the agent itself writes with nothing placed (one
    switch per node group, joined under ``root``). The agent rewrites it from DescribeInstanceTopology."""
    from gpucluster_agents.contract.topology import render_topology

    lines = render_topology({}, [(g.name, g.node_names) for g in ctx.node_groups])
    return "\n".join(lines) + "\n"


def slurmdbd_conf(ctx: SlurmContext) -> str:
    slurm = ctx.slurm
    months = slurm.accounting.purge_after_months if slurm.accounting else 12
    return render("slurm/slurmdbd.conf.j2", cluster=ctx.cluster, port=SLURMDBD_PORT, purge_keys=PURGE_KEYS, purge_months=months)
