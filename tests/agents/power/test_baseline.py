"""Re-baselining a new image (``gpucluster_agents/power/baseline.py``) in the maintenance pass, against moto (S3 for
the figures, EC2 behind the fault proxy), the fake scontrol (reservations, the job's AdminComment) and a fake
sbatch: the deep job's figures come from the real health program's ``deep`` mode judging fake NVML scenarios,
handed over by the real job driver (``health/baseline_job.py``) through a stand-in srun. A degraded image stops
the roll; a good one records its figures and becomes the baseline the next image is compared with."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from gpucluster_agents.contract import hostlist
from gpucluster_agents.contract.baseline import Baseline, Store
from gpucluster_agents.contract.health import ModeConfig
from gpucluster_agents.health import baseline_job
from gpucluster_agents.health.fake_nvml import FakeNvml
from gpucluster_agents.health.run import run as health_run
from gpucluster_agents.power.baseline import status_lines as baseline_status
from gpucluster_agents.power.baselines import baseline_verdict, group_figures
from gpucluster_agents.power.roll import REASON
from gpucluster_agents.power.roll import status_lines as roll_status
from tests.agents.conftest import HERE, Harness
from tests.agents.health.fakes import p5_config, scenario
from tests.agents.moto_env import AMI_ID, REGION, ec2_client

BUCKET = "testcl-artifacts"
THRESHOLDS = {"gemm_tflops": 5.0, "hbm_copy_gbps": 5.0, "nccl_busbw_gbps": 10.0}


# ---------------------------------------------------------------------------- the comparison
@pytest.mark.parametrize(
    ("new", "ok", "why"),
    [
        ({"gemm_tflops": 740.0, "hbm_copy_gbps": 2990.0, "nccl_busbw_gbps": 350.0}, True, "within thresholds: gemm_tflops 740"),
        ({"gemm_tflops": 700.0, "hbm_copy_gbps": 3000.0, "nccl_busbw_gbps": 360.0}, False, "gemm_tflops 700 is 7.9 % below 760"),
        (
            {"gemm_tflops": 760.0, "hbm_copy_gbps": 3000.0, "nccl_busbw_gbps": 330.0},
            False,
            "nccl_busbw_gbps 330 is 13.2 % below 380",
        ),
        ({"gemm_tflops": 760.0, "nccl_busbw_gbps": 380.0}, False, "hbm_copy_gbps not measured on the new image"),
    ],
)
def test_a_drop_past_its_threshold_or_a_figure_no_longer_measured_fails_the_image(
    new: dict[str, float], ok: bool, why: str
) -> None:
    previous = {"gemm_tflops": 760.0, "hbm_copy_gbps": 3015.0, "nccl_busbw_gbps": 380.0}
    verdict = baseline_verdict(new, previous, THRESHOLDS)
    assert verdict.ok is ok and why in verdict.why, verdict.why


def test_the_first_image_of_a_group_passes_and_a_faster_one_never_regresses() -> None:
    assert baseline_verdict({"gemm_tflops": 1.0}, None, THRESHOLDS).ok
    assert not baseline_verdict({}, None, THRESHOLDS).ok  # nothing measured never becomes the reference
    assert baseline_verdict(
        {"gemm_tflops": 900.0, "hbm_copy_gbps": 3300.0}, {"gemm_tflops": 760.0, "hbm_copy_gbps": 3015.0}, THRESHOLDS
    ).ok
    # a metric the previous image did not measure (no nccl-tests then) is not required now
    assert baseline_verdict({"gemm_tflops": 760.0}, {"gemm_tflops": 760.0}, THRESHOLDS).ok


def test_group_figures_are_medians_over_every_gpu_of_every_node() -> None:
    per_node = {
        "p5-1": {"gemm_tflops": {f"gpu{i}": 760.0 for i in range(8)}, "nccl_busbw_gbps": 380.0},
        "p5-2": {"gemm_tflops": {**{f"gpu{i}": 750.0 for i in range(7)}, "gpu7": 100.0}, "nccl_busbw_gbps": 360.0},
    }
    assert group_figures(per_node) == {"gemm_tflops": 755.0, "nccl_busbw_gbps": 370.0}  # one slow GPU moves nothing
    junk = {"p5-1": {"gemm_tflops": {"gpu0": "fast", "gpu1": 760.0}, "hbm_copy_gbps": [1], "nccl_busbw_gbps": True}}
    assert group_figures(junk) == {"gemm_tflops": 760.0}  # what is not a number is left out


# What Slurm 22.05's `scontrol -o show job` printed for a pending job in the reservation after
# `scontrol update jobid=1 admincomment=<what the job driver writes>` (recorded by hand against the real slurmctld).
SHOW_JOB_22_05 = (
    "JobId=1 JobName=gpucluster-baseline-p5 UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 "
    "Account=(null) QOS=(null) JobState=PENDING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 "
    "Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=02:00:00 TimeMin=N/A ReqNodeList=p5-[1-2] NumNodes=2-2 "
    "Reservation=gpucluster-baseline-p5 OverSubscribe=NO Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/ AdminComment=gpucluster-baseline:eyJwNS0xIjp7ImFjdGlvbiI6Im5vbmUiLCJnZW1tX3RmbG9wcyI6eyJncHUwIjo3NjAuMH19fQ==  "
    "StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= "
)


def test_the_job_state_and_figures_are_read_from_slurms_own_output() -> None:
    from gpucluster_agents.power.baseline import job_fields

    fields = job_fields(SHOW_JOB_22_05)
    assert fields["JobState"] == "PENDING"
    assert baseline_job.decode(fields["AdminComment"]) == {"p5-1": {"action": "none", "gemm_tflops": {"gpu0": 760.0}}}
    assert baseline_job.decode("gpucluster-baseline:not base64!") is None and baseline_job.decode("a comment") is None
    assert "AdminComment" not in job_fields(SHOW_JOB_22_05.replace(fields["AdminComment"], "").replace("AdminComment=", ""))


# ---------------------------------------------------------------------------- the pass, against moto
_S3: dict[str, Any] = {}


def s3(url: str) -> Any:
    """The test's own S3 client for moto (cached: making one loads S3's large service model)."""
    if url not in _S3:
        session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
        _S3[url] = session.client("s3", endpoint_url=url)
    return _S3[url]


def stored(h: Harness, key: str) -> dict[str, Any]:
    return json.loads(s3(h.moto.url).get_object(Bucket=BUCKET, Key=f"baselines/{key}")["Body"].read())


@pytest.fixture
def rebaselining(harness: Harness) -> Harness:
    h = harness
    s3(h.moto.url).create_bucket(Bucket=BUCKET)
    h.config["updates"] = {
        "max_drained_percent": 25,  # 4 of p5's 16 nodes
        "baseline": {"bucket": BUCKET, "endpoint_url": h.moto.url, "nodes": 2, "groups": ["p5"]},
    }
    for g in h.config["node_groups"]:
        g["launch_template_version"] = "$Default"
    for program in ("sbatch", "scancel"):
        script = h.slurm.bin_dir / program
        script.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" -S "{HERE / "fake_sbatch.py"}" "{h.slurm.state_path}" {program} "$@"\n'
        )
        script.chmod(0o755)
    return h


def new_image(h: Harness) -> str:
    """A new image in a new launch template version, made the default (what ``pulumi up`` does)."""
    ec2 = ec2_client(h.moto.url)
    ami = ec2.copy_image(SourceImageId=AMI_ID, SourceRegion=REGION, Name=f"gpucluster-next-{os.urandom(3).hex()}")["ImageId"]
    lt = h.world.launch_templates["p5"]
    v = ec2.create_launch_template_version(LaunchTemplateId=lt, LaunchTemplateData={"ImageId": ami})["LaunchTemplateVersion"]
    ec2.modify_launch_template(LaunchTemplateId=lt, DefaultVersion=str(v["VersionNumber"]))
    return ami


def run_deep_job(h: Harness, monkeypatch: pytest.MonkeyPatch, gemm: float, hbm: float, busbw: float) -> str:
    """What the submitted job does: the health program's deep mode on each of its nodes (fake NVML scenario with
    these bench figures, a stand-in all_reduce_perf printing ``busbw``), through the job driver, whose srun is
    a stand-in printing those verdicts and whose scontrol is the fake one. Returns the job id."""
    data = h.slurm.data()
    job = next(j for j, v in data["jobs"].items() if v["state"] == "PENDING")
    tools = h.tmp / f"job-{job}"
    tools.mkdir()
    (tools / "all_reduce_perf").write_text(f"#!/bin/sh\necho '# Avg bus bandwidth    : {busbw} '\n")
    (tools / "all_reduce_perf").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    lines = []
    for node in hostlist.expand(data["jobs"][job]["nodes"]):
        cfg = p5_config(tools).with_modes(deep=ModeConfig(("driver", "gpu_count", "hbm_copy", "gemm", "nccl_pair"), 600))
        nvml = FakeNvml(scenario(bench={"hbm_copy_gbps": hbm, "gemm_tflops": gemm}))
        lines.append(health_run(cfg, "deep", node, binding=nvml).to_json())
    (tools / "verdicts").write_text("\n".join(lines) + "\n")
    (tools / "srun").write_text(f'#!/bin/sh\necho "$@" > {tools}/srun.args\ncat {tools}/verdicts\nexit 1\n')
    (tools / "srun").chmod(0o755)
    (tools / "scontrol").symlink_to(h.slurm.bin_dir / "scontrol")
    monkeypatch.setenv("SLURM_JOB_ID", job)
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", str(len(lines)))
    assert baseline_job.main(["/opt/gpucluster/lib", str(tools)]) == 0
    srun = (tools / "srun.args").read_text().split()
    assert srun[:3] == ["--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=0"] and srun[-3:] == [
        "/opt/gpucluster/lib",
        "deep",
        "--json",
    ]
    data = h.slurm.data()
    data["jobs"][job]["state"] = "COMPLETED"
    h.slurm.state_path.write_text(json.dumps(data))
    return job


def drained(h: Harness) -> list[str]:
    return sorted(n for n, s in h.slurm.data()["nodes"].items() if s["reason"] == REASON and "DRAIN" in s["state"])


def reservation_calls(h: Harness) -> list[list[str]]:
    return [c for c in h.slurm.calls() if c[:2] == ["create", "reservation"]]


def test_a_degraded_image_stops_the_roll_and_a_good_one_becomes_the_baseline(
    rebaselining: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = rebaselining
    assert h.slurm_resume("p5-[1-8]") == 0
    h.slurm.set("p5-[1-8]", "IDLE+CLOUD")
    user = "slurm"  # the agent runs as SlurmUser on a head node; the test's own user is not read
    monkeypatch.setattr("gpucluster_agents.power.baseline.agent_user", lambda: user)

    # the image the group runs today was measured earlier (what an earlier pass stored: see the pass below)
    first = {"group": "p5", "image_id": AMI_ID, "time": "2026-11-25T03:00:00Z", "nodes": {}, "previous": None,
             "figures": {"gemm_tflops": 760.0, "hbm_copy_gbps": 3015.0, "nccl_busbw_gbps": 380.0},
             "verdict": baseline_verdict({"gemm_tflops": 760.0}, None, THRESHOLDS).to_dict()}  # fmt: skip
    Store(Baseline(bucket=BUCKET), s3(h.moto.url)).record("p5", AMI_ID, first)
    assert h.run("maintain") == 0
    assert reservation_calls(h) == [] and drained(h) == []  # nothing to measure, nothing to roll

    # a degraded image: its first two nodes (powered down: they boot it) are measured before any old node drains
    bad = new_image(h)
    assert h.run("maintain") == 0
    assert reservation_calls(h) == [
        ["create", "reservation", "ReservationName=gpucluster-baseline-p5", "Flags=MAINT,IGNORE_JOBS", "Nodes=p5-[9-10]",
         "StartTime=now", "Duration=120", f"Users={user}"]
    ]  # fmt: skip
    sbatch = next(c for c in h.slurm.calls() if c[0] == "sbatch")
    assert {"--reservation=gpucluster-baseline-p5", "--nodelist=p5-[9-10]", "--nodes=2", "--exclusive", "--time=120"} <= set(
        sbatch
    )
    assert drained(h) == []  # the roll waits for the new image's figures
    assert h.slurm_resume("p5-[9-10]") == 0  # slurmctld powers the reserved nodes up for the job: the new image
    run_deep_job(h, monkeypatch, gemm=700.0, hbm=3010.0, busbw=381.0)  # above the node check's floor (673), 7.9 % slower
    assert h.run("maintain") == 0
    log = h.log_text()
    assert f"decision baseline-fail group=p5 image={bad}: gemm_tflops 700 is 7.9 % below 760 (allowed 5 %)" in log
    assert f"decision roll-stop group=p5: re-baseline of {bad} failed: gemm_tflops 700" in log
    result = stored(h, f"p5/{bad}.json")
    assert not result["verdict"]["ok"] and result["previous"]["image_id"] == AMI_ID
    assert stored(h, "p5/index.json")["baseline"] == AMI_ID  # the failed image never becomes the baseline
    assert drained(h) == [] and h.slurm.data()["reservations"] == {}
    out = "\n".join(roll_status(str(h.tmp / "state")) + baseline_status(str(h.tmp / "state")))  # what `status` prints
    assert f"STOPPED: re-baseline of {bad} failed" in out and f"baseline group p5: image {bad} FAILED" in out, out

    # a good image: compared with the last good one (not the failed one), it passes, becomes the baseline, the roll goes on
    good = new_image(h)
    assert h.run("maintain") == 0
    assert reservation_calls(h)[-1][4] == "Nodes=p5-[11-12]" and drained(h) == []
    run_deep_job(h, monkeypatch, gemm=758.0, hbm=3020.0, busbw=379.0)
    assert h.run("maintain") == 0
    assert f"decision baseline-pass group=p5 image={good}: within thresholds" in h.log_text()
    result = stored(h, f"p5/{good}.json")
    assert result["verdict"]["ok"] and result["previous"] == {"image_id": AMI_ID, "figures": first["figures"]}
    index = stored(h, "p5/index.json")
    assert index["baseline"] == good and [i["image_id"] for i in index["images"]] == [AMI_ID, bad, good]
    assert len(drained(h)) == 4  # the share (25 % of 16): the roll proceeds


class MemoryS3:
    """The two S3 calls the store makes, in memory (the pass's failure paths need no moto)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        if Key not in self.objects:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "no"}}, "GetObject")
        return {"Body": io.BytesIO(self.objects[Key])}

    def put_object(self, Bucket: str, Key: str, Body: bytes, ContentType: str) -> None:
        self.objects[Key] = Body


@pytest.mark.parametrize(
    ("job_state", "minutes", "why"),
    [
        ("NODE_FAIL", 5, "the deep job 1000 ended NODE_FAIL without figures"),
        ("RUNNING", 5, None),  # still running: wait
        ("RUNNING", 131, "the deep job 1000 did not report in 120 min"),  # past the reservation (+10 min): fail
        (None, 5, "the deep job 1000 ended and vanished without figures"),  # aged out of slurmctld
    ],
)
def test_a_deep_job_without_figures_fails_the_image(tmp_path: Path, job_state: str | None, minutes: int, why: str | None) -> None:
    from gpucluster_agents.contract import parse
    from gpucluster_agents.power.baseline import Rebaseline
    from gpucluster_agents.power.ec2 import Instance
    from gpucluster_agents.power.slurm import Slurm
    from tests.agents.conftest import FakeSlurm

    fake = FakeSlurm(tmp_path / "slurm", ["p5-1", "p5-2"])
    fake.set("p5-[1-2]", "IDLE+CLOUD")
    for program in ("sbatch", "scancel"):
        script = fake.bin_dir / program
        script.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" -S "{HERE / "fake_sbatch.py"}" "{fake.state_path}" {program} "$@"\n'
        )
        script.chmod(0o755)
    group = {"name": "p5", "max_nodes": 2, "instance_type": "p5.48xlarge", "launch_template_id": "lt-0123456789abcdef0",
             "subnet_ids": ["subnet-0123456789abcdef0"]}  # fmt: skip
    cfg = parse({"cluster_name": "c", "region": REGION, "log_file": str(tmp_path / "log"), "slurm_bin_dir": str(fake.bin_dir),
                 "node_groups": [group], "updates": {"baseline": {"bucket": BUCKET}}})  # fmt: skip
    assert cfg.updates.baseline is not None
    s3 = MemoryS3()
    rb = Rebaseline(cfg, cfg.updates.baseline, Slurm(cfg.scontrol), str(tmp_path), Store(cfg.updates.baseline, s3))
    at = __import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").timezone.utc)
    live = {n: Instance(f"i-{i}", "running", at, None, "p5.48xlarge", {}, AMI_ID) for i, n in enumerate(("p5-1", "p5-2"))}
    g, nodes = cfg.node_groups[0], ["p5-1", "p5-2"]
    states = Slurm(cfg.scontrol).show_nodes()
    assert states is not None
    assert rb.step(g, AMI_ID, nodes, live, 0, states, 1000.0).status == "wait"
    assert fake.data()["reservations"]["gpucluster-baseline-p5"]["Nodes"] == "p5-[1-2]"
    data = fake.data()
    if job_state is None:
        del data["jobs"]["1000"]
    else:
        data["jobs"]["1000"]["state"] = job_state
    fake.state_path.write_text(json.dumps(data))
    for _ in range(3 if job_state is None else 1):  # no answer about a job: three passes before it counts as gone
        rb = Rebaseline(cfg, cfg.updates.baseline, Slurm(cfg.scontrol), str(tmp_path), Store(cfg.updates.baseline, s3))
        assert not s3.objects
        gate = rb.step(g, AMI_ID, nodes, live, 0, states, 1000.0 + 60 * minutes)
    if why is None:
        assert gate.status == "wait" and s3.objects == {} and fake.data()["reservations"]
        return
    assert gate.status == "failed" and why in gate.why
    assert why in json.loads(s3.objects[f"baselines/p5/{AMI_ID}.json"])["verdict"]["why"]
    assert fake.data()["reservations"] == {}  # deleted


def test_a_config_without_a_bucket_or_with_a_bad_threshold_names_the_key() -> None:
    from gpucluster_agents.contract import ConfigError, parse

    group = {"name": "p5", "max_nodes": 2, "instance_type": "p5.48xlarge", "launch_template_id": "lt-0123456789abcdef0",
             "subnet_ids": ["subnet-0123456789abcdef0"]}  # fmt: skip
    doc: dict[str, Any] = {"cluster_name": "c", "region": REGION, "log_file": "/tmp/x.log", "node_groups": [group]}
    for baseline, message in (
        ({}, "updates.baseline.bucket: required key is missing"),
        ({"bucket": BUCKET, "thresholds": {"gemm_tflops": 150}}, "updates.baseline.thresholds.gemm_tflops: must be a percent"),
        ({"bucket": BUCKET, "thresholds": {"tflops": 5}}, "updates.baseline.thresholds.tflops: unknown metric"),
    ):
        with pytest.raises(ConfigError) as err:
            parse({**doc, "updates": {"baseline": baseline}})
        assert any(e.startswith(message) for e in err.value.errors), err.value.errors
    cfg = parse({**doc, "updates": {"baseline": {"bucket": BUCKET, "thresholds": {"gemm_tflops": 3}}}})
    assert cfg.updates.baseline is not None and dict(cfg.updates.baseline.thresholds)["gemm_tflops"] == 3.0
    from gpucluster_agents.contract import to_dict

    assert parse(json.loads(json.dumps(to_dict(cfg)))) == cfg  # the renderer's document reads back equal
