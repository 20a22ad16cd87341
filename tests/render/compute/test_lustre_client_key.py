"""The Lustre mount script trusts the FSx client repository's key only when the downloaded file holds exactly one
primary key, and, when gpucluster pins a fingerprint (``gpucluster/facts/downloads.py``), only that key. The FSx user guide publishes no fingerprint, so the shipped pin is empty and the key's fingerprint is logged.

The rendered script's client install runs for real (bash, the real ``gpg`` reading keys made here) as on an Ubuntu
node without the Lustre client: ``curl`` is a stub serving a chosen key file, ``apt-get`` and ``mount`` are stubs,
and the os-release, keyring and apt-source locations are the test's (the script's GPUCLUSTER_* test overrides).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpucluster.render.compute import node as render_node
from gpucluster.render.compute.node import LustreMount, lustre_mount_script
from tests.conftest import require_tool

MOUNT = LustreMount("fs-0123456789abcdef0", "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "abcdefgh", "/fsx", "noatime")


def make_key(home: Path, name: str) -> tuple[str, bytes]:
    """A fresh signing key (its fingerprint, its armored public key)."""
    gpg = require_tool("gpg")
    home.mkdir(mode=0o700, exist_ok=True)
    base = [gpg, "--homedir", str(home), "--batch", "--passphrase", ""]
    subprocess.run(
        [*base, "--quick-gen-key", f"{name} <{name}@example.com>", "ed25519", "sign", "never"], check=True, capture_output=True
    )
    listing = subprocess.run([*base, "--with-colons", "--list-keys", name], check=True, capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    armored = subprocess.run([*base, "--armor", "--export", fingerprint], check=True, capture_output=True).stdout
    return fingerprint, armored


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, tuple[str, bytes]]:
    home = tmp_path_factory.mktemp("gnupg")
    return {name: make_key(home / "keys", name) for name in ("fsx", "other")}


def run_install(tmp_path: Path, script: str, served: bytes) -> tuple[subprocess.CompletedProcess[str], Path]:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (tmp_path / "served.asc").write_bytes(served)
    programs = {
        "curl": f'while [ $# -gt 1 ]; do [ "$1" = -o ] && cp {tmp_path}/served.asc "$2"; shift; done',
        "apt-get": f'echo "apt-get $*" >> {tmp_path}/apt.log',
        "mount": "exit 0",
        "sleep": "exit 0",
    }
    for name, body in programs.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    (tmp_path / "os-release").write_text("ID=ubuntu\nVERSION_CODENAME=noble\n")
    for d in ("keyrings", "sources", "log", "sys"):
        (tmp_path / d).mkdir()
    (tmp_path / "fstab").write_text("")
    (tmp_path / "mount-lustre").write_text(script)
    env = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GPUCLUSTER_OS_RELEASE": str(tmp_path / "os-release"),
        "GPUCLUSTER_KEYRINGS": str(tmp_path / "keyrings"),
        "GPUCLUSTER_APT_SOURCES": str(tmp_path / "sources"),
        "GPUCLUSTER_FSTAB": str(tmp_path / "fstab"),
        "GPUCLUSTER_LOG": str(tmp_path / "log"),
        "GPUCLUSTER_SYS": str(tmp_path / "sys"),
    }
    done = subprocess.run(
        [require_tool("bash"), str(tmp_path / "mount-lustre")], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    return done, tmp_path / "keyrings" / "fsx-ubuntu-public-key.gpg"


def log_of(tmp_path: Path) -> str:
    return (tmp_path / "log" / "lustre.log").read_text()


def test_one_key_unpinned_is_trusted_and_its_fingerprint_logged(tmp_path, keys):
    fingerprint, armored = keys["fsx"]
    done, keyring = run_install(tmp_path, lustre_mount_script(MOUNT, efa=False, gds=False), armored)
    assert done.returncode == 0, done.stderr + log_of(tmp_path)
    assert f"FSx repository key {fingerprint} trusted over TLS" in log_of(tmp_path)
    assert keyring.read_bytes()[:1] != b"-"  # dearmored: a binary keyring for apt's signed-by
    assert f"signed-by={keyring}" in (tmp_path / "sources" / "fsxlustreclientrepo.list").read_text()
    assert "apt-get install" in (tmp_path / "apt.log").read_text()


def test_a_file_with_two_keys_is_refused(tmp_path, keys):
    done, keyring = run_install(tmp_path, lustre_mount_script(MOUNT, efa=False, gds=False), keys["fsx"][1] + keys["other"][1])
    assert done.returncode == 1 and "FSx repository key file holds keys" in log_of(tmp_path)
    assert not keyring.exists() and not (tmp_path / "apt.log").exists()


@pytest.mark.parametrize("served", ["fsx", "other"])
def test_a_pinned_fingerprint_admits_that_key_only(tmp_path, keys, monkeypatch, served):
    monkeypatch.setattr(render_node, "FSX_UBUNTU_KEY_FINGERPRINT", keys["fsx"][0])
    script = lustre_mount_script(MOUNT, efa=False, gds=False)
    assert keys["fsx"][0] in script
    done, keyring = run_install(tmp_path, script, keys[served][1])
    if served == "fsx":
        assert done.returncode == 0 and keyring.exists(), done.stderr + log_of(tmp_path)
    else:
        assert done.returncode == 1 and f"is not the pinned {keys['fsx'][0]}: not trusting it" in log_of(tmp_path)
        assert not keyring.exists() and not (tmp_path / "apt.log").exists()
