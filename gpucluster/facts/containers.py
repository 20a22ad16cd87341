"""The container runtime of Slurm jobs, pinned: pyxis (NVIDIA's SPANK plugin behind ``srun --container-image``)
and enroot (the unprivileged runtime pyxis drives).

Neither is packaged by Ubuntu or Debian. A node image builds both from their release tags and refuses any other
code: a git clone must check out exactly :attr:`Source.commit` (content-addressed); a source archive given instead
(an offline build, the tests: ``../shared/vendor``) must have exactly :attr:`Source.archive_sha256`, the sha256 of
``git archive`` of that tag. Pyxis is compiled on the image against the ``spank.h`` of the Slurm release the image
runs (``libslurm-dev`` of the same slurm-wlm build): since Slurm 21.08 a SPANK plugin built for another release is
refused ("Incompatible plugin version")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One upstream release, pinned two ways."""

    name: str
    version: str
    repository: str
    """The upstream git repository (``https://github.com/<owner>/<name>``)."""
    tag: str
    commit: str
    """The commit the tag names: a clone must be at exactly this commit."""
    archive_sha256: str
    """sha256 of ``git archive --format=tar.gz --prefix=<name>-<version>/ <tag>`` (the vendored tarball)."""
    released: str

    @property
    def archive(self) -> str:
        """The archive's file name (``pyxis-0.24.0.tar.gz``)."""
        return f"{self.name}-{self.version}.tar.gz"


PYXIS = Source(
    "pyxis",
    "0.24.0",
    "https://github.com/NVIDIA/pyxis",
    "v0.24.0",
    "107519944221822ea1dace4db8e7234b2eaa4cd5",
    "063653ba39125ac29796cc6079701d1ec34dd4c5baf698efacc0f36bf3619681",
    "2026-05-11",
)
ENROOT = Source(
    "enroot",
    "4.1.2",
    "https://github.com/NVIDIA/enroot",
    "v4.1.2",
    "bd51f53b6fa954805ae3e1985c5dc7594ff66d05",
    "817e8d551135e6f3fc311d1ee57b03fb4d30325acba732f8dea43069ca11f8d3",
    "2026-03-23",
)
MAKESELF = Source(
    "makeself",
    "2.4.5",
    "https://github.com/megastep/makeself",
    "release-2.4.5",
    "5742be6410bfad2c619fb1e98bf795e8fa0913c7",
    "0f4726368bf43ce70f7e86e814f62b33e1e443db3de24381beb5f95452c3a4ec",
    "2021-06-23",
)
"""enroot's ``deps/makeself`` submodule (used only by ``enroot bundle``), which ``git archive`` leaves out."""

ENROOT_RUNTIME_PACKAGES = (
    "squashfs-tools", "fuse-overlayfs", "squashfuse", "jq", "parallel", "zstd", "pigz", "curl", "bsdextrautils",
)  # fmt: skip
"""What enroot runs at import and start (its README's runtime dependencies; all in Debian and Ubuntu), and
``column`` (bsdextrautils), which ``enroot list`` runs: pyxis lists a node's containers for every named container
(``--container-name``), and a root without it fails that step (measured in trixie's minimal root)."""

PYXIS_MIN_SLURM = "21.08"
"""The oldest release pyxis is built for here: since 21.08 Slurm refuses a SPANK plugin built against another
release's ``spank.h`` ("Incompatible plugin version"), so each image compiles pyxis against its own headers."""


TASK_PROLOG_LAUNCHER = "24.11"
"""From this release slurmstepd runs a TaskProlog through itself (its script launcher, re-executed with the
task's mounts): in a pyxis container it cannot load its own libraries and every container step fails with status 127
(reported to pyxis upstream; measured with trixie's 24.11.5). Before it the script runs as is, and the node's enroot mounts bind
it into every container (``gpucluster_agents.contract.containers.enroot_mounts``; measured with 22.05)."""


def task_prolog_in_containers(release: str) -> bool:
    """Whether the node's TaskProlog (its NCCL/EFA settings for every task) can run in a container step on a node
    running Slurm ``release``."""
    from gpucluster.facts.slurm_releases import MAJORS

    return release in MAJORS and MAJORS.index(release) < MAJORS.index(TASK_PROLOG_LAUNCHER)


def pyxis_builds(release: str) -> bool:
    """Whether a node running Slurm ``release`` gets pyxis: the release is one an Ubuntu LTS image ships with its
    headers (``libslurm-dev`` of the same slurm-wlm build as its slurmd), and not older than :data:`PYXIS_MIN_SLURM`.
    A site image's own slurmd (``hybrid.controller.cloudSlurmVersion``) has no such headers on the image."""
    from gpucluster.facts.slurm_releases import MAJORS, UBUNTU_SLURM

    if release not in MAJORS or MAJORS.index(release) < MAJORS.index(PYXIS_MIN_SLURM):
        return False
    return release in UBUNTU_SLURM.values()
