"""Slurm section of the spec: a head node, power saving, and how each Slurm node group is scheduled.

Node groups with ``scheduler: slurm`` (the default when ``gpucluster:slurm`` is the only scheduler)
become Slurm partitions. Every version pinned below names its source.

Versions that work together: the head node and every compute node run Ubuntu 24.04 and its
``slurm-wlm`` 23.11.4 (Ubuntu package archive, noble/universe), so slurmctld, slurmdbd and slurmd are
one release. Compute nodes boot the Ubuntu 24.04 flavour of their accelerator's Deep Learning AMI
(the 24.04 SSM parameters exist for the NVIDIA base OSS DLAMI and the Neuron multi-framework DLAMI).
Jammy's slurm-wlm (21.08) would be three releases behind 23.11, outside Slurm's two-release window.
The rendered files are also accepted by Debian bookworm's Slurm 22.05 (what the tests run).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from gpucluster.config.base import SpecModel
from gpucluster.config.images import ImagesSpec, NodeHooksSpec
from gpucluster.config.slurm.containers import ContainersSpec
from gpucluster.config.slurm.health import SlurmHealthSpec
from gpucluster.config.slurm.home import HomeSpec
from gpucluster.config.slurm.identity import SlurmIdentitySpec
from gpucluster.config.slurm.login import LoginNodesSpec
from gpucluster.config.slurm.teams import SlurmTeamSpec
from gpucluster.config.slurm.updates import SlurmUpdatesSpec
from gpucluster.facts.slurm_settings import settings_text
from gpucluster_agents.contract.grammar import PARTITION_PATTERN

SLURM_VERSION = "23.11"
UBUNTU_RELEASE = "24.04"
# Releases whose slurm-wlm is too old to talk to slurmctld 23.11 (Ubuntu 22.04: 21.08; 20.04: 19.05).
TOO_OLD_RELEASES = ("22.04", "20.04", "18.04")

Mode = Literal["dynamic", "static"]
FEATURE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class HeadNodeSpec(SpecModel):
    """The Slurm controller: slurmctld (and slurmdbd), the node agent, nothing else."""

    instance_type: str = "m7i.xlarge"
    """EC2 instance type of the head node. Default ``m7i.xlarge`` (4 vCPU, 16 GiB): slurmctld for
    thousands of nodes and the agent need little; no GPU."""

    availability_zone: str | None = None
    """Zone of the head node (and its data volume, which stays there). Default: the first zone of the
    first Slurm node group."""

    subnet_id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-f]{8,17}$")
    """With your own VPC: the private subnet of the head node (listed in ``network.subnets``).
    Default: the zone's first private subnet."""

    image_id: str | None = Field(default=None, pattern=r"^ami-[0-9a-f]{8,17}$")
    """AMI of the head node; it must be Ubuntu 24.04 (slurm-wlm 23.11). Default: Canonical's latest
    Ubuntu 24.04 image, read from its public SSM parameter at deploy time."""

    root_volume_size_gib: int = Field(default=50, ge=20, le=16384)
    """Root volume (encrypted gp3). Default 50 GiB. Nothing lives there that a replacement head node
    cannot rebuild: state is on the data volume."""

    data_volume_size_gib: int = Field(default=100, ge=10, le=16384)
    """The head node's data volume (encrypted gp3, protected and retained): slurmctld's
    StateSaveLocation, the accounting database and the agent's launch journal. Default 100 GiB."""

    data_volume_iops: int = Field(default=3000, ge=3000, le=16000)
    """gp3 IOPS of the data volume. Default 3000 (the gp3 baseline)."""

    data_volume_throughput: int = Field(default=125, ge=125, le=1000)
    """gp3 throughput of the data volume, MB/s. Default 125 (the gp3 baseline)."""

    kms_key_id: str | None = None
    """KMS key ARN (``arn:aws:kms:<region>:<account>:key/<id>``, the cluster's region) for both volumes. Default: the account's ``aws/ebs`` key. Always encrypted."""

    mount_shared_storage: bool = True
    """Mount the cluster's Lustre file system on the head node too (home and job directories are
    shared). Default true."""


class AccountingSpec(SpecModel):
    """Job accounting: slurmdbd and MariaDB on the head node, the database on its data volume.

    MariaDB lets slurmdbd in through its Unix socket as the ``slurm`` user, so there is no database
    password anywhere."""

    purge_after_months: int = Field(default=12, ge=1, le=120)
    """Purge job, step and event records older than this. Default 12 months."""


class PowerSavingSpec(SpecModel):
    """When Slurm powers dynamic nodes up and down (slurm.conf power saving)."""

    suspend_time_seconds: int = Field(default=600, ge=60, le=86400)
    """Idle seconds before a dynamic node is powered down (its instance terminated): ``SuspendTime``.
    Default 600."""

    resume_timeout_seconds: int = Field(default=1800, ge=300, le=7200)
    """Seconds a node may take from the resume request until slurmd registers (EC2 launch, boot,
    package installs, file system mounts): ``ResumeTimeout``. Default 1800; GPU instances with
    Lustre and EFA take several minutes."""

    suspend_timeout_seconds: int = Field(default=120, ge=30, le=3600)
    """Seconds a node takes to power down before it may be resumed again: ``SuspendTimeout``.
    Default 120."""


class SlurmNodeGroupSpec(SpecModel):
    """How Slurm runs one node group (settings for a ``scheduler: slurm`` group)."""

    name: str
    """The node group (``nodeGroups[].name``) these settings are for. Required."""

    partition: str | None = Field(default=None, pattern=PARTITION_PATTERN)
    """Slurm partition of the group's nodes. Default: the node group name."""

    default: bool | None = None
    """Make this the default partition. Default: the first Slurm node group's partition."""

    mode: Mode = "dynamic"
    """``dynamic`` (default): ``State=CLOUD`` nodes the node agent launches when jobs need them and
    terminates after ``powerSaving.suspendTimeSeconds`` idle; ``minSize``/``desiredSize`` must be 0.
    ``static``: an Auto Scaling group keeps ``desiredSize`` nodes running; the agent names its
    instances and Slurm never powers them down."""

    features: tuple[str, ...] = ()
    """Extra Slurm node features (``--constraint``) on top of the ones gpucluster sets (instance
    type, accelerator model, ``efa``, zone, ``dynamic``/``static``). Default: none."""

    weight: int | None = Field(default=None, ge=1, le=65533)
    """Slurm node ``Weight``: jobs that fit several partitions' nodes go to the lowest weight first.
    Default: unset (Slurm's 1)."""

    priority_tier: int | None = Field(default=None, ge=0, le=65533)
    """Partition ``PriorityTier``: jobs submitted to several partitions are placed in the highest
    tier first (and fail over to the next when that group has no capacity). Default: unset."""

    containers: bool | None = None
    """Containers in this group's jobs (pyxis and enroot, ``slurm.containers``). Default: on for GPU groups while
    ``slurm.containers.enabled``; ``false`` turns them off for this group."""

    hooks: NodeHooksSpec | None = None
    """The site's own scripts at node start (``onNodeStart``) and once the node is configured (``onNodeConfigured``),
    as root with a timeout; a failure drains the node with a ``gpucluster: hook …`` reason. Default: none."""

    @field_validator("features")
    @classmethod
    def _features(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for feature in value:
            if not FEATURE_RE.match(feature):
                raise ValueError(f"feature {feature!r} is not a Slurm feature name: letters, digits, '_', '.', '-'")
        return value


class AgentSpec(SpecModel):
    """The node agent on the head node (``python -m gpucluster_agents``)."""

    insufficient_capacity_hold_seconds: int = Field(default=600, ge=0, le=86400)
    """After InsufficientInstanceCapacity (or its host / reservation variants) the node group is held
    DOWN this long, so queued jobs fail over to other partitions. Default 600."""

    failure_hold_seconds: int = Field(default=600, ge=0, le=86400)
    """A node whose launch failed for another reason stays DOWN this long. Default 600."""

    orphan_grace_seconds: int = Field(default=300, ge=60, le=86400)
    """An instance of a dynamic group without a node name older than this is terminated. Default 300."""

    maintain_interval_seconds: int = Field(default=60, ge=15, le=3600)
    """How often a systemd timer runs ``maintain`` (sweep, end holds, name static instances, topology).
    Default 60."""

    repair_brake_percent: int = Field(default=20, ge=0, le=100)
    """The repair brake's line, in percent of a node group's nodes drained by the health checks. Past it (and
    at least two nodes within ``repairBrakeWindowSeconds``) the agent stops rebooting and replacing that
    group's nodes and keeps them drained until an operator runs ``gpucluster-agent release-brake <group>``
    on the head node: a fifth of a group failing at once has a common cause (a driver, an image, a broken
    check) that new hardware does not fix. 0 turns the brake off. Default 20."""

    repair_brake_window_seconds: int = Field(default=3600, ge=60, le=7 * 86400)
    """The window the repair brake counts health drains in. Default 3600 (1 h)."""


class SlurmSpec(SpecModel):
    """A Slurm cluster on EC2: a head node running slurmctld and the node agent, and a partition per
    ``scheduler: slurm`` node group."""

    head_node: HeadNodeSpec = HeadNodeSpec()
    """The head node. Default: an ``m7i.xlarge`` in the first Slurm group's zone."""

    accounting: AccountingSpec | None = None
    """Job accounting with slurmdbd. Default: none (no accounting database)."""

    power_saving: PowerSavingSpec = PowerSavingSpec()
    """Power-saving timers for dynamic nodes. Default: 10 min idle, 30 min to boot."""

    node_groups: tuple[SlurmNodeGroupSpec, ...] = ()
    """Per node group settings: partition, default partition, dynamic or static, features. Default:
    every Slurm node group dynamic, in a partition of its own name; the first is the default."""

    agent: AgentSpec = AgentSpec()
    """Node agent settings. Default: 10 min holds, 5 min orphan grace, maintain every 60 s, repairs braked
    above 20 % of a group drained within an hour."""

    updates: SlurmUpdatesSpec = SlurmUpdatesSpec()
    """Rolling replacement of running nodes after their launch template changes. Default: 10 % of a node group at a
    time, at any hour, stopped by 2 boot failures of the new version."""

    health: SlurmHealthSpec = SlurmHealthSpec()
    """Node health checks (Slurm ``HealthCheckProgram`` and ``Prolog``) on NVIDIA GPU nodes. Default: on,
    a sweep every 5 min and a 60 s check before every job."""

    protect_data: bool | None = None
    """Protect the head node's data volume and the munge key secret: ``pulumi destroy`` refuses and
    deleting the stack leaves them. Default: ``storage.protectData`` (true when there is no storage
    section)."""

    identity: SlurmIdentitySpec | None = None
    """Who the people are: declared users and groups, or a directory (LDAP/AD through SSSD). Default: none
    (only administrators, through IAM)."""

    login_nodes: LoginNodesSpec | None = None
    """Login nodes people log in to (Session Manager as themselves, optional SSH). Default: none; needs
    ``identity``."""

    images: ImagesSpec = ImagesSpec()
    """How compute nodes get their software: baked into an image the stack builds (default), or installed at boot
    (``bake: false``)."""

    home: HomeSpec | None = None
    """The shared ``/home`` (FSx for OpenZFS), made when ``identity`` is set. Default (with ``identity``): 128 GiB
    ``SINGLE_AZ_1``, 64 MB/s, 50 GiB per declared user."""

    teams: tuple[SlurmTeamSpec, ...] = ()
    """Teams sharing the GPUs: a Slurm account each, with its members, guaranteed GPUs, fair share, job time limit
    and whether it may borrow idle GPUs (docs/teams.md). Needs ``accounting``. Default: none (no team
    accounts or limits)."""

    containers: ContainersSpec = ContainersSpec()
    """Containers in jobs: pyxis (``srun --container-image``) and enroot on GPU nodes and login nodes
    (docs/containers.md). Default: on."""

    settings: dict[str, str] = Field(default_factory=dict)
    """Other slurm.conf keys, merged into the rendered file (``{MaxJobCount: 20000, KillWait: 60}``): only keys on
    the allow list of limits, timeouts and log levels (docs/teams.md). Keys gpucluster sets are refused with the
    section that sets them, keys that name a program, plugin, user or authentication method as not settable;
    values are one word without ``#``. Default: none."""

    @field_validator("settings", mode="before")
    @classmethod
    def _settings_text(cls, value: object) -> object:
        if isinstance(value, dict):
            return {k: settings_text(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        return value

    def group_settings(self, group: str) -> SlurmNodeGroupSpec:
        """The entry for ``group`` (defaults when the section does not list it)."""
        for entry in self.node_groups:
            if entry.name == group:
                return entry
        return SlurmNodeGroupSpec(name=group)


def image_release(parameter: str | None) -> str | None:
    """The Ubuntu release an AMI SSM parameter names (``…ubuntu-24.04…`` or ``…/24.04/…``), if any."""
    if not parameter:
        return None
    match = re.search(r"(?:ubuntu-|/)(\d\d\.04)(?:/|$|-)", parameter)
    return match.group(1) if match else None
