"""``gpucluster usage --stack X``: the Run Command lines that print the head node's GPU usage report — valid shell
(``bash -n``), aimed at the cluster's head node by its tags, and running a command line the agent accepts; a stack
without Slurm accounting or a bad day is one clean refusal."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from gpucluster.tools.cli import main
from gpucluster_agents.usage import cli as agent_usage

REPO = Path(__file__).resolve().parents[2]


def usage(*args: str) -> int:
    return main(["--project-dir", str(REPO), "usage", *args])


def test_prints_run_command_lines_for_the_head_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert usage("--stack", "slurm-p5", "--since", "2026-11-01", "--until", "yesterday", "--json") == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if not x.startswith("#")]
    script = "\n".join(lines) + "\n"
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0
    send = shlex.split(lines[0].removeprefix("id=$(").removesuffix(")"))
    assert send[:3] == ["aws", "ssm", "send-command"]
    assert send[send.index("--document-name") + 1] == "AWS-RunShellScript"  # runs as root
    targets = send[send.index("--targets") + 1 : send.index("--targets") + 3]
    assert targets == ["Key=tag:gpucluster:cluster,Values=slurm-p5", "Key=tag:gpucluster:role,Values=head"]
    remote = shlex.split(json.loads(send[send.index("--parameters") + 1])["commands"][0])
    assert remote[:2] == ["/usr/local/sbin/gpucluster-agent", "usage"]
    args = agent_usage._parser().parse_args(remote[2:])
    assert (args.since, args.until, args.json, args.upload) == ("2026-11-01", "yesterday", True, False)
    assert "get-command-invocation" in lines[-1] and "us-east-1" in lines[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stack", "eks-p5"], "has no Slurm cluster"),
        (["--stack", "slurm-p5", "--since", "1/11/2026"], "--since '1/11/2026': expected a day as YYYY-MM-DD"),
    ],
)
def test_refusals_are_one_clean_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert usage(*args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("gpucluster usage:")
