"""The head node's files, split between its user data and one JSON bundle in the artifact bucket.

EC2 takes 16,384 bytes of user data (gzipped, for the head node), and the head node's files outgrew it: Slurm's
configs, the agent's config and wrappers, the identity, accounts, usage and metrics files grow with the cluster's node
groups, teams and users. So the user data carries only what is needed to fetch the rest:

- the boot helper ``gpucluster-aws`` and its config (``agent.boot_files``): it fetches and checks the bundle; its config
  names the pointer file (``head_files``);
- the pointer :data:`HEAD_FILES_POINTER` (bucket, key, sha256 of the bundle): a changed bundle is a new key, so a new
  user data, so Pulumi stops and starts the head node with it as before;
- ``gpucluster-head-config.service``: at every later boot it runs ``gpucluster-aws apply-user-data``, which rewrites
  these files from the current user data, then the bundle's files (``apply-files``), then installs the agent;
- the first-boot script :data:`HEAD_FIRST_BOOT`: installs python3-boto3 (the image may lack it; apt retried) and runs
  ``gpucluster-aws apply-files`` once, before the Lustre mount script and the setup script, which the bundle holds;
- the session lockdown (``bootcmd``, and its ``runcmd`` first): before anything else, at every boot.

Everything else rides in the bundle (:func:`bundle_json`): one JSON document ``{"files": [{"path", "permissions",
"content"}]}``, sorted by path, compact, so the same files always give the same bytes, the same sha256 and the same
key (``head/files-<sha16>.json``, :func:`bundle_key`). Only the head node's role may read ``head/*`` (render/iam.py).

Except the *live* files (:data:`LIVE_PATHS`): data whose readers take a change without a restart (the teams' accounts
contract and the list of the teams' directories, each of which a path unit hands to its reader). A team's quota or members changing must not stop the Slurm
controller, so they ride in a second bundle of the same shape at a fixed key (:data:`LIVE_KEY`): a change updates that
object in place, the user data stays, and ``gpucluster-head-live.timer`` (every 2 minutes) runs the node package's
``gpucluster_agents.boot.live``, which writes only the paths it allows itself (never a program). The pointer names
the key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from gpucluster.render.compute.node import LUSTRE_MOUNT_SCRIPT
from gpucluster.render.core import CloudConfig, WriteFile, render
from gpucluster.render.slurm.accounts import ACCOUNTS_PATH
from gpucluster.render.slurm.guard import systemd_unit
from gpucluster.render.slurm.identity import session_lockdown_bootcmd, session_lockdown_runcmd
from gpucluster.render.slurm.names import AGENT_LIB, AWS_HELPER, AWS_HELPER_CONFIG, HEAD_FILES_POINTER, HEAD_SETUP
from gpucluster.render.slurm.team_directories import TEAM_DIRECTORIES_LIST

HEAD_FILES_PREFIX = "head/"  # in the artifact bucket: the head node's bundles (IAM: only the head role reads them)
HEAD_FIRST_BOOT = "/usr/local/sbin/gpucluster-head-first-boot"
HEAD_CONFIG_UNIT = "/etc/systemd/system/gpucluster-head-config.service"
LIVE_KEY = f"{HEAD_FILES_PREFIX}live.json"
LIVE_PATHS = (ACCOUNTS_PATH, TEAM_DIRECTORIES_LIST)
"""The head node's files that change without restarting it; ``gpucluster_agents.boot.live.LIVE_PATHS`` is the same list
(a test holds them together), and it writes nothing else from the live bundle."""
LIVE_MAIN = "import sys; sys.path.insert(0, sys.argv.pop(1)); from gpucluster_agents.boot.live import main; sys.exit(main())"
"""How the unit runs it: isolated (``-I``: no environment, no user site, no working directory on the path) from the
installed node package."""
LIVE_UNIT = "gpucluster-head-live.service"
LIVE_POLL = "2min"


@dataclass(frozen=True)
class HeadFilesRef:
    """Where the bundle lies and the hash the head node checks it against."""

    bucket: str
    key: str
    sha256: str


def bundle_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def bundle_key(digest: str) -> str:
    """The bundle's object key: it carries the hash (like ``package_key``), so a changed bundle is a new object."""
    return f"{HEAD_FILES_PREFIX}files-{digest[:16]}.json"


def bundle_ref(bucket: str, text: str) -> HeadFilesRef:
    digest = bundle_sha256(text)
    return HeadFilesRef(bucket, bundle_key(digest), digest)


def pointer_file(ref: HeadFilesRef, live: bool = False) -> WriteFile:
    """:data:`HEAD_FILES_POINTER`, which ``gpucluster-aws apply-files`` reads (and the live program: ``live_key``)."""
    doc = {"bucket": ref.bucket, "key": ref.key, "sha256": ref.sha256, **({"live_key": LIVE_KEY} if live else {})}
    return WriteFile(HEAD_FILES_POINTER, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def live_units() -> tuple[WriteFile, WriteFile]:
    """The service and timer that fetch the live bundle: at boot (after the user data's and bundle's files) and every
    :data:`LIVE_POLL`. A failed fetch leaves the files as they were and is tried again at the next tick."""
    return (
        WriteFile(
            f"/etc/systemd/system/{LIVE_UNIT}",
            systemd_unit(
                "gpucluster: rewrite the head node's live files (the teams' accounts) from the artifact bucket",
                "Wants=network-online.target\nAfter=network-online.target gpucluster-head-config.service\n\n"
                f'[Service]\nType=oneshot\nWorkingDirectory=/\nExecStart=/usr/bin/python3 -I -c "{LIVE_MAIN}" '
                f"{AGENT_LIB} {AWS_HELPER_CONFIG}\n",
                "",
            ),
        ),
        WriteFile(
            f"/etc/systemd/system/{LIVE_UNIT.replace('.service', '.timer')}",
            systemd_unit(
                f"gpucluster: fetch the head node's live files every {LIVE_POLL}",
                f"\n[Timer]\nOnBootSec={LIVE_POLL}\nOnUnitActiveSec={LIVE_POLL}\nUnit={LIVE_UNIT}\n",
                "WantedBy=timers.target",
            ),
        ),
    )


def head_config_unit() -> WriteFile:
    """The service that, at every boot after the first, rewrites the head node's files (user data, then bundle)."""
    return WriteFile(
        HEAD_CONFIG_UNIT,
        systemd_unit(
            "gpucluster: rewrite the head node's files from its current user data and bundle, then install the agent",
            "Wants=network-online.target\nAfter=network-online.target\n"
            "Before=slurmctld.service slurmdbd.service gpucluster-agent-maintain.service ssh.service\n\n"
            f"[Service]\nType=oneshot\nExecStart={AWS_HELPER} apply-user-data\n",
            "WantedBy=multi-user.target",
        ),
    )


def first_boot_script() -> str:
    return render("slurm/head-first-boot.sh.j2", aws_helper=AWS_HELPER)


def stays_in_user_data(path: str) -> bool:
    """Whether a head file rides in the user data (see the module); every other one is in the bundle."""
    return path in (AWS_HELPER, AWS_HELPER_CONFIG, HEAD_CONFIG_UNIT)


def split(files: Sequence[WriteFile]) -> tuple[tuple[WriteFile, ...], tuple[WriteFile, ...], tuple[WriteFile, ...]]:
    """``(user data's, bundle's, live bundle's)`` of the head node's files; with live files, the bundle also carries
    the units that fetch them (:func:`live_units`)."""
    kept = tuple(f for f in files if stays_in_user_data(f.path))
    live = tuple(f for f in files if f.path in LIVE_PATHS)
    rest = tuple(f for f in files if not stays_in_user_data(f.path) and f.path not in LIVE_PATHS)
    return kept, (*rest, *(live_units() if live else ())), live


def small_cloud_config(kept: Sequence[WriteFile], ref: HeadFilesRef, lustre: bool, live: bool = False) -> CloudConfig:
    """The head node's user data: the lockdown (bootcmd, then first in runcmd), the fetching files and the pointer,
    then the first-boot script, (the Lustre mount,) the setup script: the last two written by the first-boot script."""
    runcmd: list[tuple[str, ...]] = [session_lockdown_runcmd(), (HEAD_FIRST_BOOT,)]
    sections = ["slurm head node"]
    if lustre:
        runcmd.append((LUSTRE_MOUNT_SCRIPT,))
        sections.append("lustre mount")
    runcmd.append((HEAD_SETUP,))
    # Plain text: the whole document is gzipped for EC2 (see SlurmCluster).
    files = (
        *(WriteFile(f.path, f.text(), f.permissions) for f in kept),
        pointer_file(ref, live),
        WriteFile(HEAD_FIRST_BOOT, first_boot_script(), "0755"),
    )
    return CloudConfig(write_files=files, bootcmd=(session_lockdown_bootcmd(),), runcmd=tuple(runcmd), sections=tuple(sections))
