"""``gpucluster-agent usage``: sacct's records parsed defensively, clipped to the window, priced per partition,
printed and uploaded (moto S3 on 127.0.0.1). The real sacct against a real slurmdbd: tests/e2e/test_teams_jobs_e2e.py."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

import boto3
import pytest

from gpucluster_agents import cli as agent_cli
from gpucluster_agents.usage import cli, policy, report, sacct
from tests.agents.moto_env import REGION, MotoServer

D = sacct.DELIMITER
NOW = dt.datetime(2026, 11, 26, 12, 0, 0)
CONTRACT = {
    "schema": 1,
    "cluster": "slurm-p5",
    "qos": [],
    "accounts": [],
    "gpu_prices": [
        {"partition": "p5", "gpus_per_node": 8, "usd_per_gpu_hour": 12.0},
        {"partition": "g6e", "gpus_per_node": 4, "usd_per_gpu_hour": 2.5},
    ],
    "usage": {"bucket": "cluster-data", "prefix": "usage/"},
}


def line(*fields: str) -> str:
    return D.join(fields)


TRES8 = "billing=8,cpu=96,gres/gpu=8,gres/gpu:h100=8,mem=1048576M,node=1"
SACCT_OUT = "\n".join(
    [
        # inside the window: 8 GPUs x 1 h in p5
        line("101", "alice", "research", "p5", TRES8, "3600", "2026-11-25T10:00:00", "2026-11-25T11:00:00", "COMPLETED"),
        # a requeued job's first run (-D) and its second: both used GPUs
        line("102", "carol", "applied", "p5", TRES8, "1800", "2026-11-25T12:00:00", "2026-11-25T12:30:00", "REQUEUED"),
        line("102", "carol", "applied", "p5", TRES8, "600", "2026-11-25T13:00:00", "2026-11-25T13:10:00", "CANCELLED by 0"),
        # started 2 h before the window: only its hour inside counts
        line(
            "103",
            "bob",
            "research",
            "g6e",
            "cpu=4,gres/gpu:l40s=2,node=1",
            "10800",
            "2026-11-24T22:00:00",
            "2026-11-25T01:00:00",
            "COMPLETED",
        ),
        # still running at NOW: counts until NOW only
        line("104", "alice", "research", "p5", "cpu=8,gres/gpu=1,node=1", "3600", "2026-11-26T11:00:00", "Unknown", "RUNNING"),
        # never started: nothing used, not a problem
        line("105", "bob", "research", "p5", "", "0", "Unknown", "Unknown", "PENDING"),
        # CPU only: no GPU-hours
        line(
            "106",
            "bob",
            "research",
            "cpu",
            "cpu=2,mem=100M,node=1",
            "7200",
            "2026-11-25T02:00:00",
            "2026-11-25T04:00:00",
            "COMPLETED",
        ),
        # a partition without a price
        line("107", "dave", "applied", "spare", "gres/gpu=2", "360", "2026-11-25T05:00:00", "2026-11-25T05:06:00", "COMPLETED"),
        # hostile: a field holding the delimiter, a name with a terminal escape
        line("108", "eve", "x", "p5", TRES8, "1", "2026-11-25T05:00:00", "2026-11-25T05:00:01", "COMPLETED", "extra"),
        line(
            "109",
            "m\x1b[2Jallory",
            "applied",
            "p5",
            "gres/gpu=1",
            "36",
            "2026-11-25T06:00:00",
            "2026-11-25T06:00:36",
            "COMPLETED",
        ),
        line("110", "eve", "x", "p5", TRES8, "soon", "2026-11-25T05:00:00", "2026-11-25T05:00:01", "COMPLETED"),
    ]
)
WINDOW = report.Window(dt.datetime(2026, 11, 25), NOW)


def test_records_parse_every_started_run_and_skip_what_cannot_be_read() -> None:
    records = sacct.parse_records(SACCT_OUT + "\n")
    assert [r.job_id for r in records.runs] == ["101", "102", "102", "103", "104", "106", "107", "109"]
    assert [r.gpus for r in records.runs] == [8, 8, 8, 2, 1, 0, 2, 1]
    running = records.runs[4]
    assert running.end is None and running.start == dt.datetime(2026, 11, 26, 11)
    assert records.runs[2].state == "CANCELLED"
    assert records.skipped == (
        "line 9: 10 fields, expected 9",
        "line 11: job '110': ElapsedRaw 'soon' is not a number of seconds",
    )


def test_gpu_count_prefers_the_total_and_adds_typed_counts_without_it() -> None:
    assert sacct.gpu_count("gres/gpu=4,gres/gpu:h100=4") == 4
    assert sacct.gpu_count("gres/gpu:h100=2,gres/gpu:a100=3,cpu=8") == 5
    assert sacct.gpu_count("cpu=8,mem=10G") == 0
    assert sacct.gpu_count("gres/gpu=,gres/gpu=x") == 0


def test_the_figures_count_the_gpu_seconds_inside_the_window_at_the_partition_price() -> None:
    records = sacct.parse_records(SACCT_OUT)
    usage = report.tally("slurm-p5", records.runs, WINDOW, {"p5": 12.0, "g6e": 2.5}, NOW, records.skipped)
    out = report.as_json(usage)
    teams = {t["account"]: t for t in out["teams"]}
    # research: 101 8x3600 + 103 2x3600 (the hour inside) + 104 1x3600 (until NOW)
    assert teams["research"]["gpu_seconds"] == 8 * 3600 + 2 * 3600 + 3600
    assert teams["research"]["usd"] == round(8 * 12.0 + 2 * 2.5 + 12.0, 2)
    assert teams["research"]["jobs"] == 3  # 106 ran no GPU
    # applied: 102 both runs 8x(1800+600), 107 2x360 unpriced, 109 1x36
    assert teams["applied"]["gpu_seconds"] == 8 * 2400 + 720 + 36
    assert teams["applied"]["jobs"] == 3  # 102 requeued is one job
    assert teams["applied"]["usd"] == round((8 * 2400 + 36) / 3600 * 12.0, 2)
    assert out["unpriced_partitions"] == ["spare"]
    assert [u["user"] for u in teams["research"]["users"]] == ["alice", "bob"]
    assert out["total"]["gpu_seconds"] == sum(t["gpu_seconds"] for t in out["teams"])
    assert out["since"] == "2026-11-25T00:00:00Z" and out["until"] == "2026-11-26T12:00:00Z"
    assert len(out["skipped_records"]) == 2


def test_a_run_never_counts_more_than_its_elapsed_time() -> None:
    # suspended for half of its wall time: ElapsedRaw says 1800 of the 3600 between Start and End
    run = sacct.JobRun("1", "a", "t", "p5", 8, 1800, dt.datetime(2026, 11, 25, 1), dt.datetime(2026, 11, 25, 2), "COMPLETED")
    assert WINDOW.seconds_inside(run, NOW) == 1800
    before = sacct.JobRun("2", "a", "t", "p5", 8, 60, dt.datetime(2026, 11, 20), dt.datetime(2026, 11, 20, 0, 1), "COMPLETED")
    assert WINDOW.seconds_inside(before, NOW) == 0


def test_the_table_escapes_control_characters_in_names() -> None:
    records = sacct.parse_records(SACCT_OUT)
    text = report.as_table(report.tally("slurm-p5", records.runs, WINDOW, {"p5": 12.0}, NOW, records.skipped))
    assert "\x1b" not in text and "m\\x1b[2Jallory" in text
    rows = {r.split()[0]: r.split()[1:] for r in text.splitlines()[2:] if r.strip()}
    assert rows["research"] == ["11.00", "108.00", "3"]  # 11 GPU-hours: 8 + 2 + 1; 9 of them in p5 at 12; g6e unpriced here
    assert "no GPU price for partition(s) g6e, spare" in text


def test_the_sacct_command_asks_for_every_run_of_every_user_split_on_the_unit_separator() -> None:
    cmd = sacct.sacct_command(dt.datetime(2026, 11, 25), dt.datetime(2026, 11, 26))
    assert cmd[:6] == ["sacct", "--allusers", "--allocations", "--duplicates", "--parsable2", "--noheader"]
    assert f"--delimiter={D}" in cmd and "--noconvert" in cmd
    assert "--starttime=2026-11-25T00:00:00" in cmd and "--endtime=2026-11-26T00:00:00" in cmd
    assert "--format=JobID,User,Account,Partition,AllocTRES,ElapsedRaw,Start,End,State" in cmd


@pytest.mark.parametrize(
    ("since", "until", "expected"),
    [
        (None, None, (dt.datetime(2026, 10, 27, 12), NOW)),
        ("yesterday", "yesterday", (dt.datetime(2026, 11, 25), dt.datetime(2026, 11, 26))),
        ("2026-11-01", None, (dt.datetime(2026, 11, 1), NOW)),
        ("2026-11-01", "2026-12-31", (dt.datetime(2026, 11, 1), NOW)),  # never past now
        (None, "2026-11-10", (dt.datetime(2026, 10, 12), dt.datetime(2026, 11, 11))),
    ],
)
def test_the_window(since: str | None, until: str | None, expected: tuple[dt.datetime, dt.datetime]) -> None:
    w = cli.window_of(since, until, NOW)
    assert (w.since, w.until) == expected


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        ("26/11/2026", None, "--since '26/11/2026': expected a day as YYYY-MM-DD"),
        ("2026-11-20", "2026-11-19", "--since '2026-11-20' is not before the end of the window"),
        (None, "tomorrow", "--until 'tomorrow': expected a day"),
    ],
)
def test_a_bad_window_is_refused_naming_the_option(since: str | None, until: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        cli.window_of(since, until, NOW)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gpu_prices": [{"partition": "p5", "usd_per_gpu_hour": "12"}]}, "gpu_prices[0].usd_per_gpu_hour: must be a number"),
        (
            {
                "gpu_prices": [
                    {"partition": "p5", "gpus_per_node": 8, "usd_per_gpu_hour": 1},
                    {"partition": "p5", "gpus_per_node": 8, "usd_per_gpu_hour": 2},
                ]
            },
            "'p5' is priced twice",
        ),
        ({"usage": {"bucket": "Bad_Bucket", "prefix": "u/"}}, "usage.bucket: 'Bad_Bucket' is not valid"),
        ({"usage": {"bucket": "ok-bucket", "prefix": "/x/"}}, "usage.prefix: must be a key prefix"),
        ({"usage": {"bucket": "ok-bucket", "prefix": "u/", "region": "x"}}, "usage.region: unknown key"),
        ({"cluster": ""}, "cluster: must be a non-empty string"),
        ({"schema": 2}, "schema: this agent reads schema 1"),
    ],
)
def test_a_bad_contract_is_refused_naming_the_key(change: dict[str, object], message: str) -> None:
    with pytest.raises(policy.PolicyError, match=message.replace("[", r"\[")):
        policy.parse_policy({**CONTRACT, **change})


def test_no_usage_key_means_no_daily_file() -> None:
    p = policy.parse_policy({k: v for k, v in CONTRACT.items() if k != "usage"})
    assert p.target is None and p.prices == {"p5": 12.0, "g6e": 2.5}


@pytest.fixture
def fake_sacct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``sacct`` on PATH that records its arguments and TZ and prints SACCT_OUT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "out.txt").write_text(SACCT_OUT + "\n")
    script = bin_dir / "sacct"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"open({str(tmp_path / 'calls.json')!r}, 'a').write(json.dumps([os.environ.get('TZ'), sys.argv[1:]]) + '\\n')\n"
        f"sys.stdout.write(open({str(tmp_path / 'out.txt')!r}).read())\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    contract = tmp_path / "accounts.json"
    contract.write_text(json.dumps(CONTRACT))
    return tmp_path


def test_the_command_prints_json_and_uploads_the_daily_file(
    fake_sacct: Path, moto: MotoServer, aws_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto.url)
    s3 = boto3.session.Session(region_name=REGION).client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket="cluster-data")
    args = ["--file", str(fake_sacct / "accounts.json"), "--since", "yesterday", "--until", "yesterday"]
    assert cli.main([*args, "--json", "--upload"], now=NOW) == 0 or pytest.fail(capsys.readouterr().err)
    printed = json.loads(capsys.readouterr().out)
    calls = [json.loads(x) for x in (fake_sacct / "calls.json").read_text().splitlines()]
    assert len(calls) == 1 and calls[0][0] == "UTC"
    assert {"--starttime=2026-11-25T00:00:00", "--endtime=2026-11-26T00:00:00"} <= set(calls[0][1])
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="cluster-data")["Contents"]]
    assert keys == ["usage/2026-11-25.json"]
    stored = json.loads(s3.get_object(Bucket="cluster-data", Key=keys[0])["Body"].read())
    assert stored == printed and stored["cluster"] == "slurm-p5"
    assert stored["until"] == "2026-11-26T00:00:00Z" and stored["teams"][0]["account"] == "research"


def test_the_agent_command_hands_usage_its_own_options(fake_sacct: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert agent_cli.main(["usage", "--file", str(fake_sacct / "accounts.json"), "--since", "2000-01-01"]) == 0
    assert capsys.readouterr().out.startswith("GPU usage of slurm-p5 from 2000-01-01T00:00:00Z to ")
    assert agent_cli.main(["usage", "--bogus"]) == cli.EXIT_USAGE


def test_the_command_fails_cleanly_when_sacct_fails_or_the_upload_has_nowhere_to_go(
    fake_sacct: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = fake_sacct / "accounts.json"
    (fake_sacct / "bin" / "sacct").write_text(
        "#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n"
    )
    assert cli.main(["--file", str(contract)], now=NOW) == cli.EXIT_FAILED
    assert "sacct failed (exit 1): sacct: error: Problem talking to the database" in capsys.readouterr().err
    contract.write_text(json.dumps({k: v for k, v in CONTRACT.items() if k != "usage"}))
    assert cli.main(["--file", str(contract), "--upload"], now=NOW) == cli.EXIT_USAGE
    assert "names no usage bucket" in capsys.readouterr().err
    assert cli.main(["--file", str(fake_sacct / "missing.json")], now=NOW) == cli.EXIT_USAGE
    assert "missing.json" in capsys.readouterr().err
