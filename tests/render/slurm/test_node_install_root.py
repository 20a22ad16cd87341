"""The baked image's install script (``render/slurm/image.py: node_install_script``) run for real with
bash in a Debian trixie root (a private overlay of ``$GPUCLUSTER_SLURM_TRIXIE_ROOT``: ``trixie_overlay.py``).

No network in tests: ``apt-get`` is shimmed by a script that only checks that every package the script asks for is
installed in the root (``dpkg -s``) and fails like apt otherwise. The real network install is what EC2 Image Builder
does; everything else in the script runs for real: its policy-rc.d, the node package's sha256 check and unpacking, its
checks of what the node's setup expects, its log.

The cluster: one p5 group without Lustre (the Lustre client is built for the image's Ubuntu kernel) and without
declared people (their compute packages add openssh-server, which the trixie root does not hold): its package list
(slurmd, slurm-client, munge, python3-boto3, iptables, prometheus-node-exporter) is all in the root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.load import load_spec
from gpucluster.render.slurm import image
from gpucluster.render.slurm.agent import agent_bundle, sha256
from gpucluster.render.slurm.image import AGENT_ZIP, node_install_script, node_packages
from gpucluster.render.slurm.names import AGENT_LIB, SlurmContext
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup
from tests.conftest import group, make_config
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


def _ctx_group() -> tuple[SlurmContext, ResolvedNodeGroup]:
    cluster = load_spec(make_config(group(name="p5"), slurm={"nodeGroups": [{"name": "p5"}]}), stack="img").cluster
    assert cluster.slurm is not None
    (g,) = cluster.slurm.node_groups
    assert not g.mounts_lustre
    return SlurmContext.of(cluster), g


@pytest.fixture(scope="module")
def bundle() -> bytes:
    trixie_with(*NEEDS)
    return agent_bundle()


def _install(root: OverlayRoot, script: str, zip_bytes: bytes) -> tuple[int, str]:
    root.write("/usr/local/sbin/apt-get", APT_SHIM, 0o755)
    root.write("/root/node-install.sh", script, 0o700)
    root.write(AGENT_ZIP, zip_bytes)
    done = root.run(["bash", "/root/node-install.sh"], env={"GPUCLUSTER_AGENT_ZIP": AGENT_ZIP})
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
