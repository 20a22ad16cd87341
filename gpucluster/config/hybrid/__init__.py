"""Hybrid section of the spec: an on-premises site that bursts into this cluster's AWS node groups.

Two shapes share one section. **Slurm**: the site's own slurmctld stays the controller; the cloud node groups
named in ``burstNodeGroups`` become ``State=CLOUD`` nodes of a bundle the site includes next to its slurm.conf
(``gpucluster bundle``), launched by the gpucluster agent running on the site's controller with short-lived
credentials (IAM Roles Anywhere or an SSM hybrid activation, never an access key), and joining that controller
over the link this section describes. **Kubernetes**: the site's GPU servers join this cluster's EKS control
plane as EKS Hybrid Nodes (``kubernetes``), each site in its own Kueue flavor.

Only the shape of each value is checked here (field validators); relations between fields and with the rest
of the cluster (CIDR overlaps, version skew, partition names, node groups) are
:mod:`gpucluster.config.checks.hybrid`'s.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gpucluster.config.base import FIX_MARK, SpecModel, check_name
from gpucluster.config.hybrid.access import (
    HOSTNAME_RE,
    PARTITION_NAME_RE,
    ConnectivitySpec,
    CredentialsSpec,
    DnsSpec,
    check_abs_path,
    check_cidr,
    check_ipv4,
)
from gpucluster.facts.slurm_releases import MAJORS

SLURM_VERSIONS = ("22.05", "23.02", "23.11", "24.05", "24.11", "25.05")
"""Slurm releases a site's controller may run: the ones gpucluster renders Slurm files for
(:data:`gpucluster.render.slurm.versions.SUPPORTED` is this tuple)."""


class ControllerSpec(SpecModel):
    """The site's slurmctld, which stays the controller of the cloud nodes."""

    host: str
    """The controller's host name as slurm.conf's ``SlurmctldHost`` names it, e.g. ``slurmctl01``. Required."""

    address: str
    """The controller's address, routable from the VPC over the link (no NAT between the sites): cloud nodes
    fetch their configuration from it (``slurmd --conf-server``). Required; inside ``onPremCidrs``."""

    port: int = Field(default=6817, ge=1, le=65535)
    """slurmctld's port (``SlurmctldPort``). Default 6817."""

    slurm_version: str
    """The controller's Slurm release, ``YY.MM`` (e.g. ``22.05``): every file of the bundle is rendered for it,
    and the cloud nodes' slurmd must be within its window (the same release or up to two older ones, never
    newer). Required."""

    cloud_slurm_version: str | None = None
    """The slurmd release on the cloud nodes' image when the node groups name their own ``imageId``. Default:
    none, and gpucluster picks the Ubuntu LTS whose slurm-wlm the controller accepts (22.04's 21.08 for a 22.05
    or 23.02 controller, 24.04's 23.11 for 23.11 to 24.11); 25.05 needs your own image."""

    slurmdbd_port: int | None = Field(default=None, ge=1, le=65535)
    """The site's slurmdbd port (usually 6819) when cloud jobs run ``sacct``/``sreport`` against it: opens that
    port from the cloud nodes to the controller. Default: none (no path to slurmdbd)."""

    partitions: tuple[str, ...] = ()
    """The site's own partition names. The cloud partitions must be named differently. Default: none listed."""

    conf_dir: str = "/etc/slurm"
    """Directory of the site's slurm.conf; the bundle's ``cloud.conf`` goes next to it (configless ships an
    ``Include``d file only when it sits beside slurm.conf). Default ``/etc/slurm``."""

    install_dir: str = "/opt/gpucluster"
    """Where the bundle installs the agent (its own virtual environment) on the controller. Default
    ``/opt/gpucluster``."""

    slurm_user: str = "slurm"
    """``SlurmUser`` of the site: the agent runs as it. Default ``slurm``."""

    slurm_uid: int = Field(default=64030, ge=1, le=4294967294)
    """UID of ``SlurmUser`` at the site; cloud nodes create the user with the same UID. Default 64030 (Debian's)."""

    slurm_gid: int = Field(default=64030, ge=1, le=4294967294)
    """GID of ``SlurmUser``'s group at the site. Default 64030."""

    munge_uid: int = Field(default=64031, ge=1, le=4294967294)
    """UID of ``munge`` at the site. Default 64031."""

    munge_gid: int = Field(default=64031, ge=1, le=4294967294)
    """GID of ``munge`` at the site. Default 64031."""

    resume_program: str | None = None
    """The site's current ``ResumeProgram`` when it already powers its own nodes up and down: the agent
    becomes ``ResumeProgram`` and hands it every hostlist that is not a cloud node. Default: none."""

    suspend_program: str | None = None
    """The site's current ``SuspendProgram``, handed the non-cloud hostlists like ``resumeProgram``. Default:
    none."""

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not HOSTNAME_RE.match(value) or len(value) > 253:
            raise ValueError(
                f"controller host {value!r} is not a host name.{FIX_MARK}use the name slurm.conf's SlurmctldHost has, "
                "e.g. slurmctl01"
            )
        return value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        return check_ipv4(value, "controller address")

    @field_validator("slurm_version")
    @classmethod
    def _version(cls, value: str) -> str:
        short = ".".join(value.strip().split(".")[:2])
        if short not in SLURM_VERSIONS:
            raise ValueError(
                f"Slurm {value!r} is not a release gpucluster renders for.{FIX_MARK}use one of {', '.join(SLURM_VERSIONS)} "
                "(YY.MM; a maintenance release such as 23.11.4 counts as 23.11)"
            )
        return short

    @field_validator("cloud_slurm_version")
    @classmethod
    def _cloud_version(cls, value: str | None) -> str | None:
        """Any Slurm major release: the cloud nodes' slurmd only talks to the controller (no file is rendered for
        it), and an older one such as 21.08 is right under a 22.05 controller. The window is checked with the
        controller (:mod:`gpucluster.config.checks.hybrid.slurm`)."""
        if value is None:
            return None
        short = ".".join(value.strip().split(".")[:2])
        if short not in MAJORS:
            raise ValueError(
                f"cloudSlurmVersion {value!r} is not a Slurm major release.{FIX_MARK}use one of {', '.join(MAJORS)} "
                "(YY.MM; a maintenance release such as 23.11.4 counts as 23.11)"
            )
        return short

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not PARTITION_NAME_RE.match(name):
                raise ValueError(f"partition {name!r} is not a Slurm partition name.{FIX_MARK}use letters, digits, _ . -")
        return value

    @field_validator("conf_dir", "install_dir", "resume_program", "suspend_program")
    @classmethod
    def _paths(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_abs_path(value, str(info.field_name))

    @field_validator("slurm_user")
    @classmethod
    def _user(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
            raise ValueError(f"slurmUser {value!r} is not a user name.{FIX_MARK}use lowercase letters, digits, _ and -")
        return value


class NodeadmSpec(SpecModel):
    """The nodeadm release a site's ``install.sh`` downloads, pinned: its version path and the sha256 of each binary.

    AWS's documentation gives only the ``releases/latest`` URL and no checksum; the eks-hybrid release build publishes
    every version under ``releases/<version>/bin/linux/<arch>/nodeadm`` with ``nodeadm.sha256`` beside it. Take the
    sha256 from there (and from ``sha256sum`` of a copy you have vetted)."""

    version: str = Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$")
    """The release, e.g. ``v1.0.20``. Required."""

    sha256_amd64: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """sha256 of ``bin/linux/amd64/nodeadm`` of that release (64 lowercase hex digits). Default: none (x86_64 hosts
    refuse to install)."""

    sha256_arm64: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """sha256 of ``bin/linux/arm64/nodeadm`` of that release. Default: none (arm64 hosts refuse to install)."""

    @model_validator(mode="after")
    def _one(self) -> NodeadmSpec:
        if self.sha256_amd64 is None and self.sha256_arm64 is None:
            raise ValueError(
                f"nodeadm {self.version} pins no sha256.{FIX_MARK}set sha256Amd64 and/or sha256Arm64 from the release's "
                "bin/linux/<arch>/nodeadm.sha256"
            )
        return self


class HybridNodesSpec(SpecModel):
    """EKS Hybrid Nodes: the site's GPU servers join this cluster's EKS control plane."""

    remote_node_cidrs: tuple[str, ...] = Field(min_length=1)
    """The site's node networks (RFC 1918 or 100.64.0.0/10, inside ``onPremCidrs``). Required."""

    remote_pod_cidrs: tuple[str, ...] = ()
    """The pod networks the site's CNI hands out (needed for webhooks on hybrid nodes). Default: none."""

    cni: Literal["cilium", "calico"] = "cilium"
    """The CNI on the hybrid nodes (the VPC CNI does not run there). Default ``cilium``."""

    gpu_type: str = "h100"
    """The site's GPU model as Kueue's resource flavor names it. Default ``h100``."""

    gpus: int = Field(default=0, ge=0, le=100000)
    """GPUs the site contributes to Kueue's on-prem flavor (its quota). Default 0."""

    node_os: Literal["ubuntu24", "ubuntu22", "rhel9", "al2023"] = "ubuntu24"
    """The hybrid nodes' OS, for the rendered ``nodeadm`` steps. Default ``ubuntu24``."""

    nodeadm: NodeadmSpec | None = None
    """The nodeadm release ``install.sh`` downloads and checks (version and sha256 per architecture). Default: none —
    ``install.sh`` then refuses to download nodeadm (never ``releases/latest``, never unchecked)."""

    @field_validator("remote_node_cidrs", "remote_pod_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return tuple(check_cidr(v, str(info.field_name)) for v in value)

    @field_validator("gpu_type")
    @classmethod
    def _gpu_type(cls, value: str) -> str:
        # Part of the site's Kueue flavor name (<site>-<gpuType>), a Kubernetes object name.
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?", value):
            raise ValueError(
                f"gpuType {value!r} is not a Kueue flavor name.{FIX_MARK}use lowercase letters, digits and -, e.g. h100"
            )
        return value


class HybridSpec(SpecModel):
    """An on-premises site bursting into this cluster (Slurm) or joining its EKS control plane (Kubernetes)."""

    site: str = "onprem"
    """The site's short name: the on-prem Kueue flavor, the topology switch tree and tags carry it. Default
    ``onprem``."""

    on_prem_cidrs: tuple[str, ...] = Field(min_length=1)
    """The site's networks that talk to the cluster (controller, login nodes, DNS, hybrid nodes). Required;
    must not overlap the VPC or each other."""

    controller: ControllerSpec | None = None
    """The site's slurmctld (Slurm bursting). Default: none (no Slurm bursting)."""

    connectivity: ConnectivitySpec
    """The link between the site and the VPC. Required."""

    dns: DnsSpec | None = None
    """Route 53 Resolver endpoints for names across the sites. Default: none (addresses only)."""

    credentials: CredentialsSpec
    """Short-lived AWS credentials for the site's controller (and hybrid nodes). Required."""

    login_node_cidrs: tuple[str, ...] = ()
    """The site's login nodes, where users run ``srun``: cloud nodes open connections back to them on
    ``srunPortRange``. Default: none."""

    srun_port_range: str = "60001-63000"
    """``SrunPortRange`` of the site (``low-high``), which the cloud nodes' security group opens towards
    ``loginNodeCidrs``. Default ``60001-63000``."""

    burst_node_groups: tuple[str, ...] = ()
    """The node groups (``scheduler: slurm``) the site bursts into. Default: every Slurm node group."""

    fabric: Literal["roce", "infiniband"] = "roce"
    """The site's GPU fabric; its nodes get the matching NCCL environment and cloud nodes EFA's. A job never
    spans the two. Default ``roce``."""

    enable_nss_slurm: bool = True
    """Resolve job users on cloud nodes through slurmstepd (``LaunchParameters=enable_nss_slurm``) instead of
    a directory service reached over the link. Default true."""

    kubernetes: HybridNodesSpec | None = None
    """EKS Hybrid Nodes for the site's Kubernetes GPU servers. Default: none."""

    @field_validator("site")
    @classmethod
    def _site(cls, value: str) -> str:
        return check_name(value, "site name")

    @field_validator("on_prem_cidrs", "login_node_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return tuple(check_cidr(v, str(info.field_name)) for v in value)

    @field_validator("srun_port_range")
    @classmethod
    def _ports(cls, value: str) -> str:
        m = re.fullmatch(r"(\d{4,5})-(\d{4,5})", value)
        if not m or not (1024 <= int(m[1]) < int(m[2]) <= 65535):
            raise ValueError(
                f"srunPortRange {value!r} is not a port range.{FIX_MARK}write low-high with 1024 ≤ low < high ≤ 65535, "
                "e.g. 60001-63000"
            )
        return value

    @property
    def srun_ports(self) -> tuple[int, int]:
        low, high = self.srun_port_range.split("-")
        return int(low), int(high)

    @model_validator(mode="after")
    def _something(self) -> HybridSpec:
        if self.controller is None and self.kubernetes is None:
            raise ValueError(
                f"the hybrid section names neither a controller (Slurm) nor kubernetes (EKS Hybrid Nodes).{FIX_MARK}"
                "add controller: for a Slurm site, kubernetes: for a Kubernetes site"
            )
        return self
