"""The hybrid bundle installs boto3 for the site's agent only from its ``requirements.txt``: every package pinned by
version and sha256, installed with ``pip install --require-hashes --no-deps --only-binary :all:``.

pip itself is the reader: the pinned wheels are downloaded with ``--require-hashes`` (pip refuses a file whose sha256
differs from the pin), then ``pip install --dry-run --no-index --find-links`` resolves the file offline from exactly
those wheels, without ``--no-deps``, so a dependency missing from the file fails (``--require-hashes`` requires every
package to be pinned). pip evaluates a requirement's environment marker against the interpreter running it, so the
Python 3.9 set is checked as its own marker-free file with ``--python-version 3.9``. The download uses the package
index pip is configured with (CI's, or this machine's mirror).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.facts.downloads import site_requirements
from tests.render.hybrid.bundle_site import files_of, site_for, stack_config

pytestmark = pytest.mark.slow  # pip downloads and installs the site's wheels

LINE = re.compile(r'^([a-z0-9-]+)==([0-9][0-9a-z.]*)(?: ; (python_version [<>=]+ "3\.10"))? --hash=sha256:([0-9a-f]{64})$')


def pinned() -> list[tuple[str, str, str, str]]:
    return [m.groups("") for line in site_requirements().splitlines() if not line.startswith("#") and (m := LINE.match(line))]


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True, text=True, timeout=600
    )


def test_every_line_is_pinned_by_version_and_hash():
    body = [line for line in site_requirements().splitlines() if line and not line.startswith("#")]
    assert body and len(pinned()) == len(body), [line for line in body if not LINE.match(line)]
    for marker in ('python_version >= "3.10"', 'python_version < "3.10"'):
        names = {n for n, _, m, _ in pinned() if m in (marker, "")}
        assert names == {"boto3", "botocore", "s3transfer", "urllib3", "jmespath", "python-dateutil", "six"}, (marker, names)


def test_the_bundle_ships_the_file_and_install_sh_uses_only_it():
    files = files_of(site_for(stack_config()))
    assert files["requirements.txt"].content.decode() == site_requirements()
    script = files["install.sh"].content.decode()
    assert '--require-hashes --no-deps --only-binary :all: -r "$here/requirements.txt"' in script
    assert "pip\" install -q 'boto3" not in script and "boto3>=" not in script


@pytest.mark.parametrize("python", ["3.10+", "3.9"])
def test_pip_accepts_the_pins_and_they_are_complete(tmp_path: Path, python: str):
    wanted = 'python_version < "3.10"' if python == "3.9" else 'python_version >= "3.10"'
    lines = [f"{n}=={v} --hash=sha256:{h}" for n, v, m, h in pinned() if m in (wanted, "")]
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("\n".join(lines) + "\n")
    target = ["--python-version", "3.9"] if python == "3.9" else []
    wheels = tmp_path / "wheels"
    got = pip(
        "download", "-q", "--no-deps", "--require-hashes", "--only-binary", ":all:", *target, "-d", str(wheels), "-r", str(reqs)
    )
    assert got.returncode == 0, got.stderr[-3000:]
    assert len(list(wheels.glob("*.whl"))) == len(lines)
    offline = ["--dry-run", "--ignore-installed", "--require-hashes", "--only-binary", ":all:", "--no-index"]
    if python == "3.9":
        offline += ["--target", str(tmp_path / "target")]
    resolved = pip("install", *offline, *target, "--find-links", str(wheels), "-r", str(reqs))
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    assert "Would install" in resolved.stdout and "boto3" in resolved.stdout, resolved.stdout


def test_pip_refuses_a_wrong_hash(tmp_path: Path):
    """The check above can fail: one changed digit in a pin and pip refuses the file."""
    name, version, _, digest = next(p for p in pinned() if p[0] == "six")
    wrong = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"{name}=={version} --hash=sha256:{wrong}\n")
    got = pip("download", "-q", "--no-deps", "--require-hashes", "-d", str(tmp_path / "w"), "-r", str(reqs))
    assert got.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in got.stderr, got.stderr[-2000:]
