"""The head node's Slurm reader (gpucluster_agents/metrics/snapshot.py) and the exporter that serves what it read:
run as the units run them (``python -m gpucluster_agents.metrics head-snapshot`` then ``print --head-snapshot``),
against stand-in ``sinfo``/``squeue`` and agent state files (tests/agents/metrics/nodes.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.agents.metrics import nodes
from tests.agents.metrics.test_exporter import parse

SLURM_AND_AGENT = ("gpucluster_slurm_", "gpucluster_agent_")


def _metrics(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gpucluster_agents.metrics", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=nodes.env(), check=False)


def _head_series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    parsed = parse(text)
    return {name: samples for name, samples in parsed.items() if name.startswith(SLURM_AND_AGENT)}


def _ok(text: str) -> dict[str, float]:
    return {lb["collector"]: v for lb, v in parse(text)["gpucluster_metrics_collector_success"]}


def test_m2_the_exporter_serves_what_slurm_read_without_running_slurm_itself(tmp_path: Path) -> None:
    """What the exporter used to read itself as slurm, it now serves from the snapshot: the same series. It never
    runs sinfo or squeue (their argument files stay absent) and reads no agent file."""
    bin_dir, state = nodes.write_slurm(tmp_path / "bin"), nodes.write_agent_state(tmp_path / "state")
    out = tmp_path / "run" / "snapshot.json"
    out.parent.mkdir()
    common = ["--no-gpus", "--sysfs-root", str(tmp_path), "--lustre-root", str(tmp_path)]
    direct = _metrics("print", *common, "--slurm-bin-dir", str(bin_dir), "--agent-state", str(state))
    assert direct.returncode == 0, direct.stderr
    for name in ("sinfo.args", "squeue.args", "sinfo-gres.args"):
        (bin_dir / name).unlink()

    wrote = _metrics("head-snapshot", "--slurm-bin-dir", str(bin_dir), "--agent-state", str(state), "--out", str(out), "--once")
    assert wrote.returncode == 0, wrote.stderr
    assert out.stat().st_mode & 0o777 == 0o644  # the exporter's dynamic user reads it
    assert (bin_dir / "squeue.args").read_text().split() == ["-h", "-a", "-o", "%T|%r"]  # every user's jobs
    for name in ("sinfo.args", "squeue.args", "sinfo-gres.args"):
        (bin_dir / name).unlink()
    for p in state.iterdir():  # the exporter cannot read the agent's files (0600, slurm's on the head node)
        if p.is_file():
            p.unlink()

    served = _metrics("print", *common, "--head-snapshot", str(out))
    assert served.returncode == 0, served.stderr
    assert _head_series(served.stdout) == _head_series(direct.stdout) != {}
    assert _ok(served.stdout) == {"efa": 1, "lustre": 1, "slurm": 1, "agent": 1}
    assert not [n for n in ("sinfo.args", "squeue.args", "sinfo-gres.args") if (bin_dir / n).exists()]


def test_m2_a_stale_or_missing_snapshot_is_a_failed_slurm_collector(tmp_path: Path) -> None:
    """The reader stopped: no Slurm or agent series, and the Slurm collector's failure the alert rules watch."""
    bin_dir, state = nodes.write_slurm(tmp_path / "bin"), nodes.write_agent_state(tmp_path / "state")
    out = tmp_path / "snapshot.json"
    assert (
        _metrics(
            "head-snapshot", "--slurm-bin-dir", str(bin_dir), "--agent-state", str(state), "--out", str(out), "--once"
        ).returncode
        == 0
    )
    common = ["--no-gpus", "--sysfs-root", str(tmp_path), "--lustre-root", str(tmp_path), "--head-snapshot", str(out)]
    assert "gpucluster_slurm_nodes" in _metrics("print", *common).stdout  # fresh: served
    doc = json.loads(out.read_text())
    doc["written"] -= 120
    out.write_text(json.dumps(doc))
    for text in (_metrics("print", *common).stdout, _metrics("print", *common[:-1], str(tmp_path / "none")).stdout):
        assert _head_series(text) == {}
        assert _ok(text) == {"efa": 1, "lustre": 1, "slurm": 0, "agent": 0}
