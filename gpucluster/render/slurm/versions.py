"""The slurm.conf keys that differ between Slurm versions, decided in one place for a target version.

Every Slurm file is rendered for one version: the head node's (:data:`~gpucluster.config.slurm.SLURM_VERSION`,
Ubuntu 24.04's slurm-wlm) or, for a site that bursts into AWS, its own controller's. A key that a version
needs, ignores, calls defunct or refuses is listed in :data:`SETTINGS` with the versions it is rendered for and
the release note that decided it; nothing else in the renderer branches on a version.

Why it matters: Slurm 22.05 stops at an unrecognized key (``fatal: Unable to process configuration file``),
and 23.11 and later log an error line for every defunct one, on every start (measured with Debian's 22.05.8
and trixie's 24.11.5; see ``tests/render/slurm/test_slurm_versions.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from gpucluster.config.hybrid import SLURM_VERSIONS

SUPPORTED = SLURM_VERSIONS
"""Versions the renderer knows: SchedMD's releases from 22.05 (Debian bookworm, the oldest a site is likely to
run) to 25.05. A version outside this list is refused at load with this list in the message."""


@total_ordering
@dataclass(frozen=True)
class SlurmVersion:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> SlurmVersion:
        """``"23.11"`` or ``"23.11.4"`` → ``SlurmVersion(23, 11)`` (maintenance releases share their keys)."""
        m = re.fullmatch(r"(\d{2})\.(\d{2})(?:\.\d+)?", text.strip())
        if not m:
            raise ValueError(f"{text!r} is not a Slurm version (YY.MM, e.g. 23.11)")
        return cls(int(m[1]), int(m[2]))

    def __lt__(self, other: SlurmVersion) -> bool:
        return (self.major, self.minor) < (other.major, other.minor)

    def __str__(self) -> str:
        return f"{self.major:02d}.{self.minor:02d}"


@dataclass(frozen=True)
class VersionedSetting:
    """``key=value`` (a value of a comma-separated key such as ``SlurmctldParameters``), rendered for versions
    ``since`` ≤ v < ``until`` (``None``: no bound)."""

    key: str
    value: str
    since: str | None
    until: str | None
    why: str
    source: str

    def applies(self, version: SlurmVersion) -> bool:
        return (self.since is None or version >= SlurmVersion.parse(self.since)) and (
            self.until is None or version < SlurmVersion.parse(self.until)
        )


_R2311 = "SchedMD/slurm RELEASE_NOTES at slurm-23-11-4-1"
_R2302 = "SchedMD/slurm RELEASE_NOTES at slurm-23-02"
SETTINGS: tuple[VersionedSetting, ...] = (
    VersionedSetting(
        "TreeWidth",
        "65533",
        None,
        "23.11",
        "before 23.11 the slurmds of cloud nodes do not know each other's addresses, so slurmctld must talk to every "
        "node itself (no fanout); 23.11 fans out to cloud nodes and its default (16) is right",
        f"22.05 elastic_computing.shtml (TreeWidth at least the node count, at most 65533); {_R2311}: "
        "'Enable fanout for dynamic and unaddresable cloud nodes', 'Change TreeWidth default from 50 to 16'",
    ),
    VersionedSetting(
        "SlurmctldParameters",
        "cloud_reg_addrs",
        None,
        "23.11",
        "a cloud node's NodeAddr/NodeHostName are set from its registration; 23.11 does this by default and logs the "
        "option as defunct",
        f"{_R2311}: 'Remove cloud_reg_addrs and make it default behavior'; src/common/read_config.c 23.11+",
    ),
    VersionedSetting(
        "SlurmctldParameters",
        "idle_on_node_suspend",
        None,
        None,
        "a powered-down node returns to IDLE, not DOWN, so the next job can resume it",
        "slurm.conf(5), every supported version",
    ),
    VersionedSetting(
        "SlurmctldParameters",
        "enable_configless",
        None,
        None,
        "compute nodes fetch slurm.conf from slurmctld (slurmd --conf-server)",
        "slurm.conf(5) since 20.02",
    ),
    VersionedSetting(
        "CommunicationParameters",
        "NoAddrCache",
        None,
        "23.11",
        "re-resolve a cloud node's address on every connection (instances come back with new addresses)",
        f"{_R2311}: 'Remove NoAddrCache CommunicationParameter'; read_config.c 23.11+ logs it as defunct",
    ),
    VersionedSetting(
        "PrivateData",
        "cloud",
        None,
        "23.02",
        "show powered-down cloud nodes in sinfo; 23.02 shows them by default and ignores the value",
        f"{_R2302}: 'Change cloud nodes to show by default. PrivateData=cloud is no longer needed.'",
    ),
)


def check_version(text: str) -> SlurmVersion:
    """The target version, refused with the supported list when the renderer does not know its keys."""
    version = SlurmVersion.parse(text)
    if str(version) not in SUPPORTED:
        raise ValueError(f"Slurm {version} is not a version gpucluster renders for (supported: {', '.join(SUPPORTED)})")
    return version


def version_lines(text: str) -> list[str]:
    """The version-dependent ``key=value`` lines of slurm.conf for ``text``, keys in :data:`SETTINGS` order and
    the values of one key joined by commas (one line per key)."""
    version = check_version(text)
    keys: dict[str, list[str]] = {}
    for s in SETTINGS:
        if s.applies(version):
            keys.setdefault(s.key, []).append(s.value)
    return [f"{key}={','.join(values)}" for key, values in keys.items()]
