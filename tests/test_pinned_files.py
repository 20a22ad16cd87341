"""The pinned-file fetcher, against a local HTTP server on 127.0.0.1 (never the internet).

It must take a file only when its bytes match the pin, write nothing when they don't, reuse a verified cache,
read ``GPUCLUSTER_K8S_SCHEMAS`` when it is set, and say what went wrong in one line instead of a traceback.
"""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pinned_files
from tests.conftest import ROOT
from tests.pinned_files import PINS, Pin, PinnedFileError, pinned_path

SMALL = "eks-charts/v0.0.242/Chart.yaml"


class _Served:
    """Files served at /<repository>/<commit>/<path>, and the paths that were asked for."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []


@pytest.fixture
def server() -> Iterator[tuple[str, _Served]]:
    served = _Served()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append(self.path)
            body = served.files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", served
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def pin_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, _Served]) -> tuple[Path, _Served]:
    """A test pin whose content we control, an empty cache, and the local server as the download source."""
    base, served = server
    content = b"apiVersion: v2\nname: example\n"
    pin = Pin("example/v1/Chart.yaml", "owner/repo", "0" * 40, "charts/example/Chart.yaml", hashlib.sha256(content).hexdigest())
    monkeypatch.setitem(PINS, pin.relative, pin)
    monkeypatch.delenv("GPUCLUSTER_K8S_SCHEMAS", raising=False)
    monkeypatch.setenv("GPUCLUSTER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUCLUSTER_K8S_SCHEMAS_URL", base)
    served.files[f"/owner/repo/{'0' * 40}/charts/example/Chart.yaml"] = content
    return tmp_path / "cache" / "k8s-schemas" / pin.relative, served


def test_downloads_verifies_and_caches(pin_env: tuple[Path, _Served]) -> None:
    cached, served = pin_env
    path = pinned_path("example/v1/Chart.yaml")
    assert path == cached
    assert path.read_bytes() == b"apiVersion: v2\nname: example\n"
    assert served.requests == [f"/owner/repo/{'0' * 40}/charts/example/Chart.yaml"]
    # A second call uses the verified cache: no second request.
    assert pinned_path("example/v1/Chart.yaml") == cached
    assert len(served.requests) == 1


def test_refuses_bytes_that_do_not_match_the_pin(pin_env: tuple[Path, _Served]) -> None:
    cached, served = pin_env
    served.files[f"/owner/repo/{'0' * 40}/charts/example/Chart.yaml"] = b"tampered\n"
    with pytest.raises(
        PinnedFileError,
        match=r"example/v1/Chart.yaml: http://127\.0\.0\.1:\d+/owner/repo/0+/charts/example/Chart.yaml "
        r"served sha256 [0-9a-f]{64}, the pin says [0-9a-f]{64}; refusing it",
    ):
        pinned_path("example/v1/Chart.yaml")
    assert not cached.exists(), "a file that failed its sha256 must not be cached"


def test_a_corrupted_cache_is_fetched_again(pin_env: tuple[Path, _Served]) -> None:
    cached, served = pin_env
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"half a file")
    assert pinned_path("example/v1/Chart.yaml").read_bytes() == b"apiVersion: v2\nname: example\n"
    assert len(served.requests) == 1


def test_unreachable_source_is_one_clear_line(pin_env: tuple[Path, _Served], monkeypatch: pytest.MonkeyPatch) -> None:
    _, served = pin_env
    served.files.clear()
    with pytest.raises(PinnedFileError, match=r"example/v1/Chart.yaml: could not download http://127\.0\.0\.1:\d+/.*: Not Found"):
        pinned_path("example/v1/Chart.yaml")
    monkeypatch.setenv("GPUCLUSTER_K8S_SCHEMAS_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(PinnedFileError, match=r"could not download http://127\.0\.0\.1:9/.*: .*refused"):
        pinned_path("example/v1/Chart.yaml")


def test_a_schemas_directory_is_read_in_place_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pin = PINS[SMALL]
    monkeypatch.setenv("GPUCLUSTER_K8S_SCHEMAS", str(tmp_path))
    with pytest.raises(PinnedFileError, match=rf"{SMALL} is missing from GPUCLUSTER_K8S_SCHEMAS={tmp_path}"):
        pinned_path(SMALL)
    (tmp_path / SMALL).parent.mkdir(parents=True)
    (tmp_path / SMALL).write_text("not the pinned chart\n")
    with pytest.raises(
        PinnedFileError,
        match=rf"has sha256 [0-9a-f]{{64}}, the pin says {pin.sha256}: replace it with "
        rf"aws/eks-charts@{pin.commit}:stable/aws-efa-k8s-device-plugin/Chart.yaml",
    ):
        pinned_path(SMALL)


def test_every_pin_resolves_in_this_run() -> None:
    """Every pinned file is there and verified where this run reads them (CI: ../shared/k8s-schemas)."""
    for relative in PINS:
        path = pinned_path(relative)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == PINS[relative].sha256


def test_fetch_command_says_what_is_missing_without_a_traceback(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "GPUCLUSTER_CACHE": str(tmp_path),
        "GPUCLUSTER_K8S_SCHEMAS_URL": "http://127.0.0.1:9",
        "GPUCLUSTER_SCHEMAS": str(tmp_path / "no-shared-schemas"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests.pinned_files", "fetch"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == len(PINS) + 1
    assert lines[-1].startswith(f"pinned files: {len(PINS)} of {len(PINS)} could not be had; set GPUCLUSTER_K8S_SCHEMAS")
    assert all(line.startswith("pinned files: ") and "could not download http://127.0.0.1:9/" in line for line in lines[:-1])


def test_pins_cover_every_file_the_schema_tests_read() -> None:
    from tests.render.kubernetes import schemas

    used = set(schemas.CRDS.values()) | set(schemas.CHART_VALUES.values()) | {schemas.KUEUE_MANAGER_CONFIG}
    assert used <= set(PINS), f"unpinned: {sorted(used - set(PINS))}"
    assert pinned_files.DEFAULT_BASE_URL.startswith("https://")
