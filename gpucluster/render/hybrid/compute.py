"""The user data of a burst node group's instance when the cluster has ``hybrid.controller``: a cloud node that joins
the site's own slurmctld.

What a head-node cluster's compute node gets (:mod:`gpucluster.render.compute.node`: node facts, NCCL/EFA environment, EFA
check, storage; :mod:`gpucluster.render.slurm.guard`: only root reaches the instance metadata service) plus the join:

- the site's ``munge`` and ``slurm`` users with the site's UIDs and GIDs, created before any package is installed
  (Debian's and Ubuntu's munge postinst and slurm-wlm-basic-plugins preinst create their user only when ``id -u``
  finds none, so the packages keep ours; an ID already taken on the image stops the join with a message);
- ``slurmd --conf-server <controller.address>:<port> -N <node>`` (configless, no local slurm.conf), the controller's
  host name in ``/etc/hosts`` unless the Resolver rule for the site's domain resolves it;
- the munge key from the Secrets Manager secret the site writes (the boot helper reads it by ARN at boot: never in
  user data), mode 0400, owner munge;
- chrony on the Amazon Time Sync Service (munge's clock window), waited for before munge starts;
- nss_slurm in nsswitch.conf when ``hybrid.enableNssSlurm`` (and the image has the module);
- the Ubuntu release (and so the slurmd) from :func:`gpucluster.facts.slurm_releases.cloud_ubuntu_for`, checked again
  at boot against the controller's window (``slurmd -V``);
- the hybrid TaskProlog (:mod:`gpucluster.render.hybrid.fabric`);
- with the cluster's monitoring on, the compute role's log shipper (:mod:`gpucluster.render.monitoring.logs`) and the
  node package it runs from: a burst node ships its logs into the cluster's log group like a compute node of a
  cloud-only cluster. The site's own nodes and controller are the site's to log.

The stack program's launch template calls :func:`render_hybrid_compute_user_data`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.hybrid import ControllerSpec
from gpucluster.facts.slurm_releases import MAJORS, UBUNTU_SLURM, cloud_ubuntu_for, compatible
from gpucluster.render.compute.node import LustreMount, node_cloud_config
from gpucluster.render.core import CloudConfig, WriteFile, render, render_cloud_config
from gpucluster.render.hybrid.fabric import HYBRID_TASK_PROLOG, hybrid_of, hybrid_task_prolog, site_controller
from gpucluster.render.monitoring.logs import LOGS_UNIT, logs_files
from gpucluster.render.slurm.agent import aws_helper, node_package_file
from gpucluster.render.slurm.compute import slurmd_drop_in
from gpucluster.render.slurm.container_build import container_build, container_packages
from gpucluster.render.slurm.guard import IMDS_GUARD_UNIT, imds_guard_bootcmd, imds_guard_unit
from gpucluster.render.slurm.identity import session_lockdown_bootcmd, session_lockdown_runcmd
from gpucluster.render.slurm.names import AGENT_PACKAGE_PATH, AWS_HELPER, AWS_HELPER_CONFIG
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, SlurmGroup
from gpucluster_agents import contract
from gpucluster_agents.contract import boot

JOIN_SETUP = "/usr/local/sbin/gpucluster-hybrid-join"
CHRONY_SOURCES = "/etc/chrony/sources.d/gpucluster-amazon-time.sources"
AMAZON_TIME_SYNC = "169.254.169.123"
# The site's agent has no node map (its bundle sets none): it tags each instance with its node name right after
# the launch, and the node reads the tag from its metadata before any package (the boot helper) is installed.
NODE_NAME_WAIT_TRIES = 180  # × 5 s: up to 15 min for the name tag
TIME_SYNC_TRIES = 60  # × 2 s: chrony has two minutes to reach the Amazon Time Sync Service
# The join installs these from the Ubuntu archive (python3-boto3 runs the boot helper; iptables the IMDS guard).
ARCHIVE_SLURM_PACKAGES = ("slurmd", "slurm-client", "munge")
BASE_PACKAGES = ("chrony", "python3-boto3", "iptables")

SECRET_ARN_RE = re.compile(
    r"^arn:aws(-[a-z]+)*:secretsmanager:([a-z]{2}(-[a-z]+)+-\d):(\d{12}):secret:[A-Za-z0-9/_+=.@-]{1,512}$"
)


class HybridJoinError(ValueError):
    """The cloud nodes cannot join the site's controller as configured; the message says why and how to fix it."""


@dataclass(frozen=True)
class CloudSlurm:
    """Where the cloud nodes' slurmd comes from."""

    ubuntu: str | None
    """The Ubuntu LTS of the image (its archive's slurmd), or None when the node group brings its own image."""
    slurmd: str
    """The slurmd release the nodes run (``YY.MM``)."""

    @property
    def source(self) -> str:
        if self.ubuntu is None:
            return f"{self.slurmd} from the node group's own image"
        return f"{self.slurmd} from Ubuntu {self.ubuntu}'s archive"


def cloud_slurm(controller: ControllerSpec, group: NodeGroupSpec) -> CloudSlurm:
    """The Ubuntu release and slurmd of ``group``'s nodes: within the controller's window, or a clear error."""
    ctld = controller.slurm_version
    if controller.cloud_slurm_version is not None:
        own = controller.cloud_slurm_version
        if not compatible(ctld, own):
            raise HybridJoinError(
                f"hybrid.controller.cloudSlurmVersion {own} cannot register with the site's slurmctld {ctld}: a slurmd "
                f"must be the controller's release or up to two older ({', '.join(window(ctld))}). "
                "Fix: build the image with one of those, or upgrade the controller first"
            )
        if group.image_id is None:
            raise HybridJoinError(
                f"hybrid.controller.cloudSlurmVersion {own} describes the node groups' own image, but node group "
                f"{group.name!r} names no imageId. Fix: set nodeGroups[{group.name}].imageId to the image with slurmd "
                f"{own}, or remove cloudSlurmVersion to use Ubuntu's slurmd"
            )
        return CloudSlurm(None, own)
    ubuntu = cloud_ubuntu_for(ctld)
    if ubuntu is None:
        shipped = ", ".join(f"Ubuntu {u}: {s}" for u, s in sorted(UBUNTU_SLURM.items()))
        raise HybridJoinError(
            f"no Ubuntu LTS ships a slurmd that the site's slurmctld {ctld} accepts (it takes "
            f"{', '.join(window(ctld))}; {shipped}). Fix: build an image with one of those, set the node groups' imageId "
            "and hybrid.controller.cloudSlurmVersion to its slurmd release"
        )
    return CloudSlurm(ubuntu, UBUNTU_SLURM[ubuntu])


def window(controller: str) -> list[str]:
    """The slurmd releases a slurmctld of release ``controller`` accepts, oldest first."""
    return [r for r in MAJORS if compatible(controller, r)]


def check_secret_arn(arn: str, region: str) -> str:
    """The munge secret's ARN: a Secrets Manager secret in the cluster's region (its text lands in a JSON file)."""
    m = SECRET_ARN_RE.match(arn)
    if not m:
        raise HybridJoinError(f"munge secret {arn!r} is not a Secrets Manager secret ARN (arn:aws:secretsmanager:…:secret:…)")
    if m.group(2) != region:
        raise HybridJoinError(f"munge secret {arn!r} is in {m.group(2)}, the cluster in {region}: the nodes read it in {region}")
    return arn


def munge_secret_stand_in(region: str) -> str:
    """The munge secret's ARN in a burst node's user data until the secret exists: node user data is rendered before
    any resource, and SlurmCluster puts the real ARN in its place (:func:`with_munge_secret`)."""
    return f"arn:aws:secretsmanager:{region}:000000000000:secret:gpucluster-munge-secret-stand-in"


def with_munge_secret(user_data: str, region: str, arn: str) -> str:
    """A burst node's user data with the munge secret's ARN in place of its stand-in (user data without it, of a
    node that does not join a site, is returned unchanged)."""
    return user_data.replace(munge_secret_stand_in(region), check_secret_arn(arn, region))


def hybrid_join_part(cluster: ResolvedCluster, group: ResolvedNodeGroup, munge_secret_arn: str) -> CloudConfig:
    """The join part of a burst node's user data (see the module docstring)."""
    spec = cluster.spec
    hybrid, controller = hybrid_of(spec), site_controller(spec)
    if group.name not in {g.name for g in cluster.burst_groups}:
        raise HybridJoinError(f"node group {group.name!r} is not one the site bursts into (hybrid.burstNodeGroups)")
    slurm = cloud_slurm(controller, group.spec)
    address = f"{controller.address}:{controller.port}"
    domain = hybrid.dns.on_prem_domain if hybrid.dns else None
    resolved_by_dns = domain is not None and controller.host.lower().endswith("." + domain)
    # pyxis against the archive's Slurm headers: only with the archive's slurmd (a site image's own is refused at load)
    containers = isinstance(group, SlurmGroup) and group.containers and slurm.ubuntu is not None
    packages = (*BASE_PACKAGES, *(ARCHIVE_SLURM_PACKAGES if slurm.ubuntu else ()), *(container_packages() if containers else ()))
    logs = cluster.monitoring is not None
    setup = render(
        "hybrid/compute/join-setup.sh.j2",
        site=hybrid.site,
        node_name_tag=contract.TAG_NODE_NAME,
        name_wait_tries=NODE_NAME_WAIT_TRIES,
        controller_host=controller.host,
        controller_address=controller.address,
        controller=address,
        controller_version=controller.slurm_version,
        slurmd_source=slurm.source,
        slurmd_releases=window(controller.slurm_version),
        accounts=[
            {"name": "munge", "uid": controller.munge_uid, "gid": controller.munge_gid},
            {"name": controller.slurm_user, "uid": controller.slurm_uid, "gid": controller.slurm_gid},
        ],
        hosts_entry=not resolved_by_dns,
        on_prem_domain=domain or "",
        packages=packages,
        containers=container_build() if containers else None,
        time_sync_tries=TIME_SYNC_TRIES,
        time_server=AMAZON_TIME_SYNC,
        imds_guard_unit=IMDS_GUARD_UNIT,
        aws_helper=AWS_HELPER,
        nss_slurm=hybrid.enable_nss_slurm,
        logs_unit=LOGS_UNIT if logs else None,
    )
    helper_config = boot.BootConfig(
        cluster=spec.name,
        region=spec.region,
        secret_name=check_secret_arn(munge_secret_arn, spec.region),
        package_file=AGENT_PACKAGE_PATH,
        agent_owned=(),
    )
    chrony = f"# gpucluster: the Amazon Time Sync Service (link-local, every instance)\nserver {AMAZON_TIME_SYNC} prefer iburst minpoll 4 maxpoll 4\n"
    return CloudConfig(
        write_files=(
            WriteFile.compressed(AWS_HELPER, aws_helper(), "0755"),
            WriteFile(AWS_HELPER_CONFIG, helper_config.to_json()),
            WriteFile(CHRONY_SOURCES, chrony),
            WriteFile(HYBRID_TASK_PROLOG, hybrid_task_prolog(cluster), "0755"),
            WriteFile(f"/etc/systemd/system/{IMDS_GUARD_UNIT}", imds_guard_unit(head=False)),
            WriteFile("/etc/systemd/system/slurmd.service.d/gpucluster.conf", slurmd_drop_in(boot_check=False)),
            *((node_package_file(), *logs_files(spec.name, spec.region, "compute")) if logs else ()),
            WriteFile.compressed(JOIN_SETUP, setup, "0755"),
        ),
        first_bootcmd=(imds_guard_bootcmd(), session_lockdown_bootcmd()),  # no sudo for ssm-user (render.slurm.identity)
        runcmd=(session_lockdown_runcmd(), (JOIN_SETUP,)),
        sections=(f"slurmd joins {hybrid.site}'s slurmctld {controller.host} ({controller.slurm_version})",),
    )


def render_hybrid_compute_user_data(
    cluster: ResolvedCluster,
    group: ResolvedNodeGroup,
    munge_secret_arn: str,
    *,
    lustre: LustreMount | None = None,
) -> str:
    """The ``#cloud-config`` user data of an instance of burst node group ``group`` that joins the site's slurmctld.

    ``munge_secret_arn``: the Secrets Manager secret the site writes its munge key to (``SecretBinary``), read at
    boot by the instance role. ``lustre``: the cluster's Lustre mount, resolved, when the group mounts it. Raises
    :class:`HybridJoinError` when no slurmd fits the controller's window; ``ValueError`` above EC2's 16 KB limit,
    which applies to the gzipped text: pass it gzipped (``render.core.gzip_b64`` as ``user_data_base64``), as every
    Slurm node group's user data is."""
    config = node_cloud_config(cluster.name, group, lustre) + hybrid_join_part(cluster, group, munge_secret_arn)
    title = f"gpucluster {cluster.name} / burst node group {group.name} ({group.instance_type}) of site {hybrid_of(cluster.spec).site}"
    return render_cloud_config(title, config, gzipped=True)
