"""How a Slurm node gets pyxis and enroot: built on the node's image (the baked image's install part, or the node's
setup at first boot with ``slurm.images.bake: false``, or a login node's setup) from their pinned releases
(:mod:`gpucluster.facts.containers`), pyxis against the headers of the Slurm the image runs.

Sources come one of two ways: a shallow ``git clone`` of the release tag that must be exactly the pinned commit, or,
when ``$GPUCLUSTER_CONTAINER_SOURCES`` names a directory of ``git archive`` tarballs (an offline build; the tests),
those tarballs checked against their pinned sha256. enroot's ``deps/makeself`` submodule is fetched the same way;
its other submodules are not needed: enroot is linked against glibc (``FORCE_GLIBC``) and the system's kernel headers
and ``libbsd``. docs/containers.md, "How the image gets pyxis and enroot"."""

from __future__ import annotations

from gpucluster.facts.containers import ENROOT, ENROOT_RUNTIME_PACKAGES, MAKESELF, PYXIS, Source
from gpucluster.render.core import render

BUILD_PACKAGES = ("gcc", "make", "libc6-dev", "libbsd-dev", "libslurm-dev", "git", "ca-certificates")
"""What the build needs: the compiler, Slurm's headers (``libslurm-dev`` of the same slurm-wlm build as the image's
Slurm, checked after the install), libbsd for enroot on glibc, git for the clone."""
SOURCES_ENV = "GPUCLUSTER_CONTAINER_SOURCES"
PYXIS_SO = "/usr/local/lib/slurm/spank_pyxis.so"  # same as render/slurm/containers.py
ENROOT_PREFIX = "/usr"
"""enroot's ``prefix``: its program in ``/usr/bin``, its optional hooks in ``/usr/share/enroot/hooks.d``; its
configuration in ``/etc/enroot`` (``sysconfdir``)."""


def container_packages() -> tuple[str, ...]:
    """The Debian packages a node that builds and runs pyxis and enroot installs."""
    return BUILD_PACKAGES + ENROOT_RUNTIME_PACKAGES


def _source(s: Source, dest: str) -> dict[str, str]:
    return {"name": s.name, "tag": s.tag, "commit": s.commit, "archive": s.archive, "sha256": s.archive_sha256,
            "repository": s.repository, "dest": dest}  # fmt: skip


def container_build(component: str = "") -> str:
    """The shell part that fetches, checks, builds and installs enroot and pyxis (run as root, after the packages of
    :func:`container_packages`; ``log`` defined)."""
    return render(
        "slurm/containers-build.sh.j2",
        sources=[_source(ENROOT, "enroot"), _source(MAKESELF, "enroot/deps/makeself"), _source(PYXIS, "pyxis")],
        sources_env=SOURCES_ENV,
        sources_ref=f'"${{{SOURCES_ENV}:-}}"',
        pyxis_so=PYXIS_SO,
        enroot_prefix=ENROOT_PREFIX,
        versions=f"pyxis {PYXIS.version}, enroot {ENROOT.version}",
    ).rstrip("\n")


def container_checks() -> list[str]:
    """The validate phase's commands: the plugin is where plugstack.conf names it and enroot runs."""
    return [f"test -s {PYXIS_SO}", f"enroot version | grep -qx {ENROOT.version}"]
