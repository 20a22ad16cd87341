"""The real shipper on each role's rendered config (gpucluster/render/monitoring/logs.py), its paths moved under the
test's tmp dir (the rendered ``/var/log`` prefix swapped for a fixture root), against CloudWatch Logs in
moto_server: every file a login node is told to ship arrives in its own stream, and every stream it makes is one the
login role's policy lets it write and the head's and compute's policies do not (their own files stay theirs)."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpucluster.policy.iam_eval import Request, evaluate
from gpucluster.render.monitoring.logs import COMMON_LOGS, logs_config, stream_patterns
from gpucluster.render.monitoring.policies import log_shipping_policy
from gpucluster_agents.contract.logs import LogFile, logs_to_json
from tests.agents.conftest import AGENT_PYTHON, REPO
from tests.agents.logship.test_logship import GROUP, IID, events
from tests.agents.moto_env import AWS_ENV, REGION, MotoServer

GROUP_ARN = f"arn:aws:logs:{REGION}:123456789012:log-group:{GROUP}"


def ship_once(tmp_path: Path, moto: MotoServer, role: str) -> dict[str, str]:
    """Render ``role``'s config, write one line into a file for each entry (two for a glob), run the program once;
    the streams it should have made, each with its line."""
    root = tmp_path / "log"
    rendered = logs_config("testcl", REGION, role)
    assert rendered.log_root == "/var/log" and rendered.log_group == GROUP
    files = tuple(LogFile(f.name, str(root) + f.path.removeprefix("/var/log")) for f in rendered.files)
    config = dataclasses.replace(
        rendered, files=files, log_root=str(root), state_file=str(tmp_path / "state.json"), endpoint_url=moto.url
    )
    expected: dict[str, str] = {}
    for spec in files:
        names = ("a.log", "b.log") if spec.is_glob else (Path(spec.path).name,)
        for name in names:
            path = Path(spec.path).parent / name
            path.parent.mkdir(parents=True, exist_ok=True)
            line = f"{role} {spec.name} {name}"
            path.write_text(line + "\n")
            expected[f"{spec.name}/{name}" if spec.is_glob else spec.name] = line
    (tmp_path / "logs.json").write_text(logs_to_json(config))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **AWS_ENV}
    cmd = [AGENT_PYTHON, "-m", "gpucluster_agents.logship", "once", "--config", str(tmp_path / "logs.json")]
    proc = subprocess.run([*cmd, "--instance-id", IID], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return expected


def _put(role: str, stream: str) -> bool:
    policy = log_shipping_policy(GROUP_ARN, stream_patterns(role))
    return evaluate([policy], Request("logs:PutLogEvents", f"{GROUP_ARN}:log-stream:{stream}")).allowed


def test_a_login_node_ships_its_logs_into_streams_only_its_role_writes(tmp_path: Path, moto: MotoServer, cw: Any) -> None:
    expected = ship_once(tmp_path, moto, "login")
    assert {"auth", "syslog", "sssd/a.log", "sssd/b.log", "ssm-agent", "cloud-init"} <= set(expected)
    for stream, line in expected.items():
        assert events(cw, stream) == [line], stream
    made = {d["logStreamName"] for d in cw.describe_log_streams(logGroupName=GROUP)["logStreams"]}
    assert made == {f"{IID}/{s}" for s in expected}
    for stream in expected:
        common = stream.split("/")[0] in COMMON_LOGS
        assert _put("login", f"{IID}/{stream}"), stream
        # the login node's own logs are no other role's to write (forged sshd lines from a compute node)
        assert _put("compute", f"{IID}/{stream}") is common and _put("head", f"{IID}/{stream}") is common, stream


@pytest.mark.parametrize("role", ["head", "compute"])
def test_a_login_node_cannot_write_the_head_or_compute_streams(tmp_path: Path, moto: MotoServer, cw: Any, role: str) -> None:
    """The streams the shipper really makes from the head's and compute's rendered configs: the login role may write
    none of them but the common ones (cloud-init and the setup's logs, which every node has)."""
    expected = ship_once(tmp_path, moto, role)
    for stream, line in expected.items():
        assert events(cw, stream) == [line], stream
        own = stream.split("/")[0] not in COMMON_LOGS
        assert _put(role, f"{IID}/{stream}") and _put("login", f"{IID}/{stream}") is not own, stream


@pytest.fixture
def cw(moto: MotoServer, aws_env: None) -> Any:
    import boto3.session

    client = boto3.session.Session(region_name=REGION).client("logs", endpoint_url=moto.url)
    client.create_log_group(logGroupName=GROUP)
    return client
