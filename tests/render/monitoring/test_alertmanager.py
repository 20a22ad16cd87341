"""The AMP Alertmanager definition (checked by the real ``amtool check-config``) and the FSx CloudWatch alarms
(their arguments built into pulumi-aws's own typed Args classes, which refuse a misspelt name)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pulumi_aws as aws
import pytest
import yaml

from gpucluster.render.monitoring.alertmanager import alertmanager_definition
from gpucluster.render.monitoring.cloudwatch_alarms import fsx_alarms, fsx_throughput_capacity_bytes
from tests.conftest import GOLDEN, check_golden, require_tool

ARN = "arn:aws:sns:us-east-1:123456789012:slurm-p5-alerts"


def write_amtool_dir(definition: str, where: Path) -> Path:
    """AMP's two parts as standalone Alertmanager reads them: the config file and its template files beside it."""
    doc = yaml.safe_load(definition)
    assert set(doc) == {"template_files", "alertmanager_config"}
    for name, text in doc["template_files"].items():
        (where / name).write_text(text)
    path = where / "alertmanager.yml"
    path.write_text(doc["alertmanager_config"])
    return path


def test_definition_passes_amtool_and_golden(tmp_path: Path, update_golden: bool) -> None:
    amtool = require_tool("amtool")
    definition = alertmanager_definition(ARN, "us-east-1")
    check_golden(GOLDEN / "monitoring" / "alertmanager.yaml", definition, update_golden)
    path = write_amtool_dir(definition, tmp_path)
    proc = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 templates" in proc.stdout and "1 inhibit rules" in proc.stdout


def test_amtool_refuses_a_broken_template(tmp_path: Path) -> None:
    amtool = require_tool("amtool")
    path = write_amtool_dir(alertmanager_definition(ARN, "us-east-1"), tmp_path)
    (tmp_path / "gpucluster").write_text((tmp_path / "gpucluster").read_text() + '{{ define "x" }}{{ .Foo ')
    proc = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and "unclosed action" in proc.stdout


def test_definition_keeps_to_amps_sns_rules() -> None:
    config = yaml.safe_load(yaml.safe_load(alertmanager_definition(ARN, "eu-west-1"))["alertmanager_config"])
    (receiver,) = config["receivers"]
    (sns,) = receiver["sns_configs"]
    assert sns["topic_arn"] == ARN and sns["sigv4"] == {"region": "eu-west-1"}
    assert "api_url" not in sns and "http_config" not in sns  # AMP refuses both
    assert config["route"]["group_by"] == ["cluster", "alertname"]
    assert all(r["receiver"] == receiver["name"] for r in [config["route"], *config["route"]["routes"]])
    (inhibit,) = config["inhibit_rules"]
    assert inhibit["source_matchers"][0] == 'severity="critical"' and inhibit["target_matchers"][0] == 'severity="warning"'


@pytest.mark.parametrize(
    ("arn", "region", "expected"),
    [
        ("arn:aws:sns:us-east-1:123:x", "us-east-1", "is not an SNS topic ARN"),
        ("arn:aws:sqs:us-east-1:123456789012:x", "us-east-1", "is not an SNS topic ARN"),
        (ARN + "\nroute: {}", "us-east-1", "is not an SNS topic ARN"),
        (ARN, "us-east-1\n", "is not an AWS region name"),
    ],
)
def test_bad_topic_or_region_is_refused(arn: str, region: str, expected: str) -> None:
    with pytest.raises(ValueError) as info:
        alertmanager_definition(arn, region)
    assert expected in str(info.value)


def _typed(kwargs: dict[str, Any]) -> aws.cloudwatch.MetricAlarmArgs:
    queries = [
        aws.cloudwatch.MetricAlarmMetricQueryArgs(
            **{k: v for k, v in q.items() if k != "metric"},
            metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(**q["metric"]) if "metric" in q else None,
        )
        for q in kwargs.get("metric_queries", [])
    ]
    rest = {k: v for k, v in kwargs.items() if k != "metric_queries"}
    return aws.cloudwatch.MetricAlarmArgs(**rest, metric_queries=queries or None)


def test_fsx_alarms_are_metric_alarm_arguments() -> None:
    alarms = fsx_alarms("slurm-p5", "fs-0123456789abcdef0", 4800, 1000)
    assert set(alarms) == {"fsx-throughput", "fsx-capacity"}
    for kwargs in alarms.values():
        _typed(kwargs)  # TypeError on any name pulumi-aws does not have
        assert "Runbook:" in kwargs["alarm_description"]
    # 4800 GiB at 1000 MB/s per TiB: 4687.5 MB/s; the alarm at 80 %
    assert fsx_throughput_capacity_bytes(4800, 1000) == pytest.approx(4687.5e6)
    assert alarms["fsx-throughput"]["threshold"] == round(4687.5e6 * 0.8)
    assert alarms["fsx-capacity"]["threshold"] == round(4800 * 2**30 * 0.2)
    expr = alarms["fsx-throughput"]["metric_queries"][-1]
    assert expr["return_data"] and expr["expression"] == "(r + w) / PERIOD(r)"


def test_fsx_alarms_refuse_nonsense_sizes() -> None:
    with pytest.raises(ValueError, match="must both be positive"):
        fsx_alarms("c", "fs-1", 0, 1000)
