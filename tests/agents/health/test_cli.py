"""The command line as Slurm, the boot helper and the Kubernetes sweep run it: a separate process, the
fake NVML chosen by --fake-nvml (never by the environment), exit 0/1/2, the verdict appended to the log, and on a
fault in sweep/prolog mode one ``scontrol update ... state=drain reason="gpucluster: ..."`` call."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster_agents.contract.health import to_json
from tests.agents.health.fakes import kernel_log, node, p5_config, scenario
from tests.conftest import ROOT


def fake_scontrol(bin_dir: Path) -> Path:
    """Records its argv, one JSON line per call."""
    calls = bin_dir / "scontrol.calls"
    script = bin_dir / "scontrol"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    script.chmod(0o755)
    return calls


def cli(tmp: Path, mode: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {"PATH": str(tmp / "bin"), "PYTHONPATH": str(ROOT), **(env or {})}
    argv = [sys.executable, "-m", "gpucluster_agents.health", mode, "--config", str(tmp / "health.json"), *extra]
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def fake_node(tmp_path: Path):
    (tmp_path / "bin").mkdir()
    calls = fake_scontrol(tmp_path / "bin")
    (tmp_path / "health.json").write_text(to_json(p5_config(tmp_path)))

    def make(nvml: dict, **kw) -> list[str]:
        path = node(tmp_path, nvml, **kw)
        return ["--fake-nvml", str(path)]

    make.calls = calls  # type: ignore[attr-defined]
    return make


def test_healthy_sweep_exits_0_logs_and_drains_nothing(tmp_path: Path, fake_node):
    fake = fake_node(scenario())
    proc = cli(tmp_path, "sweep", "--node", "p5-1", "--json", *fake)
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["action"] == "none" and verdict["node"] == "p5-1" and verdict["mode"] == "sweep"
    assert [json.loads(line)["action"] for line in (tmp_path / "health.jsonl").read_text().splitlines()] == ["none"]
    assert not fake_node.calls.exists()


def test_faulty_sweep_drains_its_node_with_the_gpucluster_reason(tmp_path: Path, fake_node):
    fake = fake_node(scenario({2: {"remapped_rows": [0, 1, 1, 0]}}))
    proc = cli(tmp_path, "sweep", *fake, env={"SLURMD_NODENAME": "p5-7"})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("p5-7 sweep: reboot - gpucluster: row_remap gpu2 row remap pending")
    assert "FAIL row_remap" in proc.stdout
    calls = [json.loads(line) for line in fake_node.calls.read_text().splitlines()]
    assert calls == [["update", "nodename=p5-7", "state=drain", "reason=gpucluster: row_remap gpu2 row remap pending (reboot)"]]


def test_faulty_prolog_drains_and_exits_1_but_boot_only_exits_1(tmp_path: Path, fake_node):
    fake = fake_node(scenario({4: {"clock_events": 0x80}}))
    assert cli(tmp_path, "prolog", "--node", "p5-2", *fake).returncode == 1
    assert cli(tmp_path, "boot", "--node", "p5-2", *fake).returncode == 1
    calls = [json.loads(line) for line in fake_node.calls.read_text().splitlines()]
    assert calls == [
        ["update", "nodename=p5-2", "state=drain", "reason=gpucluster: clock_events gpu4 HwPowerBrakeSlowdown (replace)"]
    ]
    assert [json.loads(line)["mode"] for line in (tmp_path / "health.jsonl").read_text().splitlines()] == ["prolog", "boot"]


def test_a_job_can_opt_out_of_the_prolog(tmp_path: Path, fake_node):
    fake = fake_node(scenario({4: {"clock_events": 0x80}}))
    proc = cli(tmp_path, "prolog", *fake, env={"SLURM_JOB_EXTRA": "team=a,healthchecks=off"})
    assert proc.returncode == 0 and "skipped" in proc.stderr
    assert not fake_node.calls.exists() and not (tmp_path / "health.jsonl").exists()
    # the opt-out is for the prolog only: a sweep still judges the node
    assert cli(tmp_path, "sweep", *fake, env={"SLURM_JOB_EXTRA": "healthchecks=off"}).returncode == 1


def test_exit_2_when_the_program_cannot_run(tmp_path: Path, fake_node):
    proc = cli(tmp_path, "sweep", "--config", str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and "missing.json: file not found" in proc.stderr
    (tmp_path / "bad.json").write_text('{"gpu_count": "eight"}')
    proc = cli(tmp_path, "sweep", "--config", str(tmp_path / "bad.json"))
    assert proc.returncode == 2 and "instance_type: required key is missing" in proc.stderr
    assert "gpu_count: must be an integer, got 'eight'" in proc.stderr
    assert cli(tmp_path, "nightly").returncode == 2  # argparse: unknown mode


def test_an_unwritable_log_does_not_hide_a_fault(tmp_path: Path, fake_node):
    fake = fake_node(scenario(gpu_count=6))
    cfg = p5_config(tmp_path, log_file="/proc/gpucluster/health.jsonl")
    (tmp_path / "health.json").write_text(to_json(cfg))
    proc = cli(tmp_path, "sweep", "--node", "p5-3", *fake)
    assert proc.returncode == 1 and "cannot append to /proc/gpucluster/health.jsonl" in proc.stderr
    assert "gpu_count 6 of 8 GPUs" in fake_node.calls.read_text()


@pytest.mark.skipif(bool(ctypes.util.find_library("nvidia-ml")), reason="this machine has an NVIDIA driver")
def test_the_real_binding_without_a_driver_is_a_driver_fault(tmp_path: Path, fake_node):
    """No fake: nvidia-ml-py is imported for real, and with no libnvidia-ml here the node's GPUs are unusable."""
    pytest.importorskip("pynvml")
    node(tmp_path, scenario())
    env = {**os.environ, "PATH": str(tmp_path / "bin")}
    proc = cli(tmp_path, "prolog", "--node", "p5-4", "--json", env=env)
    assert proc.returncode == 1, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert not checks["driver"]["ok"] and checks["driver"]["detail"] == "driver not loaded"
    assert "reason=gpucluster: driver driver not loaded" in fake_node.calls.read_text()


def test_the_environment_chooses_neither_the_config_nor_the_readings(tmp_path: Path, fake_node):
    """Root runs this program: the variables that once chose the config and the fake readings are ignored.
    A healthy node stays healthy whatever they name, and a missing --config means the default path."""
    fake = fake_node(scenario())
    (tmp_path / "evil.json").write_text(json.dumps(scenario(gpu_count=2)))
    (tmp_path / "evil-config.json").write_text(to_json(p5_config(tmp_path, gpu_count=64)))
    env = {
        "GPUCLUSTER_HEALTH_FAKE_NVML": str(tmp_path / "evil.json"),
        "GPUCLUSTER_HEALTH_CONFIG": str(tmp_path / "evil-config.json"),
    }
    proc = cli(tmp_path, "sweep", "--node", "p5-1", "--json", *fake, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_unreadable_fake_nvml_scenario_cannot_run(tmp_path: Path, fake_node):
    fake_node(scenario())
    proc = cli(tmp_path, "sweep", "--fake-nvml", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "--fake-nvml" in proc.stderr


def test_without_config_the_default_path_is_read_whatever_the_environment_says(monkeypatch: pytest.MonkeyPatch):
    from gpucluster_agents.contract.health import DEFAULT_PATH, HealthConfigError
    from gpucluster_agents.health import cli as health_cli

    read: list[str] = []

    def load(path: str):
        read.append(path)
        raise HealthConfigError(["file not found"], path)

    monkeypatch.setattr(health_cli, "load", load)
    monkeypatch.setenv("GPUCLUSTER_HEALTH_CONFIG", "/tmp/evil-config.json")
    assert health_cli.main(["sweep"]) == health_cli.EXIT_CANNOT_RUN
    assert read == [DEFAULT_PATH]


def test_a_genuine_xid_79_drains_for_a_replacement_and_the_forgeries_drain_nothing(tmp_path: Path, fake_node):
    """The XID evidence rule end to end through the command line: a log holding only the forgeries any user can make
    (the crafted segfault report, a userspace /dev/kmsg record) passes; the driver's own XID 79 record on one
    of the node's GPUs drains the node for a replacement."""
    fake = fake_node(scenario())
    assert cli(tmp_path, "sweep", "--node", "p5-1", *fake).returncode == 0
    assert not fake_node.calls.exists()
    (tmp_path / "kernel.log").write_text(kernel_log(79))  # the same node, the driver's record added
    assert cli(tmp_path, "sweep", "--node", "p5-1", *fake).returncode == 1
    calls = [json.loads(line) for line in fake_node.calls.read_text().splitlines()]
    assert calls == [
        [
            "update",
            "nodename=p5-1",
            "state=drain",
            "reason=gpucluster: xid XID 79 GPU has fallen off the bus on PCI:0000:a8:00 (replace)",
        ]
    ]
