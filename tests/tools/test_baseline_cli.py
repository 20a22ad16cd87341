"""``gpucluster baseline --stack X`` against moto's S3 on 127.0.0.1: it finds the cluster's artifact bucket by name
and tag, prints per group each image's figures, the baseline and the verdicts the agent stored; without
credentials it says what to set, in one line, exit 1."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import boto3
import pytest

from gpucluster.tools.cli import main
from gpucluster_agents.contract.baseline import Baseline, Store
from gpucluster_agents.power.baselines import baseline_verdict

CLUSTER = "slurm-p5"  # the stack's cluster name (its stack name)
A, B = "ami-0a1b2c3d4e5f60718", "ami-0feedfacecafe0001"


def result(image: str, figures: dict[str, float], previous: dict[str, float] | None, prev_id: str | None) -> dict[str, Any]:
    verdict = baseline_verdict(figures, previous, {"gemm_tflops": 5.0, "hbm_copy_gbps": 5.0, "nccl_busbw_gbps": 10.0})
    return {"group": "p5", "image_id": image, "time": "2026-11-26T03:00:00Z", "nodes": {}, "figures": figures,
            "previous": {"image_id": prev_id, "figures": previous} if previous else None, "verdict": verdict.to_dict()}  # fmt: skip


@pytest.fixture
def seeded(moto_endpoint: str, aws_env: None) -> str:
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    s3 = boto3.session.Session(region_name="us-east-1").client("s3", endpoint_url=moto_endpoint)
    for name, tag in (("slurm-p5-slurm-0a1b2c", "slurm-p5-slurm-artifacts"), ("slurm-p5-slurm-logs9", "something else")):
        s3.create_bucket(Bucket=name)
        s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": "Name", "Value": tag}]})
    store = Store(Baseline(bucket="slurm-p5-slurm-0a1b2c"), s3)
    good = {"gemm_tflops": 760.0, "hbm_copy_gbps": 3015.0, "nccl_busbw_gbps": 380.0}
    store.record("p5", A, result(A, good, None, None))
    store.record("p5", B, result(B, {**good, "gemm_tflops": 700.0}, good, A))
    return moto_endpoint


def test_the_figures_the_baseline_and_the_verdicts_per_group(seeded: str, capsys: Any) -> None:
    assert main(["baseline", "--stack", CLUSTER, "--endpoint-url", seeded]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [
        "gpucluster baseline - stack slurm-p5 (bucket slurm-p5-slurm-0a1b2c)",
        f"group p5: baseline {A}",
    ]
    assert f"  {A}  2026-11-26T03:00:00Z  passed (baseline)  GEMM TFLOP/s 760, HBM GB/s 3015, busbw GB/s 380" in out
    assert f"  {B}  2026-11-26T03:00:00Z  FAILED  GEMM TFLOP/s 700, HBM GB/s 3015, busbw GB/s 380" in out
    assert f"vs {A}: gemm_tflops 700 is 7.9 % below 760 (allowed 5 %)" in out


def test_without_credentials_one_line_says_what_to_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: Any) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(key, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["baseline", "--stack", CLUSTER, "--endpoint-url", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpucluster baseline: no AWS credentials") and "AWS_PROFILE" in err and "Traceback" not in err


def test_json_and_a_bucket_that_is_not_there(seeded: str, capsys: Any) -> None:
    assert main(["baseline", "--stack", CLUSTER, "--endpoint-url", seeded, "--bucket", "slurm-p5-slurm-0a1b2c", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["groups"][0]["baseline"] == A and doc["groups"][0]["results"][B]["verdict"]["ok"] is False
    assert main(["baseline", "--stack", "dev", "--endpoint-url", seeded]) == 1
    assert "no artifact bucket of cluster 'dev'" in capsys.readouterr().err
