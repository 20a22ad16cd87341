"""The log shipper's config, parsed strictly (gpucluster_agents/contract/logs.py), its CLI's answer to a bad one, and
the batches cut within PutLogEvents' limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster_agents.contract.logs import LogFile, LogsConfig, LogsConfigError, logs_to_json, parse_logs
from gpucluster_agents.logship import cli
from gpucluster_agents.logship.sink import EVENT_OVERHEAD, MAX_BATCH_BYTES, MAX_BATCH_EVENTS, MAX_SPAN_MS, batches

GOOD = LogsConfig(
    region="us-east-1",
    log_group="/gpucluster/c",
    files=(LogFile("slurmd", "/var/log/slurm/slurmd.log"), LogFile("setup", "/var/log/gpucluster/*.log")),
)


def test_a_config_round_trips() -> None:
    assert parse_logs(logs_to_json(GOOD)) == GOOD
    assert GOOD.files[1].is_glob and not GOOD.files[0].is_glob


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"regoin": "x"}, "regoin: unknown key"),
        ({"region": "mars"}, "region: 'mars' is not valid"),
        ({"files": []}, "files: must be a list of 1..32"),
        ({"files": [{"name": "a", "path": "/etc/shadow"}]}, "files[0].path: '/etc/shadow' is not under log_root"),
        (
            {"files": [{"name": "a", "path": "/var/log/../../etc/shadow"}]},
            "files[0].path: '/var/log/../../etc/shadow' is not a normalised path",
        ),
        ({"files": [{"name": "a", "path": "/var/log/*/x.log"}]}, "files[0].path: '/var/log/*/x.log' has a glob in a directory"),
        ({"files": [{"name": "a:b", "path": "/var/log/x"}]}, "files[0].name: 'a:b' is not valid"),
        ({"files": [{"name": "a", "path": "/var/log/x"}, {"name": "a", "path": "/var/log/y"}]}, "files: name 'a' is used twice"),
        ({"files": [{"name": "a"}]}, "files[0].path: required key is missing"),
        ({"flush_interval_seconds": 0}, "flush_interval_seconds: must be between 1 and 300, got 0"),
        ({"endpoint_url": "file:///x"}, "endpoint_url: 'file:///x' is not valid"),
    ],
)
def test_a_bad_config_is_refused_naming_the_key(change: dict[str, object], error: str) -> None:
    doc = {**GOOD.to_dict(), **change}
    with pytest.raises(LogsConfigError) as exc:
        parse_logs(json.dumps(doc))
    assert any(e.startswith(error) for e in exc.value.errors), exc.value.errors


def test_every_problem_is_reported_at_once_and_the_cli_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "logs.json"
    path.write_text(json.dumps({"log_group": "/g", "files": [{"name": "a", "path": "/tmp/x"}], "extra": 1}))
    assert cli.main(["run", "--config", str(path), "--instance-id", "i-1"]) == 2
    err = capsys.readouterr().err
    for line in ("extra: unknown key", "region: required key is missing", "files[0].path: '/tmp/x' is not under log_root"):
        assert line in err
    path.write_text("{not json")
    assert cli.main(["check", "--config", str(path)]) == 2 and "not JSON" in capsys.readouterr().err
    assert cli.main(["check", "--config", str(tmp_path / "missing.json")]) == 2


def test_batches_keep_within_putlogevents_limits() -> None:
    small = [(1000, "x")] * (MAX_BATCH_EVENTS + 1)
    assert [len(b) for b in batches(small)] == [MAX_BATCH_EVENTS, 1]
    big = "é" * 100_000  # 200,000 bytes in UTF-8: five fit with their overhead, not six
    cut = batches([(1000, big)] * 6)
    assert [len(b) for b in cut] == [5, 1]
    assert all(sum(len(m.encode()) + EVENT_OVERHEAD for _, m in b) <= MAX_BATCH_BYTES for b in cut)
    span = batches([(0, "a"), (MAX_SPAN_MS, "b"), (MAX_SPAN_MS + 1, "c")])
    assert [[m for _, m in b] for b in span] == [["a", "b"], ["c"]]
    assert batches([]) == []
