"""Who is root on the shared file system: the root-squash findings of a Lustre section (pure)."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import head_node_mounts_lustre
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.storage import LustreSpec

SQUASH_FIELDS = {
    "root_squash": "rootSquash",
    "no_squash_clients": "noSquashClients",
    "unsafe_disable_root_squash": "unsafeDisableRootSquash",
}


def check_root_squash(fs: LustreSpec, path: str) -> Iterator[Finding]:
    """An existing file system keeps the root squash it has (FSx's own setting, not this stack's): say so, and refuse
    squash settings given for it. A new one without root squash is allowed only by its loud opt-out, and warned about."""
    if fs.file_system_id:
        given = [camel for key, camel in SQUASH_FIELDS.items() if key in fs.model_fields_set]
        if given:
            yield error(
                f"{path}.fileSystemId",
                f"fileSystemId attaches the existing file system {fs.file_system_id}; its {', '.join(given)} cannot be "
                "set from here",
                f"set root squash on the file system itself (aws fsx update-file-system --file-system-id {fs.file_system_id} "
                "--lustre-configuration 'RootSquashConfiguration={RootSquash=65534:65534,NoSquashNids=[<admin host>@tcp]}'), "
                "and remove those fields",
                fs.file_system_id,
                "existing-file-system-settings",
            )
        yield warning(
            f"{path}.fileSystemId",
            f"the existing file system {fs.file_system_id} keeps whatever root squash it has: gpucluster does not set it",
            "check it with aws fsx describe-file-systems (LustreConfiguration.RootSquashConfiguration); without root "
            "squash, root on any node is root over every file. Add the storage setup host's address (the stack's "
            "storage output, setupHost.privateIp) to its NoSquashNids so it can create the directories",
            fs.file_system_id,
            "existing-file-system-root-squash",
        )
    elif fs.unsafe_disable_root_squash:
        yield warning(
            f"{path}.unsafeDisableRootSquash",
            "root squash is off: root on any client, including a container that runs as root on a node that mounts "
            "the file system, reads and rewrites every file, every team's included",
            "remove unsafeDisableRootSquash (root squash on, admin hosts in noSquashClients)",
            True,
            "root-squash-off",
        )


def check_admin_host(spec: ClusterSpec, fs: LustreSpec, path: str) -> Iterator[Finding]:
    """A new, root-squashed file system that nothing creates a directory on, and that no admin host keeps root on,
    takes no writes at all: its root belongs to root, mode 0755, and root on every node is nobody there."""
    if fs.file_system_id or fs.unsafe_disable_root_squash or fs.directories or fs.no_squash_clients:
        return
    teams = spec.kubernetes.teams if spec.kubernetes is not None else ()
    if head_node_mounts_lustre(spec) or any(t.mount_shared_storage for t in teams):
        return
    yield warning(
        f"{path}.directories",
        "no directory is created on the new file system and no admin host keeps root on it: under root squash its "
        "root (root's, mode 0755) takes no writes from any node",
        "list the directories jobs write in, with their owner and mode (storage.lustre.directories, e.g. "
        "{path: /data, owner: '1000:1000', mode: '2775'}; jobs that run as root write as 65534:65534): the storage "
        "setup host creates them. Or list your own admin host in noSquashClients",
        None,
        "no-admin-host",
    )
