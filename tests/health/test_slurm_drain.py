"""What real Slurm (Debian's 22.05) does with the health program: HealthCheckProgram running ``sweep``
on a node whose GPU goes bad drains the node with the ``gpucluster:`` reason (Slurm itself ignores the
program's exit status); a Prolog running ``prolog`` that finds a fault requeues the job and leaves the
node drained with the program's reason. The GPU readings come from the fake NVML scenario file the
wrappers name; turning the node bad is rewriting that file."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster_agents.health.config import to_json
from tests.conftest import IN_CI
from tests.health.fakes import node, p5_config, scenario
from tests.health.slurm_local import SCONTROL, SLURMCTLD, SLURMD, LocalSlurm, wrapper

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def slurm_here() -> None:
    for tool in (SLURMCTLD, SLURMD, SCONTROL):
        if not shutil.which(tool):
            if IN_CI:
                pytest.fail(f"{tool} is missing (CI installs Slurm 22.05)")
            pytest.skip(f"{tool} not installed")


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="gchealth-", dir="/tmp"))  # short: slurmd's socket path limit


def fake_gpu_node(d: Path) -> tuple[Path, Path]:
    (d / "bin").mkdir(exist_ok=True)
    scenario_file = node(d, scenario())
    cfg = p5_config(d, slurm_bin_dir="/usr/bin")
    config = d / "health.json"
    config.write_text(to_json(cfg))
    return config, scenario_file


@pytest.fixture
def cluster(run_dir: Path, request: pytest.FixtureRequest) -> Iterator[tuple[LocalSlurm, Path]]:
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
    slurm = LocalSlurm(run_dir, settings)
    slurm.start()
    try:
        yield slurm, scenario_file
    finally:
        slurm.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.parametrize("cluster", ["sweep"], indirect=True)
def test_failing_sweep_drains_the_node_with_the_gpucluster_reason(cluster: tuple[LocalSlurm, Path]):
    slurm, scenario_file = cluster
    slurm.wait(lambda: slurm.node().get("State", "").startswith("IDLE"), 60, "idle with a healthy GPU")
    assert slurm.node().get("Reason", "") in ("", "(null)")
    scenario_file.write_text(json.dumps(scenario({3: {"remapped_rows": [0, 2, 1, 0]}})))
    slurm.wait(lambda: "DRAIN" in slurm.node().get("State", ""), 60, "drained by the sweep")
    info = slurm.node()
    assert info["Reason"].startswith("gpucluster: row_remap gpu3 row remap pending"), info
    log = (slurm.dir / "health.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["action"] == "reboot" and json.loads(log[0])["action"] == "none"


@pytest.mark.parametrize("cluster", ["prolog"], indirect=True)
def test_failing_prolog_requeues_the_job_and_drains_the_node(cluster: tuple[LocalSlurm, Path]):
    slurm, scenario_file = cluster
    slurm.wait(lambda: slurm.node().get("State", "").startswith("IDLE"), 60, "idle")
    good = slurm.sbatch("--wrap", "true")
    slurm.wait(lambda: slurm.job(good).get("JobState") == "COMPLETED", 60, f"job {good} done on a healthy node")

    scenario_file.write_text(json.dumps(scenario({4: {"clock_events": 0x80}})))
    job = slurm.sbatch("--wrap", "true")
    slurm.wait(lambda: "DRAIN" in slurm.node().get("State", ""), 60, "drained by the prolog")
    assert slurm.node()["Reason"].startswith("gpucluster: clock_events gpu4 HwPowerBrakeSlowdown"), slurm.node()
    slurm.wait(lambda: int(slurm.job(job).get("Restarts", "0")) >= 1, 60, f"job {job} requeued")
    info = slurm.job(job)
    assert info["JobState"] == "PENDING", info  # requeued (and held: SchedulerParameters lacks nohold_on_prolog_fail)
