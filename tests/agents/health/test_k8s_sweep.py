"""The Kubernetes sweep's settings (gpucluster_agents.health.k8s_sweep): what the renderer writes is what the
sweep reads, and a bad ``sweep.json`` stops the sweep with every bad key named (exit 2), before it touches a
node. Its rounds against a fake API server: tests/render/kubernetes/test_node_health.py, test_boot_gate.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.render.kubernetes.health import sweep_config, sweep_settings
from gpucluster_agents.contract import sweep as sweep_contract
from gpucluster_agents.contract.health import HealthConfigError
from tests.render.kubernetes.test_node_health import AGENTS_ROOT


def test_the_rendered_settings_read_back_the_same():
    text = sweep_config(600)
    assert sweep_contract.parse(json.loads(text)) == sweep_settings(600)
    assert sweep_contract.to_json(sweep_settings(600)) == text


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"intreval_seconds": 5}, "intreval_seconds: unknown key"),
        ({"interval_seconds": 0}, "interval_seconds: must be between 1 and 86400, got 0"),
        ({"boot_budget_seconds": "300"}, "boot_budget_seconds: must be an integer, got '300'"),
        ({"api": "https://kubernetes.default.svc/evil"}, "api: 'https://kubernetes.default.svc/evil' is not valid"),
        ({"service_account_dir": "relative/sa"}, "service_account_dir: 'relative/sa' is not valid: an absolute path"),
        ({"taint_key": "bad key"}, "taint_key: 'bad key' is not valid"),
        ({"schema_version": 2}, "schema_version: this program reads schema_version 1, got 2"),
        ({"package": None}, "package: must be a non-empty string, got None"),
    ],
)
def test_a_bad_setting_is_named(change, expected):
    data = {**json.loads(sweep_config(300)), **change}
    with pytest.raises(HealthConfigError) as err:
        sweep_contract.parse(data)
    assert expected in str(err.value)


def test_a_missing_setting_is_named():
    data = json.loads(sweep_config(300))
    del data["group_label"], data["condition"]
    with pytest.raises(HealthConfigError) as err:
        sweep_contract.parse(data)
    assert err.value.errors == ["condition: required key is missing", "group_label: required key is missing"]


def _sweep_once(config: Path) -> list[str]:
    """The sweep's main, as the DaemonSet runs it (isolated, from the shipped package), once with ``config``."""
    return [sys.executable, "-I", "-c", sweep_contract.SWEEP_MAIN, AGENTS_ROOT, "--config", str(config), "--once"]


def test_the_sweep_stops_on_bad_settings_before_any_request(tmp_path):
    """Exit 2 with the file and the key on stderr; the API server named in the file is never called (it is a
    closed port here: a request would show as 'could not update node')."""
    data = {**json.loads(sweep_config(300)), "api": "http://127.0.0.1:9", "sweep_budget_seconds": -1}
    (tmp_path / "sweep.json").write_text(json.dumps(data))
    argv = _sweep_once(tmp_path / "sweep.json")
    done = subprocess.run(argv, env={"NODE_NAME": "n"}, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert f"{tmp_path / 'sweep.json'}: sweep_budget_seconds: must be between 1 and 86400, got -1" in done.stderr
    assert "could not update node" not in done.stderr


def test_the_sweep_needs_its_node_name(tmp_path):
    (tmp_path / "sweep.json").write_text(sweep_config(300))
    argv = _sweep_once(tmp_path / "sweep.json")
    done = subprocess.run(argv, env={}, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "NODE_NAME is not set" in done.stderr
