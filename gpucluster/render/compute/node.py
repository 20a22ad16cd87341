"""The base part of every GPU node's user data: node facts, the NCCL/EFA environment, an EFA check.

Storage, Slurm and Kubernetes add their own :class:`~gpucluster.render.core.CloudConfig` parts on top.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpucluster.config.storage import NVME_MOUNT_OPTIONS, NvmeScratchSpec
from gpucluster.config.storage.mounts import client_mount_options
from gpucluster.facts.catalog import InstanceFacts
from gpucluster.facts.downloads import FSX_UBUNTU_KEY_FINGERPRINT, FSX_UBUNTU_KEY_URL
from gpucluster.facts.nccl import library_dirs
from gpucluster.render.core import CloudConfig, WriteFile, env_file, render
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, SlurmGroup

NODE_FACTS_PATH = "/etc/gpucluster/node.json"
NCCL_PROFILE_PATH = "/etc/profile.d/gpucluster-nccl.sh"
NCCL_ENV_PATH = "/etc/gpucluster/nccl.env"
EFA_CHECK_PATH = "/usr/local/sbin/gpucluster-efa-check"


def node_facts(cluster: str, group: ResolvedNodeGroup) -> dict[str, object]:
    facts = group.facts
    return {
        "cluster": cluster,
        "nodeGroup": group.name,
        "instanceType": group.instance_type,
        "accelerator": facts.accelerator_model,
        "acceleratorCount": facts.accelerator_count,
        "efaInterfaces": group.efa_interfaces,
        "efaLayout": group.spec.efa_layout if group.efa else None,
        "labels": dict(sorted(group.spec.labels.items())),
    }


def base_bootstrap(cluster: str, group: ResolvedNodeGroup) -> CloudConfig:
    env = dict(group.nccl_env)
    efa_count = group.efa_interfaces
    profile = render(
        "node/nccl-env.sh.j2",
        instance_type=group.instance_type,
        cluster=cluster,
        node_group=group.name,
        efa_interfaces=efa_count,
        env=env,
        library_dirs=list(library_dirs(group.facts, group.efa)),
    )
    files = [
        WriteFile(NODE_FACTS_PATH, json.dumps(node_facts(cluster, group), indent=2, sort_keys=True) + "\n"),
        WriteFile(NCCL_PROFILE_PATH, profile),
        WriteFile(NCCL_ENV_PATH, env_file(env)),
    ]
    runcmd: list[tuple[str, ...]] = []
    if efa_count:
        files.append(WriteFile(EFA_CHECK_PATH, render("node/efa-check.sh.j2", efa_interfaces=efa_count), "0755"))
        runcmd.append((EFA_CHECK_PATH,))
    return CloudConfig(write_files=tuple(files), runcmd=tuple(runcmd), sections=("node facts", "nccl/efa environment"))


# --- storage parts ------------------------------------------------------------------------------------

LUSTRE_MOUNT_SCRIPT = "/usr/local/sbin/gpucluster-mount-lustre"
NVME_RAID_SCRIPT = "/usr/local/sbin/gpucluster-nvme-raid"


@dataclass(frozen=True)
class LustreMount:
    """What a node needs to mount the cluster's Lustre file system (plain values, outputs resolved)."""

    file_system: str
    dns_name: str
    mount_name: str
    mount_point: str
    mount_options: str
    efa: bool = False
    gds: bool = False


# Options every Lustre fstab entry gets after the user's: mount after the network, on first access.
LUSTRE_FSTAB_OPTIONS = "_netdev,x-systemd.automount,x-systemd.requires=network.service"


def fstab_field(text: str) -> str:
    """One /etc/fstab field: blanks, '#', '\\' and control characters as fstab's octal escapes (``\\040``),
    so a value can never split into more fields or lines (fstab(5); libmount unmangles them)."""
    return "".join(f"\\{ord(c):03o}" if ord(c) <= 32 or ord(c) == 127 or c in "#\\" else c for c in text)


def lustre_fstab_entry(mount: LustreMount) -> str:
    """The /etc/fstab line of the Lustre mount: six fields, each escaped; ``nosuid,nodev`` whatever the options say
    (:func:`~gpucluster.config.storage.mounts.client_mount_options`)."""
    fields = (
        f"{mount.dns_name}@tcp:/{mount.mount_name}",
        mount.mount_point,
        "lustre",
        f"{client_mount_options(mount.mount_options)},{LUSTRE_FSTAB_OPTIONS}",
        "0",
        "0",
    )
    return " ".join(fstab_field(f) for f in fields)


def lustre_mount_script(mount: LustreMount, *, efa: bool, gds: bool, install: bool = True) -> str:
    """The script that installs the Lustre client, sets up EFA/GDS when asked, mounts and adds to fstab. ``install``
    false (a baked image holds the client): it only checks the client is there, and downloads nothing."""
    return render(
        "storage/mount-lustre.sh.j2",
        file_system=mount.file_system,
        dns_name=mount.dns_name,
        mount_name=mount.mount_name,
        mount_point=mount.mount_point,
        fstab_entry=lustre_fstab_entry(mount),
        fstab_mount_point=fstab_field(mount.mount_point),
        efa=efa,
        gds=gds,
        install=install,
        key_url=FSX_UBUNTU_KEY_URL,
        key_fingerprint=FSX_UBUNTU_KEY_FINGERPRINT or "",
    )


def lustre_part(mount: LustreMount, group: ResolvedNodeGroup) -> CloudConfig:
    """Install the Lustre client, set up EFA/GDS where both sides support it, mount, add to fstab."""
    efa = mount.efa and group.uses_efa
    gds = efa and mount.gds and group.facts.gds_supported
    on_image = isinstance(group, SlurmGroup) and group.baked
    script = lustre_mount_script(mount, efa=efa, gds=gds, install=not on_image)
    return CloudConfig(
        write_files=(WriteFile(LUSTRE_MOUNT_SCRIPT, script, "0755"),),
        runcmd=((LUSTRE_MOUNT_SCRIPT,),),
        sections=("lustre mount" + (" over EFA" if efa else "") + (" + GDS" if gds else ""),),
    )


def nvme_scratch_part(scratch: NvmeScratchSpec, facts: InstanceFacts) -> CloudConfig:
    """RAID 0 over the instance's local NVMe disks, rebuilt at every boot (bootcmd)."""
    script = render(
        "storage/nvme-raid.sh.j2",
        disks=facts.nvme_disk_count,
        instance_type=facts.instance_type,
        mount_point=scratch.mount_point,
        filesystem=scratch.filesystem,
        mount_options=NVME_MOUNT_OPTIONS,
    )
    return CloudConfig(
        write_files=(WriteFile(NVME_RAID_SCRIPT, script, "0755"),),
        bootcmd=((NVME_RAID_SCRIPT,),),
        sections=("nvme scratch",),
    )


def node_cloud_config(cluster: str, group: ResolvedNodeGroup, lustre: LustreMount | None) -> CloudConfig:
    """Everything a node of ``group`` runs at boot, storage included (schedulers add their parts): the NVMe volume
    and the Lustre mount where resolution gave them to the group (``lustre``: the mount's values, once known)."""
    config = base_bootstrap(cluster, group)
    if group.nvme_scratch is not None:
        config += nvme_scratch_part(group.nvme_scratch, group.facts)
    if group.mounts_lustre and lustre is not None:
        config += lustre_part(lustre, group)
    return config


def user_data_title(cluster: str, group: ResolvedNodeGroup) -> str:
    return f"gpucluster {cluster} / node group {group.name} ({group.instance_type})"
