"""What real Slurm (Debian's 22.05) does with the health program: HealthCheckProgram running ``sweep``
on a node whose GPU goes bad drains the node with the ``gpucluster:`` reason (Slurm itself ignores the
program's exit status); a Prolog running ``prolog`` that finds a fault requeues the job and leaves the
node drained with the program's reason. The GPU readings come from the fake NVML scenario file the
wrappers name; turning the node bad is rewriting that file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster_agents.contract.health import to_json
from tests.agents.health.fakes import node, p5_config, scenario
from tests.conftest import IN_CI
from tests.e2e import slurm_harness
from tests.e2e.slurm_local import SCONTROL, SLURMCTLD, SLURMD, HealthSlurm, wrapper

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def slurm_here() -> None:
    for tool in (SLURMCTLD, SLURMD, SCONTROL):
        if not shutil.which(tool):
            if IN_CI:
                pytest.fail(f"{tool} is missing (CI installs Slurm 22.05)")
            pytest.skip(f"{tool} not installed")


@pytest.fixture
def run_dir() -> Path:
    return slurm_harness.run_dir("gchealth-")


def fake_gpu_node(d: Path) -> tuple[Path, Path]:
    (d / "bin").mkdir(exist_ok=True)
    scenario_file = node(d, scenario())
    cfg = p5_config(d, slurm_bin_dir="/usr/bin")
    config = d / "health.json"
    config.write_text(to_json(cfg))
    return config, scenario_file


@pytest.fixture
def cluster(run_dir: Path, request: pytest.FixtureRequest) -> Iterator[tuple[HealthSlurm, Path]]:
    config, scenario_file = fake_gpu_node(run_dir)
    settings: dict[str, str] = {}
    if request.param == "sweep":
        settings["HealthCheckProgram"] = wrapper(
            run_dir / "bin" / "health-sweep", "sweep", config, scenario_file, run_dir / "slurm.conf"
        )
        settings["HealthCheckInterval"] = "3"
        settings["HealthCheckNodeState"] = "ANY"
    else:
        settings["Prolog"] = wrapper(run_dir / "bin" / "health-prolog", "prolog", config, scenario_file, run_dir / "slurm.conf")
    slurm = HealthSlurm(run_dir, settings)
    slurm.start()
    try:
        yield slurm, scenario_file
    finally:
        slurm.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.parametrize("cluster", ["sweep"], indirect=True)
def test_failing_sweep_drains_the_node_with_the_gpucluster_reason(cluster: tuple[HealthSlurm, Path]):
    slurm, scenario_file = cluster
    slurm.wait("idle with a healthy GPU", lambda: slurm.node().get("State", "").startswith("IDLE"), 60)
    assert slurm.node().get("Reason", "") in ("", "(null)")
    scenario_file.write_text(json.dumps(scenario({3: {"remapped_rows": [0, 2, 1, 0]}})))
    slurm.wait("drained by the sweep", lambda: "DRAIN" in slurm.node().get("State", ""), 60)
    info = slurm.node()
    assert info["Reason"].startswith("gpucluster: row_remap gpu3 row remap pending"), info
    log = (slurm.dir / "health.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["action"] == "reboot" and json.loads(log[0])["action"] == "none"


@pytest.mark.parametrize("cluster", ["prolog"], indirect=True)
def test_failing_prolog_requeues_the_job_and_drains_the_node(cluster: tuple[HealthSlurm, Path]):
    slurm, scenario_file = cluster
    slurm.wait("idle", lambda: slurm.node().get("State", "").startswith("IDLE"), 60)
    good = slurm.sbatch("--wrap", "true")
    slurm.wait(f"job {good} done on a healthy node", lambda: slurm.job(good).get("JobState") == "COMPLETED", 60)

    scenario_file.write_text(json.dumps(scenario({4: {"clock_events": 0x80}})))
    job = slurm.sbatch("--wrap", "true")
    slurm.wait("drained by the prolog", lambda: "DRAIN" in slurm.node().get("State", ""), 60)
    assert slurm.node()["Reason"].startswith("gpucluster: clock_events gpu4 HwPowerBrakeSlowdown"), slurm.node()
    slurm.wait(f"job {job} requeued", lambda: int(slurm.job(job).get("Restarts", "0")) >= 1, 60)
    info = slurm.job(job)
    assert info["JobState"] == "PENDING", info  # requeued (and held: SchedulerParameters lacks nohold_on_prolog_fail)


def rendered_health_check(d: Path, config: Path, scenario_file: Path, fault: Path) -> str:
    """The HealthCheckProgram every GPU node gets (the rendered wrapper), its paths pointed at this test's
    node: the package directory (with a fake NVML binding reading the scenario file), this interpreter, the
    boot check's reason file; behind a shim that sets SLURM_CONF, so scontrol reads the local slurm.conf."""
    from gpucluster.render.core import render
    from gpucluster.render.slurm.health import OPT_OUT, wrapper_values
    from tests.agents.health.fakes import agent_lib

    lib = agent_lib(d / "lib", scenario_file)
    text = render(
        "slurm/health-check.sh.j2",
        cluster="health",
        group="p5",
        checks=True,
        log_file=str(d / "health.log"),
        config=str(config),
        interval=3,
        budget=20,
        opt_out=OPT_OUT,
        boot_fault=str(fault),
        **wrapper_values(str(lib), sys.executable, SCONTROL),
    )
    (d / "bin" / "health-check").write_text(text)
    shim = d / "bin" / "health-check-shim"
    shim.write_text(f"#!/bin/sh\nexport SLURM_CONF={d / 'slurm.conf'}\nexec /bin/bash {d / 'bin' / 'health-check'}\n")
    shim.chmod(0o755)
    return str(shim)


def test_a_failed_boot_check_keeps_the_node_drained_from_slurmds_start(run_dir: Path):
    """The boot check (``gpucluster-aws health``, before slurmd) finds a GPU whose link trained at gen 3 and
    leaves its reason; slurmd 22.05 starts and its HealthCheckProgram (the rendered wrapper) drains the node
    with that reason; no job runs on it (the job stays pending); the sweep itself is never run."""
    config, scenario_file = fake_gpu_node(run_dir)
    scenario_file.write_text(json.dumps(scenario({2: {"pcie_gen": 3}})))
    fault = run_dir / "health-boot.reason"
    # the boot check, as the unit runs it: the node package's boot mode, its reason into the file
    boot = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster_agents.health",
            "boot",
            "--config",
            str(config),
            "--json",
            "--fake-nvml",
            str(scenario_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert boot.returncode == 1, boot.stderr
    reason = json.loads(boot.stdout)["reason"]
    assert reason.startswith("gpucluster: pcie_link gpu2 gen3")
    fault.write_text(reason + "\n")
    settings = {
        "HealthCheckProgram": rendered_health_check(run_dir, config, scenario_file, fault),
        "HealthCheckInterval": "3",
        "HealthCheckNodeState": "ANY",
    }
    slurm = HealthSlurm(run_dir, settings)
    slurm.start()
    try:
        slurm.wait("drained by the boot check's reason", lambda: "DRAIN" in slurm.node().get("State", ""), 60)
        assert slurm.node()["Reason"].startswith(reason), slurm.node()  # Slurm adds [user@time]
        job = slurm.sbatch("--wrap", "true")
        time.sleep(4)  # a health check interval and more: the node stays drained, the job waits
        assert slurm.job(job)["JobState"] == "PENDING" and "DRAIN" in slurm.node()["State"]
        log = (run_dir / "health.log").read_text()
        assert "boot check failed: " + reason in log
        assert not (run_dir / "health.jsonl").exists() or all(
            json.loads(line)["mode"] == "boot" for line in (run_dir / "health.jsonl").read_text().splitlines()
        )
    finally:
        slurm.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
