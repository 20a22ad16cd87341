"""What the head node's node agent is given: its config (:class:`gpucluster_agents.contract.AgentConfig`,
built from the stack's outputs), its code (the ``gpucluster_agents`` package as a reproducible zip), and
the boot helper that installs that code and the munge key on every node."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.render.core import WriteFile
from gpucluster.render.pysource import without_docs
from gpucluster.render.slurm.names import (
    AGENT_LIB,
    AGENT_LOG,
    AGENT_PACKAGE_PATH,
    AGENT_STATE_DIR,
    AWS_HELPER,
    AWS_HELPER_CONFIG,
    HEAD_FILES_POINTER,
    TOPOLOGY_DIR,
    SlurmContext,
    munge_secret_name,
)
from gpucluster_agents import contract, ship
from gpucluster_agents.contract import boot
from gpucluster_agents.contract.baseline import Baseline
from gpucluster_agents.contract.nodemap import NodeMap
from gpucluster_agents.contract.repair import Repair
from gpucluster_agents.contract.updates import Updates
from gpucluster_agents.ship import sha256 as sha256

NODE_MAPS_PREFIX = "node-maps/"  # in the artifact bucket: the head node writes, compute nodes read (IAM: iam.py)
BASELINES_PREFIX = "baselines/"  # in the artifact bucket: the head node's re-baseline figures (power/baseline.py)


@dataclass(frozen=True)
class LaunchTarget:
    """What AWS made for one Slurm node group: plain values, resolved from the stack's outputs.

    The version is ``$Default`` (GpuNodeGroup makes every new version the default): a new AMI or user
    data for the compute nodes then does not change the head node's agent config."""

    launch_template_id: str
    subnet_ids: tuple[str, ...]
    placement_group: str | None = None
    launch_template_version: str = "$Default"


def agent_config(
    ctx: SlurmContext, targets: Mapping[str, LaunchTarget], artifact_bucket: str | None = None, spot_queue_url: str | None = None
) -> contract.AgentConfig:
    """``/etc/gpucluster/agent.json`` (schema: :mod:`gpucluster_agents.contract`), from the stack's outputs. With the
    artifact bucket, launches publish their node names there (``node_map``: no CreateTags per node on a resume); with
    the spot queue (spot or capacity-block groups), the ``spot-watch`` service reads its warnings."""
    groups: list[contract.NodeGroup] = []
    for g in ctx.node_groups:
        t = targets[g.name]
        cap = g.spec.capacity
        groups.append(
            contract.NodeGroup(
                name=g.name,
                node_prefix=g.name,
                mode=g.entry.mode,
                max_nodes=g.max_size,
                instance_type=g.instance_type,
                launch_template_id=t.launch_template_id,
                launch_template_version=t.launch_template_version,
                subnet_ids=tuple(t.subnet_ids),
                efa_enabled=g.efa,
                placement_group=t.placement_group,
                capacity=contract.Capacity(cap.type, cap.reservation_id or None, cap.resource_group_arn or None),
            )
        )
    agent, updates = ctx.slurm.agent, ctx.slurm.updates
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
        repair=Repair(brake_percent=agent.repair_brake_percent, brake_window_seconds=agent.repair_brake_window_seconds),
        node_map=NodeMap(artifact_bucket, NODE_MAPS_PREFIX) if artifact_bucket else None,
        updates=Updates(
            updates.max_drained_percent,
            updates.maintenance_window,
            updates.stop_after_boot_failures,
            baseline=_rebaseline(ctx, artifact_bucket),
        ),
        spot_queue_url=spot_queue_url,
    )


def _rebaseline(ctx: SlurmContext, artifact_bucket: str | None) -> Baseline | None:
    """``updates.baseline``: the NVIDIA GPU groups' figures in the artifact bucket (``BASELINES_PREFIX``)."""
    spec = ctx.slurm.updates.rebaseline
    groups = tuple(g.name for g in ctx.node_groups if nvidia_gpus(g.facts))
    if not artifact_bucket or spec.nodes == 0 or not groups or not ctx.slurm.health.enabled:  # deep reads health.json
        return None
    thresholds = (
        ("gemm_tflops", spec.gemm_max_drop_percent),
        ("hbm_copy_gbps", spec.hbm_max_drop_percent),
        ("nccl_busbw_gbps", spec.busbw_max_drop_percent),
    )
    return Baseline(
        bucket=artifact_bucket,
        prefix=BASELINES_PREFIX,
        nodes=spec.nodes,
        duration_minutes=spec.duration_minutes,
        thresholds=thresholds,
        groups=groups,
        package_dir=AGENT_LIB,
    )


def needs_spot_events(ctx: SlurmContext) -> bool:
    """Whether a Slurm node group runs on capacity that warns before it goes (spot, capacity blocks)."""
    return any(g.spec.capacity.type in ("spot", "capacity-block") for g in ctx.node_groups)


# --- the agent bundle ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentBundle:
    bucket: str
    key: str
    sha256: str


def agent_bundle() -> bytes:
    """The node package as a reproducible zip (:func:`gpucluster_agents.ship.bundle`)."""
    return ship.bundle()


def package_key(digest: str) -> str:
    """The package's object key: it carries the hash, so a changed package is a new object."""
    return f"agent/gpucluster_agents-{digest[:16]}.zip"


# Compute nodes are rendered before the artifact bucket exists (their user data goes into launch
# templates the head node's config names): their package file names the bucket with this stand-in,
# and SlurmCluster puts the bucket's name in its place (see ``with_artifact_bucket``).
ARTIFACT_BUCKET_STAND_IN = "gpucluster-artifact-bucket-stand-in"


def package_file(bundle: AgentBundle) -> WriteFile:
    """``AGENT_PACKAGE_PATH``: where ``gpucluster-aws install-agent`` fetches the package and the hash it checks."""
    pointer = {"bucket": bundle.bucket, "key": bundle.key, "sha256": bundle.sha256, "dest": AGENT_LIB}
    return WriteFile(AGENT_PACKAGE_PATH, json.dumps(pointer, indent=2, sort_keys=True) + "\n")


def node_package_file() -> WriteFile:
    """A compute node's package file: this program's package, the bucket still a stand-in."""
    digest = sha256(agent_bundle())
    return package_file(AgentBundle(ARTIFACT_BUCKET_STAND_IN, package_key(digest), digest))


def with_artifact_bucket(user_data: str, bucket: str) -> str:
    """A compute node's user data with the artifact bucket's name in place of its stand-in."""
    return user_data.replace(ARTIFACT_BUCKET_STAND_IN, bucket)


# --- the boot helper -------------------------------------------------------------------------------------------


def aws_helper() -> str:
    """The boot helper's source, written to ``AWS_HELPER``: the module itself without its docstrings and comment lines
    (:func:`gpucluster.render.pysource.without_docs`: whole lines removed, none changed), so the code that runs on the
    node is the code that ruff, pyright and the tests check, in less of EC2's 16 KB of user data."""
    return without_docs(ship.source(ship.HELPER))


def boot_config(ctx: SlurmContext, compute: bool = False, head: bool = False) -> boot.BootConfig:
    """The cluster's values for the boot helper, written next to it as ``AWS_HELPER_CONFIG``. A compute node's
    names where its launch's node map lies (``gpucluster-aws node-name``; the bucket still a stand-in); the head
    node's names the pointer to its files' bundle (``gpucluster-aws apply-files``, render/slurm/headfiles.py)."""
    return boot.BootConfig(
        cluster=ctx.cluster,
        region=ctx.region,
        secret_name=munge_secret_name(ctx.cluster),
        package_file=AGENT_PACKAGE_PATH,
        agent_owned=(f"{TOPOLOGY_DIR}/topology.conf",),
        node_maps=f"s3://{ARTIFACT_BUCKET_STAND_IN}/{NODE_MAPS_PREFIX}" if compute else None,
        head_files=HEAD_FILES_POINTER if head else None,
    )


def boot_files(ctx: SlurmContext, compute: bool = False, head: bool = False) -> tuple[WriteFile, WriteFile]:
    """The boot helper and its config, as every Slurm node's user data writes them. Plain text: the whole document is
    gzipped for EC2, and source compresses better there than gzip's base64 would (about 1.4 KB less)."""
    return (
        WriteFile(AWS_HELPER, aws_helper(), "0755"),
        WriteFile(AWS_HELPER_CONFIG, boot_config(ctx, compute, head).to_json()),
    )
