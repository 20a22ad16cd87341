"""The baked image's install script (``render/slurm/image.py: node_install_script``) run for real with
bash in a Debian trixie root (a private overlay of ``$GPUCLUSTER_SLURM_TRIXIE_ROOT``: ``trixie_overlay.py``).

No network in tests: ``apt-get`` is shimmed by a script that only checks that every package the script asks for is
installed in the root (``dpkg -s``) and fails like apt otherwise. The real network install is what EC2 Image Builder
does; everything else in the script runs for real: its policy-rc.d, the node package's sha256 check and unpacking, its
checks of what the node's setup expects, its log.

The cluster: one p5 group without Lustre (the Lustre client is built for the image's Ubuntu kernel) and without
declared people (their compute packages add openssh-server, which the trixie root does not hold): its package list
(slurmd, slurm-client, munge, python3-boto3, iptables, prometheus-node-exporter) is all in the root. Containers are
off in the package tests and on in the container test, which builds pyxis and enroot for real from the vendored
release archives (``$GPUCLUSTER_VENDOR``, default ``../shared/vendor``) against the root's Slurm 24.11 headers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucluster.facts.containers import ENROOT, MAKESELF, PYXIS
from gpucluster.load import load_spec
from gpucluster.render.slurm import image
from gpucluster.render.slurm.agent import agent_bundle, sha256
from gpucluster.render.slurm.container_build import PYXIS_SO, SOURCES_ENV, container_packages
from gpucluster.render.slurm.image import AGENT_ZIP, node_install_script, node_packages
from gpucluster.render.slurm.names import AGENT_LIB, SlurmContext
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup
from tests.conftest import IN_CI, group, make_config
from tests.render.trixie_overlay import OverlayRoot, overlay_root, trixie_with

pytestmark = pytest.mark.slow  # runs the install script in an overlay of the trixie root (chroot)

APT_SHIM = """\
#!/bin/sh
# apt-get for the tests (no network): "update" does nothing; "install" checks that every package named is installed in
# this root and fails as apt does (exit 100) for one that is not. Image Builder's build runs the real apt-get.
seen_install=no
for arg in "$@"; do
  if [ "$seen_install" = yes ]; then
    case "$arg" in
      -*) ;;
      *) dpkg -s "$arg" >/dev/null 2>&1 || { echo "E: Unable to locate package $arg" >&2; exit 100; } ;;
    esac
  fi
  [ "$arg" = install ] && seen_install=yes
done
echo "$*" >>/var/log/apt-shim.log
"""
LOG = "/var/log/gpucluster/slurm-node-install.log"
NEEDS = ("usr/bin/python3", "usr/sbin/slurmd", "usr/bin/dpkg", "usr/lib/python3/dist-packages/boto3")


def _ctx_group(containers: bool = False) -> tuple[SlurmContext, ResolvedNodeGroup]:
    slurm = {"nodeGroups": [{"name": "p5"}], "containers": {"enabled": containers}}
    cluster = load_spec(make_config(group(name="p5"), slurm=slurm), stack="img").cluster
    assert cluster.slurm is not None
    (g,) = cluster.slurm.node_groups
    assert not g.mounts_lustre
    return SlurmContext.of(cluster), g


@pytest.fixture(scope="module")
def bundle() -> bytes:
    trixie_with(*NEEDS)
    return agent_bundle()


def _install(root: OverlayRoot, script: str, zip_bytes: bytes, env: dict[str, str] | None = None) -> tuple[int, str]:
    root.write("/usr/local/sbin/apt-get", APT_SHIM, 0o755)
    root.write("/root/node-install.sh", script, 0o700)
    root.write(AGENT_ZIP, zip_bytes)
    done = root.run(["bash", "/root/node-install.sh"], env={"GPUCLUSTER_AGENT_ZIP": AGENT_ZIP, **(env or {})})
    return done.returncode, done.stdout + done.stderr


def test_the_install_script_installs_the_node_package_and_passes_its_checks(bundle: bytes, tmp_path: Path):
    ctx, g = _ctx_group()
    digest = sha256(bundle)
    script = node_install_script(ctx, g, agent_sha256=digest)
    with overlay_root(tmp_path) as root:
        rc, out = _install(root, script, bundle)
        assert rc == 0, out
        assert f"installed: {' '.join(node_packages(ctx))}, the node package" in root.path(LOG).read_text()
        assert all(p in root.path("/var/log/apt-shim.log").read_text() for p in node_packages(ctx))  # apt was asked
        assert root.path(f"{AGENT_LIB}/.sha256").read_text().strip() == digest
        assert not root.path(AGENT_ZIP).exists() and not root.path(f"{AGENT_LIB}.new").exists()
        assert not root.path("/usr/sbin/policy-rc.d").exists()  # the daemons' start guard is gone after the install
        imported = root.run(["python3", "-c", "import gpucluster_agents, pynvml; print(gpucluster_agents.__file__)"],
                            env={"PYTHONPATH": AGENT_LIB})  # fmt: skip
        assert imported.returncode == 0 and imported.stdout.startswith(f"{AGENT_LIB}/gpucluster_agents/"), imported


def test_a_package_the_root_lacks_fails_the_install(bundle: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ctx, g = _ctx_group()
    monkeypatch.setattr(image, "NODE_PACKAGES", (*image.NODE_PACKAGES, "gpucluster-no-such-package"))
    script = node_install_script(ctx, g, agent_sha256=sha256(bundle))
    with overlay_root(tmp_path) as root:
        rc, out = _install(root, script, bundle)
        assert rc == 100 and "Unable to locate package gpucluster-no-such-package" in out, out
        log = root.path(LOG).read_text()
        assert "failed (exit 100)" in log and "gpucluster-no-such-package" in log and "installed:" not in log, log
        assert not root.path(AGENT_LIB).exists()


def test_a_zip_that_is_not_the_node_package_is_refused(bundle: bytes, tmp_path: Path):
    ctx, g = _ctx_group()
    script = node_install_script(ctx, g, agent_sha256=sha256(bundle))
    with overlay_root(tmp_path) as root:
        rc, out = _install(root, script, bundle + b"tampered")
        assert rc == 1, out
        assert f"{AGENT_ZIP} is not the node package {sha256(bundle)[:12]}" in root.path(LOG).read_text()
        assert not root.path(AGENT_LIB).exists()


def test_the_scripts_own_checks_catch_a_missing_program(bundle: bytes, tmp_path: Path):
    """The checks of step 4 are live: a root whose iptables is gone (removed in the overlay only) fails them."""
    ctx, g = _ctx_group()
    script = node_install_script(ctx, g, agent_sha256=None)
    with overlay_root(tmp_path) as root:
        for name in ("iptables", "iptables-legacy", "iptables-nft"):
            for d in ("/usr/sbin", "/sbin"):
                if root.path(f"{d}/{name}").is_symlink() or root.path(f"{d}/{name}").exists():
                    root.path(f"{d}/{name}").unlink()
        rc, out = _install(root, script, bundle)
        assert rc == 1, out
        assert "iptables is missing after the install" in root.path(LOG).read_text()


VENDOR = Path(os.environ.get("GPUCLUSTER_VENDOR", Path(__file__).resolve().parents[3].parent / "shared" / "vendor"))
BUILD_NEEDS = ("usr/include/slurm/spank.h", "usr/bin/gcc", "usr/bin/make", "usr/bin/git", "usr/bin/mksquashfs",
               "usr/bin/fuse-overlayfs", "usr/bin/squashfuse", "usr/bin/jq", "usr/bin/parallel", "usr/bin/zstd",
               "usr/bin/pigz", "usr/bin/curl", "usr/lib/x86_64-linux-gnu/libbsd.a")  # fmt: skip
SOURCES = "/root/container-sources"
# srun loads the plugin stack at startup and refuses a SPANK plugin built for another Slurm release
SRUN_CONF = "ClusterName=img\nSlurmctldHost=localhost\nPlugStackConfig=/etc/slurm/plugstack.conf\n"


def _archives() -> dict[str, bytes]:
    found = {s.archive: VENDOR / s.archive for s in (PYXIS, ENROOT, MAKESELF)}
    missing = [str(p) for p in found.values() if not p.is_file()]
    if missing:
        (pytest.fail if IN_CI else pytest.skip)(f"the vendored sources are missing: {', '.join(missing)}")
    return {name: path.read_bytes() for name, path in found.items()}


def _container_root(root: OverlayRoot, archives: dict[str, bytes]) -> None:
    for name, data in archives.items():
        root.write(f"{SOURCES}/{name}", data)


def test_the_install_script_builds_pyxis_for_the_roots_slurm_and_a_working_enroot(bundle: bytes, tmp_path: Path):
    trixie_with(*BUILD_NEEDS)
    archives = _archives()
    ctx, g = _ctx_group(containers=True)
    script = node_install_script(ctx, g, agent_sha256=sha256(bundle))
    with overlay_root(tmp_path) as root:
        _container_root(root, archives)
        rc, out = _install(root, script, bundle, {SOURCES_ENV: SOURCES})
        assert rc == 0, out
        assert ", pyxis and enroot" in root.path(LOG).read_text()
        assert all(p in root.path("/var/log/apt-shim.log").read_text() for p in container_packages())
        version = root.run(["enroot", "version"])
        assert (version.returncode, version.stdout.strip()) == (0, ENROOT.version), version
        assert root.path("/usr/share/enroot/hooks.d/50-slurm-pytorch.sh").is_file()  # the optional hooks, for training
        for util in ("enroot-mount", "enroot-switchroot", "enroot-nsenter", "enroot-aufs2ovlfs", "enroot-mksquashovlfs"):
            assert root.path(f"/usr/bin/{util}").read_bytes()[:4] == b"\x7fELF", util  # compiled here, linked to glibc
        root.write("/etc/slurm/slurm.conf", SRUN_CONF)
        root.write("/etc/slurm/plugstack.conf", f"required {PYXIS_SO}\n")
        helped = root.run(["srun", "--help"])
        assert "--container-image" in helped.stdout and "[pyxis]" in helped.stdout, helped.stdout + helped.stderr


def test_a_tampered_source_archive_is_refused(bundle: bytes, tmp_path: Path):
    trixie_with(*BUILD_NEEDS)
    archives = _archives()
    archives[PYXIS.archive] += b"x"
    ctx, g = _ctx_group(containers=True)
    script = node_install_script(ctx, g, agent_sha256=sha256(bundle))
    with overlay_root(tmp_path) as root:
        _container_root(root, archives)
        rc, _ = _install(root, script, bundle, {SOURCES_ENV: SOURCES})
        assert rc == 1
        assert f"{PYXIS.archive} is not pyxis {PYXIS.tag}" in root.path(LOG).read_text()
        assert not root.path(PYXIS_SO).exists()
