"""nodeadm is downloaded by a site's ``install.sh`` only from a pinned release and only after ``sha256sum -c``:
never ``releases/latest``, never unchecked. AWS's documentation publishes no checksum, so the version and
the sha256 per architecture are config inputs (``hybrid.kubernetes.nodeadm``); without them install.sh refuses.

The script runs for real (bash) with stubs first on PATH: ``curl`` writes chosen bytes to its ``-o`` file and logs
its URL, ``install`` logs its arguments and stops the script (nothing reaches the machine), ``uname`` answers the
architecture. ``sha256sum`` is the real one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.render.hybrid.eks_nodes import HybridNodeIdentity
from tests.conftest import IN_CI, require_tool
from tests.render.hybrid.eks_fixtures import ROLE, ssm_spec
from tests.render.hybrid.test_eks_nodes import bundle

NODEADM = b"\x7fELF pretend nodeadm\n"
PINNED = hashlib.sha256(NODEADM).hexdigest()
ACTIVATION = ("0a1b2c3d-4e5f-6789-abcd-ef0123456789", "A" * 20)


def script_for(tmp_path: Path, nodeadm: dict[str, str] | None) -> Path:
    spec = ssm_spec(kubernetes={"nodeadm": nodeadm} if nodeadm else {})
    files = bundle(spec, HybridNodeIdentity(ROLE))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path / "install.sh"


def run(
    tmp_path: Path, script: Path, arch: str = "x86_64", served: bytes = NODEADM
) -> tuple[subprocess.CompletedProcess[str], str]:
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    (tmp_path / "served").write_bytes(served)
    programs = {
        "curl": f'out=""; url=""; while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift ;; https:*) url=$1 ;; esac; shift; done\n'
        f'echo "curl $url" >> {log}; cp {tmp_path / "served"} "$out"',
        "install": f'echo "install $*" >> {log}; exit 42',
        "uname": f'[ "$1" = -m ] && echo {arch} || /bin/uname "$@"',
        "nodeadm": f'echo "nodeadm $*" >> {log}; exit 43',
    }
    for name, body in programs.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [require_tool("bash"), str(script), *ACTIVATION], capture_output=True, text=True, timeout=30, env=env, cwd=tmp_path
    )
    return done, log.read_text() if log.exists() else ""


def needs_root() -> None:
    """install.sh checks for root before it downloads (the stubs keep it off the machine)."""
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("the nodeadm install tests need root (install.sh refuses to run otherwise); run CI as root")
        pytest.skip("needs root: install.sh refuses to run otherwise")


def test_unpinned_install_refuses_before_downloading_anything(tmp_path):
    done, calls = run(tmp_path, script_for(tmp_path, None))
    assert done.returncode == 1 and "nodeadm is not pinned: set gpucluster:hybrid.kubernetes.nodeadm" in done.stderr, done.stderr
    assert calls == ""
    assert "releases/latest" not in (tmp_path / "install.sh").read_text()


def test_pinned_install_downloads_the_version_and_installs_only_a_matching_binary(tmp_path):
    needs_root()
    script = script_for(tmp_path, {"version": "v1.0.20", "sha256Amd64": PINNED})
    subprocess.run([require_tool("bash"), "-n", str(script)], check=True)
    done, calls = run(tmp_path, script)
    lines = calls.splitlines()
    assert lines[0] == "curl https://hybrid-assets.eks.amazonaws.com/releases/v1.0.20/bin/linux/amd64/nodeadm", calls
    assert lines[1].startswith("install -m 0755 ") and lines[1].endswith("/nodeadm /usr/local/bin/nodeadm"), calls
    assert done.returncode == 42 and len(lines) == 2, done.stderr  # the install stub stopped it: nothing ran nodeadm


def test_a_binary_that_does_not_match_the_pin_is_not_installed(tmp_path):
    needs_root()
    script = script_for(tmp_path, {"version": "v1.0.20", "sha256Amd64": PINNED})
    done, calls = run(tmp_path, script, served=NODEADM + b"tampered")
    assert done.returncode == 1 and "nodeadm v1.0.20 (amd64) does not match its pinned sha256" in done.stderr, done.stderr
    assert calls.splitlines() == ["curl https://hybrid-assets.eks.amazonaws.com/releases/v1.0.20/bin/linux/amd64/nodeadm"]


def test_an_architecture_without_a_pin_refuses(tmp_path):
    needs_root()
    script = script_for(tmp_path, {"version": "v1.0.20", "sha256Amd64": PINNED})
    done, calls = run(tmp_path, script, arch="aarch64")
    assert (
        done.returncode == 1 and "no sha256 pinned for nodeadm v1.0.20 on arm64" in done.stderr and "sha256Arm64" in done.stderr
    )
    assert calls == ""


@pytest.mark.parametrize(
    ("nodeadm", "fragment"),
    [
        ({"version": "latest", "sha256Amd64": PINNED}, "version"),
        ({"version": "v1.0.20", "sha256Amd64": "XYZ"}, "sha256Amd64"),
        ({"version": "v1.0.20"}, "nodeadm v1.0.20 pins no sha256"),
    ],
    ids=["latest", "not-hex", "no-sha256"],
)
def test_bad_pins_are_config_errors(nodeadm, fragment):
    with pytest.raises(ConfigError) as caught:
        ssm_spec(kubernetes={"nodeadm": nodeadm})
    assert any("hybrid.kubernetes.nodeadm" in f.path for f in caught.value.findings), caught.value
    assert fragment in str(caught.value), caught.value
