"""Slurm rendering: node, partition and GRES lines computed from the spec and the instance catalog;
templates in ``templates/slurm/`` only place them. Pure (no Pulumi): values that only AWS knows (launch
template ids, the data volume id, the agent bundle's bucket) come in as plain arguments.

The files and where they go:

- head node (cloud-init ``write_files``): ``/etc/slurm/slurm.conf``, ``gres.conf``, ``cgroup.conf``,
  ``slurmdbd.conf`` (with accounting), the initial ``topology.conf`` (the agent rewrites it), the agent's
  ``/etc/gpucluster/agent.json``, the Resume/Suspend/ResumeFail wrappers, systemd units, and the setup
  script that runs once.
- compute nodes (added to :meth:`GpuCluster.node_user_data` as the ``extra`` part): the setup script
  that waits for the node's name tag and starts ``slurmd --conf-server … -N <node>``, the TaskProlog
  that gives every task the node's NCCL/EFA environment, and a slurmd drop-in. Slurm's own files
  come from slurmctld (configless).

Who may reach the instance role's credentials (the IMDS guard)
--------------------------------------------------------------

A compute node's role may read the munge key, and whoever holds the munge key can forge any user's
identity to every Slurm daemon (root on every node included). A head node's role launches and
terminates the cluster's instances. Slurm jobs are host processes of their user: IMDSv2's hop limit of
1 stops containers, not them. So on EVERY Slurm node an iptables rule set (``imds-guard.sh.j2``) lets
only root reach IMDS (169.254.169.254 and, where it exists, fd00:ec2::254) on compute nodes, and only
root and SlurmUser (the agent runs as slurm) on the head node; every other user gets a TCP reset.

When it is in place, on a compute node:

- at every boot, first: cloud-init's ``bootcmd`` (the first module of its first networked stage,
  before ``write_files``, before logins are allowed and before anything of Slurm) writes the guard
  script, which travels inside that very command, and runs it. ``write_files`` is too late for this:
  it runs after ``bootcmd``;
- at every boot, also: ``gpucluster-imds-guard.service`` (no default dependencies, before
  ``network-pre.target``, wanted by ``sysinit.target``: the slot of a firewall) runs the same script;
- the node setup starts that unit before munge and slurmd, and slurmd's drop-in ``Requires=`` it: if
  the guard cannot be applied (say the image had no iptables: the setup installs it), slurmd does not
  start, and without slurmd no job, so no user process, ever runs on the node. Fail closed.

The script applies its rules as one ``iptables-restore --noflush`` transaction (the chain is never
empty while being rebuilt) and exits non-zero unless OUTPUT jumps to it. It relies on the image
having ``iptables`` (Ubuntu's server images do, for ufw; either backend works), which the setup also
installs (``NODE_PACKAGES``). Defence in depth for the key itself: the boot helper (root) writes
``/etc/munge/munge.key`` 0400 munge:munge, so jobs cannot read it from the disk either. The compute
role can read that one secret and nothing else (plus Session Manager). ``tests/agents/test_imds_guard_e2e.py``
runs a real slurmctld and slurmd in a network namespace with a fake IMDS and the guard taken from the
rendered user data: a job of an unprivileged user gets no token and no credentials; root's gets both.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import gpucluster_agents
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.config.slurm import SLURM_VERSION, UBUNTU_RELEASE, SlurmNodeGroupSpec, SlurmSpec
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.nccl import library_dirs
from gpucluster.render.core import CloudConfig, WriteFile, render
from gpucluster.render.node import NCCL_ENV_PATH, LustreMount, lustre_mount_script
from gpucluster_agents import contract
from gpucluster_agents.contract import hostrange, node_names

# Ports and paths (Ubuntu's slurm-wlm packaging: /etc/slurm, /var/log/slurm, SlurmUser slurm).
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SLURM_ETC = "/etc/slurm"
DATA_DIR = "/srv/slurm"  # the head node's data volume
STATE_SAVE_LOCATION = f"{DATA_DIR}/slurmctld"
AGENT_STATE_DIR = f"{DATA_DIR}/agent"  # launch journal and holds survive a new head node
TOPOLOGY_DIR = "/var/lib/gpucluster/slurm"  # the agent (user slurm) rewrites topology.conf here
AGENT_CONFIG_PATH = "/etc/gpucluster/agent.json"
AGENT_PACKAGE_PATH = "/etc/gpucluster/agent-package.json"  # bucket, key and sha256 of the agent's zip
AGENT_LIB = "/opt/gpucluster/lib"
AGENT_BIN = "/opt/gpucluster/bin"
AGENT_LOG = "/var/log/slurm/gpucluster-agent.log"
AWS_HELPER = "/usr/local/sbin/gpucluster-aws"
HEAD_SETUP = "/usr/local/sbin/gpucluster-slurm-head"
NODE_SETUP = "/usr/local/sbin/gpucluster-slurm-node"
IMDS_GUARD = "/usr/local/sbin/gpucluster-imds-guard"
IMDS_GUARD_UNIT = "gpucluster-imds-guard.service"
IMDS_IPV4 = "169.254.169.254/32"
IMDS_IPV6 = "fd00:ec2::254/128"
TASK_PROLOG = "/etc/gpucluster/slurm/task-prolog"
# slurm.conf key, wrapper under AGENT_BIN, agent subcommand
PROGRAMS = (
    ("ResumeProgram", "slurm-resume", "resume"),
    ("SuspendProgram", "slurm-suspend", "suspend"),
    ("ResumeFailProgram", "slurm-resume-fail", "resume-fail"),
)
# Ubuntu 24.04 (noble) packages. python3-boto3 runs the agent and the boot helper.
HEAD_PACKAGES = ("slurmctld", "slurm-client", "munge", "python3-boto3", "iptables")
ACCOUNTING_PACKAGES = ("slurmdbd", "mariadb-server")
NODE_PACKAGES = ("slurmd", "slurm-client", "munge", "python3-boto3", "iptables")
# RealMemory is 95 % of what EC2 lists (the kernel and the OS keep the rest): slurmd must report at
# least RealMemory or Slurm drains the node. AWS ParallelCluster uses the same share.
REAL_MEMORY_SHARE = 0.95
NODE_NAME_WAIT_TRIES = 180  # × 5 s: the node waits up to 15 min for its name tag
PURGE_KEYS = ("PurgeEventAfter", "PurgeJobAfter", "PurgeResvAfter", "PurgeStepAfter", "PurgeSuspendAfter", "PurgeTXNAfter")


def head_hostname(cluster: str) -> str:
    return f"{cluster}-head"


def dns_zone(cluster: str) -> str:
    """The private hosted zone of the cluster (``.internal`` is reserved for private use)."""
    return f"{cluster}.gpucluster.internal"


def controller_address(cluster: str) -> str:
    """The name compute nodes reach slurmctld at: an A record in the cluster's private zone, pointing
    at the head node's own network interface (its address survives a new head node)."""
    return f"slurmctld.{dns_zone(cluster)}"


def munge_secret_name(cluster: str) -> str:
    return f"gpucluster/{cluster}/munge-key"


# --- node and partition lines ---------------------------------------------------------------------------


def real_memory_mib(facts: InstanceFacts) -> int:
    return int(facts.memory_mib * REAL_MEMORY_SHARE)


def gres_name(facts: InstanceFacts) -> str | None:
    """``gpu`` for GPUs, ``neuron`` for Trainium/Inferentia devices, None without accelerators."""
    kinds = {a.kind for a in facts.accelerators}
    return "gpu" if "gpu" in kinds else "neuron" if "neuron" in kinds else None


def gres_type(facts: InstanceFacts) -> str:
    """A GPU's Slurm GRES type: its model in lower case (``H100`` → ``h100``), so ``--gres=gpu:h100:8``."""
    return re.sub(r"[^a-z0-9]", "", (facts.accelerator_model or "").lower())


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


def node_features(group: NodeGroupSpec, facts: InstanceFacts, entry: SlurmNodeGroupSpec) -> list[str]:
    """What ``--constraint`` can select: dynamic/static, instance type, accelerator model, efa, zones."""
    features = [entry.mode, group.instance_type]
    if facts.accelerator_model:
        features.append(gres_type(facts) or facts.accelerator_model.lower())
    if group.enable_efa_support:
        features.append("efa")
    features += list(group.availability_zones)
    features += [f for f in entry.features if f not in features]
    return features


def node_line(group: NodeGroupSpec, facts: InstanceFacts, entry: SlurmNodeGroupSpec) -> str:
    parts = [
        f"NodeName={hostrange(group.name, group.max_size)}",
        "State=CLOUD",
        f"CPUs={facts.vcpus}",
        f"RealMemory={real_memory_mib(facts)}",
    ]
    gres = node_gres(facts)
    if gres:
        parts.append(f"Gres={gres}")
    parts.append(f"Features={','.join(node_features(group, facts, entry))}")
    if entry.weight is not None:
        parts.append(f"Weight={entry.weight}")
    return " ".join(parts)


def partition_line(group: NodeGroupSpec, facts: InstanceFacts, entry: SlurmNodeGroupSpec) -> str:
    parts = [
        f"PartitionName={entry.partition or group.name}",
        f"Nodes={hostrange(group.name, group.max_size)}",
        f"Default={'YES' if entry.default else 'NO'}",
        "MaxTime=INFINITE",
        "State=UP",
        # Memory is scheduled (CR_Core_Memory): a job that asks for none gets its cores' share.
        f"DefMemPerCPU={real_memory_mib(facts) // max(facts.vcpus, 1)}",
    ]
    if entry.priority_tier is not None:
        parts.append(f"PriorityTier={entry.priority_tier}")
    return " ".join(parts)


def gres_line(group: NodeGroupSpec, facts: InstanceFacts) -> str | None:
    name = gres_name(facts)
    if name is None:
        return None
    typed = f" Type={gres_type(facts)}" if name == "gpu" else ""
    return f"NodeName={hostrange(group.name, group.max_size)} Name={name}{typed} File={device_files(facts)}"


# --- the cluster's view -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmContext:
    """What the Slurm files are rendered from: the cluster's name and region, its resolved Slurm section
    and its Slurm node groups (resolved, config order)."""

    cluster: str
    region: str
    slurm: SlurmSpec
    node_groups: tuple[NodeGroupSpec, ...]

    @classmethod
    def of(cls, spec: ClusterSpec) -> SlurmContext:
        if spec.slurm is None:
            raise ValueError(f"cluster {spec.name!r} has no Slurm section")
        return cls(spec.name, spec.region, spec.slurm, tuple(spec.groups_for("slurm")))


@dataclass(frozen=True)
class SlurmGroup:
    """A Slurm node group with its facts and resolved settings."""

    group: NodeGroupSpec
    facts: InstanceFacts
    entry: SlurmNodeGroupSpec

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def static(self) -> bool:
        return self.entry.mode == "static"

    @property
    def node_names(self) -> list[str]:
        return node_names(self.name, self.group.max_size)


def slurm_groups(ctx: SlurmContext, catalog: Catalog) -> list[SlurmGroup]:
    """The Slurm node groups with their facts and settings, in config order."""
    return [SlurmGroup(g, catalog[g.instance_type], ctx.slurm.settings(g.name)) for g in ctx.node_groups]


def slurm_conf(ctx: SlurmContext, catalog: Catalog) -> str:
    slurm = ctx.slurm
    groups = slurm_groups(ctx, catalog)
    ps = slurm.power_saving
    return render(
        "slurm/slurm.conf.j2",
        cluster=ctx.cluster,
        slurm_version=SLURM_VERSION,
        ubuntu=UBUNTU_RELEASE,
        controller_host=head_hostname(ctx.cluster),
        controller_address=controller_address(ctx.cluster),
        slurmctld_port=SLURMCTLD_PORT,
        slurmd_port=SLURMD_PORT,
        state_save_location=STATE_SAVE_LOCATION,
        gres_types=sorted({n for g in groups if (n := gres_name(g.facts))}),
        task_prolog=TASK_PROLOG,
        accounting=slurm.accounting is not None,
        programs={key: f"{AGENT_BIN}/{name}" for key, name, _ in PROGRAMS},
        suspend_time=ps.suspend_time_seconds,
        resume_timeout=ps.resume_timeout_seconds,
        suspend_timeout=ps.suspend_timeout_seconds,
        suspend_exc_parts=[g.entry.partition or g.name for g in groups if g.static],
        node_lines=[node_line(g.group, g.facts, g.entry) for g in groups],
        partition_lines=[partition_line(g.group, g.facts, g.entry) for g in groups],
    )


def gres_conf(ctx: SlurmContext, catalog: Catalog) -> str:
    lines = [line for g in slurm_groups(ctx, catalog) if (line := gres_line(g.group, g.facts))]
    return render("slurm/gres.conf.j2", cluster=ctx.cluster, lines=lines)


def cgroup_conf(ctx: SlurmContext) -> str:
    return render("slurm/cgroup.conf.j2", cluster=ctx.cluster)


def topology_conf(ctx: SlurmContext, catalog: Catalog) -> str:
    """The topology.conf before any node runs: what the agent itself writes with nothing placed (one
    switch per node group, joined under ``root``). The agent rewrites it from DescribeInstanceTopology."""
    from gpucluster_agents.topology import render_topology

    lines = render_topology({}, [(g.name, g.node_names) for g in slurm_groups(ctx, catalog)])
    return "\n".join(lines) + "\n"


def slurmdbd_conf(ctx: SlurmContext) -> str:
    slurm = ctx.slurm
    months = slurm.accounting.purge_after_months if slurm.accounting else 12
    return render("slurm/slurmdbd.conf.j2", cluster=ctx.cluster, port=SLURMDBD_PORT, purge_keys=PURGE_KEYS, purge_months=months)


# --- the agent's config -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchTarget:
    """What AWS made for one Slurm node group: plain values, resolved from the stack's outputs.

    The version is ``$Default`` (GpuNodeGroup makes every new version the default): a new AMI or user
    data for the compute nodes then does not change the head node's agent config."""

    launch_template_id: str
    subnet_ids: tuple[str, ...]
    placement_group: str | None = None
    launch_template_version: str = "$Default"


def agent_config(ctx: SlurmContext, catalog: Catalog, targets: Mapping[str, LaunchTarget]) -> contract.AgentConfig:
    """``/etc/gpucluster/agent.json`` (schema: :mod:`gpucluster_agents.contract`), from the stack's outputs."""
    groups: list[contract.NodeGroup] = []
    for g in slurm_groups(ctx, catalog):
        t = targets[g.name]
        cap = g.group.capacity
        groups.append(
            contract.NodeGroup(
                name=g.name,
                node_prefix=g.name,
                mode=g.entry.mode,
                max_nodes=g.group.max_size,
                instance_type=g.group.instance_type,
                launch_template_id=t.launch_template_id,
                launch_template_version=t.launch_template_version,
                subnet_ids=tuple(t.subnet_ids),
                efa_enabled=bool(g.group.enable_efa_support),
                placement_group=t.placement_group,
                capacity=contract.Capacity(cap.type, cap.reservation_id or None, cap.resource_group_arn or None),
            )
        )
    agent = ctx.slurm.agent
    return contract.AgentConfig(
        cluster_name=ctx.cluster,
        region=ctx.region,
        node_groups=tuple(groups),
        log_file=AGENT_LOG,
        state_dir=AGENT_STATE_DIR,
        slurm_bin_dir="/usr/bin",
        topology_conf=f"{TOPOLOGY_DIR}/topology.conf",
        insufficient_capacity_hold_seconds=agent.insufficient_capacity_hold_seconds,
        failure_hold_seconds=agent.failure_hold_seconds,
        orphan_grace_seconds=agent.orphan_grace_seconds,
    )


# --- the agent bundle ------------------------------------------------------------------------------------------

AGENT_PACKAGE = Path(gpucluster_agents.__file__).resolve().parent
ZIP_DATE = (2020, 1, 1, 0, 0, 0)


@functools.lru_cache(maxsize=4)
def agent_bundle(package: Path = AGENT_PACKAGE) -> bytes:
    """The ``gpucluster_agents`` package as a zip: sorted entries, fixed dates, so the same sources
    always give the same bytes (and the same sha256 in the plan)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".md"):
                info = zipfile.ZipInfo(f"{package.name}/{path.relative_to(package).as_posix()}", ZIP_DATE)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- cloud-init parts ------------------------------------------------------------------------------------------


def aws_helper(ctx: SlurmContext) -> str:
    return render(
        "slurm/gpucluster-aws.py.j2",
        cluster=ctx.cluster,
        region=ctx.region,
        secret_name=munge_secret_name(ctx.cluster),
        package_file=AGENT_PACKAGE_PATH,
        agent_owned=[f"{TOPOLOGY_DIR}/topology.conf"],
    )


def task_prolog(group: NodeGroupSpec, facts: InstanceFacts) -> str:
    return render(
        "slurm/task-prolog.sh.j2",
        nccl_env=NCCL_ENV_PATH,
        library_dirs=list(library_dirs(facts, bool(group.enable_efa_support))),
    )


SLURMD_DROP_IN = f"""# gpucluster: slurm.conf comes from slurmctld (configless), so there is none locally to wait for;
# jobs start after the shared file systems are mounted, and only while only root reaches the
# instance metadata service (no guard, no slurmd: no job can run).
[Unit]
ConditionPathExists=
Requires={IMDS_GUARD_UNIT}
After=remote-fs.target {IMDS_GUARD_UNIT}
"""


def imds_guard_script(*, head: bool) -> str:
    """The IMDS guard: root only on a compute node; root and SlurmUser (the agent) on the head node."""
    if head:
        users: tuple[str, ...] = ("0", "slurm")
        header = (
            "IMDS guard of the head node: only root and slurm (slurmctld runs the node agent as slurm)",
            "reach the instance metadata service; every other user gets a TCP reset. The instance role",
            "launches and terminates the cluster's nodes and reads the munge key.",
            "Runs at every boot before the network and before slurmctld (gpucluster-imds-guard.service).",
        )
    else:
        users = ("0",)
        header = (
            "IMDS guard of a compute node: only root reaches the instance metadata service; every other",
            "user, so every Slurm job, gets a TCP reset. The instance role reads the munge key, and the",
            "munge key forges any user to every Slurm daemon.",
            "Runs at every boot before the network and before munge and slurmd (cloud-init bootcmd, and",
            "gpucluster-imds-guard.service, which slurmd requires).",
        )
    return render("slurm/imds-guard.sh.j2", header=header, allowed_users=users, ipv4=IMDS_IPV4, ipv6=IMDS_IPV6)


def imds_guard_unit(*, head: bool) -> str:
    """Runs the guard at every boot in a firewall's slot: before any network, before Slurm."""
    who = "root and slurm reach" if head else "only root reaches"
    daemons = (
        "munge.service slurmctld.service slurmdbd.service gpucluster-agent-maintain.service"
        if head
        else "munge.service slurmd.service"
    )
    return _unit(
        f"gpucluster: {who} the instance metadata service",
        "DefaultDependencies=no\nWants=network-pre.target\n"
        f"Before=network-pre.target network-online.target {daemons} shutdown.target\n"
        "Conflicts=shutdown.target\n\n"
        f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={IMDS_GUARD}\n",
        "WantedBy=sysinit.target",
    )


# cloud-init's bootcmd: "$1" is the guard script; it is written where the unit finds it, then run.
GUARD_INSTALL = (
    f'f={IMDS_GUARD}; mkdir -p "${{f%/*}}" && printf %s "$1" >"$f.new" && chmod 0755 "$f.new" && mv -f "$f.new" "$f" && exec "$f"'
)


def imds_guard_bootcmd() -> tuple[str, ...]:
    """The compute node's first boot command: install and apply the guard (``bootcmd`` runs before
    ``write_files``, so the script travels in the command)."""
    return ("sh", "-c", GUARD_INSTALL, "gpucluster-imds-guard", imds_guard_script(head=False))


def node_slurm_part(ctx: SlurmContext, group: NodeGroupSpec, catalog: Catalog) -> CloudConfig:
    """The Slurm part of a compute node's user data (plain: nothing here waits for AWS)."""
    facts = catalog[group.instance_type]
    setup = render(
        "slurm/node-setup.sh.j2",
        cluster=ctx.cluster,
        controller=f"{controller_address(ctx.cluster)}:{SLURMCTLD_PORT}",
        packages=NODE_PACKAGES,
        aws_helper=AWS_HELPER,
        name_wait_tries=NODE_NAME_WAIT_TRIES,
        node_name_tag=contract.TAG_NODE_NAME,
        imds_guard_unit=IMDS_GUARD_UNIT,
    )
    return CloudConfig(
        write_files=(
            WriteFile.compressed(AWS_HELPER, aws_helper(ctx), "0755"),
            WriteFile(TASK_PROLOG, task_prolog(group, facts), "0755"),
            WriteFile(f"/etc/systemd/system/{IMDS_GUARD_UNIT}", imds_guard_unit(head=False)),
            WriteFile("/etc/systemd/system/slurmd.service.d/gpucluster.conf", SLURMD_DROP_IN),
            WriteFile.compressed(NODE_SETUP, setup, "0755"),
        ),
        bootcmd=(imds_guard_bootcmd(),),
        runcmd=((NODE_SETUP,),),
        sections=("slurmd (configless)",),
    )


@dataclass(frozen=True)
class AgentBundle:
    bucket: str
    key: str
    sha256: str


@dataclass(frozen=True)
class HeadInputs:
    """What the head node's user data needs from AWS, resolved."""

    data_volume_id: str
    agent: AgentBundle
    agent_config: contract.AgentConfig
    lustre: LustreMount | None = None


def _unit(description: str, body: str, install: str = "") -> str:
    text = f"# Generated by gpucluster.\n[Unit]\nDescription={description}\n{body}"
    return text + (f"\n[Install]\n{install}\n" if install else "")


def head_files(ctx: SlurmContext, catalog: Catalog, inputs: HeadInputs) -> tuple[WriteFile, ...]:
    """Every file the head node's cloud-init writes, Slurm's own configs first."""
    slurm = ctx.slurm
    accounting = slurm.accounting is not None
    files = [
        WriteFile(f"{SLURM_ETC}/slurm.conf", slurm_conf(ctx, catalog)),
        WriteFile(f"{SLURM_ETC}/gres.conf", gres_conf(ctx, catalog)),
        WriteFile(f"{SLURM_ETC}/cgroup.conf", cgroup_conf(ctx)),
        WriteFile(f"{TOPOLOGY_DIR}/topology.conf", topology_conf(ctx, catalog)),
    ]
    if accounting:
        files.append(WriteFile(f"{SLURM_ETC}/slurmdbd.conf", slurmdbd_conf(ctx), "0600"))
    files.append(WriteFile(AGENT_CONFIG_PATH, contract.to_json(inputs.agent_config)))
    package = {"bucket": inputs.agent.bucket, "key": inputs.agent.key, "sha256": inputs.agent.sha256, "dest": AGENT_LIB}
    files.append(WriteFile(AGENT_PACKAGE_PATH, json.dumps(package, indent=2, sort_keys=True) + "\n"))
    for key, name, command in PROGRAMS:
        wrapper = (
            f"#!/bin/sh\n# {key} of {ctx.cluster}: slurmctld runs it as SlurmUser with a hostlist and no PATH.\n"
            f"export PYTHONPATH={AGENT_LIB} GPUCLUSTER_AGENT_CONFIG={AGENT_CONFIG_PATH}\n"
            f'exec /usr/bin/python3 -m gpucluster_agents {command} "$1"\n'
        )
        files.append(WriteFile(f"{AGENT_BIN}/{name}", wrapper, "0755"))
    agent_env = f"Environment=PYTHONPATH={AGENT_LIB}\nEnvironment=GPUCLUSTER_AGENT_CONFIG={AGENT_CONFIG_PATH}\n"
    files += [
        WriteFile(
            "/etc/systemd/system/gpucluster-agent-maintain.service",
            _unit(
                "gpucluster node agent: sweep, end capacity holds, name static nodes, refresh topology.conf",
                "After=slurmctld.service\n\n[Service]\nType=oneshot\nUser=slurm\nGroup=slurm\n"
                + agent_env
                + "ExecStart=/usr/bin/python3 -m gpucluster_agents maintain\n",
            ),
        ),
        WriteFile(
            "/etc/systemd/system/gpucluster-agent-maintain.timer",
            _unit(
                "Run the gpucluster node agent's maintain regularly",
                f"\n[Timer]\nOnBootSec=2min\nOnUnitActiveSec={slurm.agent.maintain_interval_seconds}s\nAccuracySec=5s\n",
                "WantedBy=timers.target",
            ),
        ),
        WriteFile(f"/etc/systemd/system/{IMDS_GUARD_UNIT}", imds_guard_unit(head=True)),
        WriteFile(IMDS_GUARD, imds_guard_script(head=True), "0755"),
        WriteFile(
            "/etc/systemd/system/gpucluster-head-config.service",
            _unit(
                "gpucluster: rewrite the head node's files from its current user data, then install the agent",
                "Wants=network-online.target\nAfter=network-online.target\n"
                "Before=slurmctld.service slurmdbd.service gpucluster-agent-maintain.service\n\n"
                f"[Service]\nType=oneshot\nExecStart={AWS_HELPER} apply-user-data\n",
                "WantedBy=multi-user.target",
            ),
        ),
        WriteFile(
            "/etc/systemd/system/slurmctld.service.d/gpucluster.conf",
            "# gpucluster: slurmctld's state lives on the data volume; its config comes from the user data.\n"
            f"[Unit]\nRequiresMountsFor={DATA_DIR}\nAfter=gpucluster-head-config.service\n",
        ),
        WriteFile(
            "/etc/cloud/cloud.cfg.d/99-gpucluster-hostname.cfg",
            "# gpucluster: keep the controller's name\npreserve_hostname: true\n",
        ),
        WriteFile.compressed(AWS_HELPER, aws_helper(ctx), "0755"),
    ]
    if accounting:
        files.append(
            WriteFile(
                "/etc/systemd/system/slurmdbd.service.d/gpucluster.conf",
                f"# gpucluster: the accounting database lives on the data volume.\n[Unit]\nRequiresMountsFor={DATA_DIR} /var/lib/mysql\n",
            )
        )
    setup = render(
        "slurm/head-setup.sh.j2",
        cluster=ctx.cluster,
        hostname=head_hostname(ctx.cluster),
        slurm_version=SLURM_VERSION,
        accounting=accounting,
        data_volume_id=inputs.data_volume_id,
        data_dir=DATA_DIR,
        packages=HEAD_PACKAGES + (ACCOUNTING_PACKAGES if accounting else ()),
        aws_helper=AWS_HELPER,
        state_save_location=STATE_SAVE_LOCATION,
        agent_state_dir=AGENT_STATE_DIR,
        topology_dir=TOPOLOGY_DIR,
    )
    files.append(WriteFile(HEAD_SETUP, setup, "0755"))
    return tuple(files)


def head_cloud_config(ctx: SlurmContext, catalog: Catalog, inputs: HeadInputs) -> CloudConfig:
    """The head node's user data: its files, then (with a shared file system) the Lustre mount, then
    the setup script."""
    from gpucluster.render.node import LUSTRE_MOUNT_SCRIPT

    files = list(head_files(ctx, catalog, inputs))
    runcmd: list[tuple[str, ...]] = []
    sections = ["slurm head node"]
    if inputs.lustre is not None:
        script = lustre_mount_script(inputs.lustre, efa=False, gds=False)  # the head node mounts over TCP
        files.append(WriteFile(LUSTRE_MOUNT_SCRIPT, script, "0755"))
        runcmd.append((LUSTRE_MOUNT_SCRIPT,))
        sections.append("lustre mount")
    runcmd.append((HEAD_SETUP,))
    # The files stay plain text: the whole document is gzipped for EC2 (see SlurmCluster), whose 16 KB
    # then hold many node groups' worth of configuration.
    plain = tuple(WriteFile(f.path, f.text(), f.permissions) for f in files)
    return CloudConfig(write_files=plain, runcmd=tuple(runcmd), sections=tuple(sections))


def head_title(ctx: SlurmContext) -> str:
    return f"gpucluster {ctx.cluster} / Slurm head node {head_hostname(ctx.cluster)} ({ctx.slurm.head_node.instance_type})"


def files_by_name(files: Sequence[WriteFile]) -> dict[str, str]:
    """``{path: decoded text}``."""
    return {f.path: f.text() for f in files}
