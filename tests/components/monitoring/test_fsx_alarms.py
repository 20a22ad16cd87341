"""The FSx for Lustre alarms the docs and the storage dashboard name exist in the plan, on the alert topic."""

from __future__ import annotations

import json

import pytest

from gpucluster.render.monitoring.cloudwatch_alarms import GIB, fsx_throughput_capacity_bytes
from gpucluster.tools.plan.run.json import to_json
from tests.plans import shipped_plan

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"


@pytest.fixture(scope="module")
def plan() -> dict:
    return to_json(shipped_plan("slurm-p5"))


def test_the_lustre_file_system_has_its_two_alarms_on_the_alert_topic(plan):
    alarms = {r["inputs"]["name"]: r["inputs"] for r in plan["resources"] if r["type"] == ALARM}
    assert set(alarms) == {"slurm-p5-fsx-throughput-near-tier", "slurm-p5-fsx-capacity-near-full"}
    (topic,) = [r for r in plan["resources"] if r["type"] == "aws:sns/topic:Topic"]
    (fs,) = [r for r in plan["resources"] if r["type"] == "aws:fsx/lustreFileSystem:LustreFileSystem"]
    capacity, tier = fs["inputs"]["storageCapacity"], fs["inputs"]["perUnitStorageThroughput"]
    for alarm in alarms.values():  # the topic's id is its ARN
        assert (
            alarm["alarmActions"] == alarm["okActions"] == [topic["id"]] == ["arn:aws:sns:us-east-1:123456789012:slurm-p5-alerts"]
        )
    throughput = alarms["slurm-p5-fsx-throughput-near-tier"]
    assert throughput["threshold"] == round(fsx_throughput_capacity_bytes(capacity, tier) * 0.8)
    assert {q["id"] for q in throughput["metricQueries"]} == {"r", "w", "throughput"}
    assert all(q["metric"]["dimensions"] == {"FileSystemId": fs["id"]} for q in throughput["metricQueries"] if "metric" in q)
    full = alarms["slurm-p5-fsx-capacity-near-full"]
    assert full["threshold"] == round(capacity * GIB * 0.2)
    assert (full["metricName"], full["statistic"], full["period"], full["dimensions"]) == (
        "FreeDataStorageCapacity",
        "Sum",
        60,
        {"FileSystemId": fs["id"]},
    )
    assert json.dumps(full).count("Runbook:") == 1
