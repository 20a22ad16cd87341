"""``gpucluster bundle``: writes the bundle, fills it from the stack outputs, refuses with one clean message
(no traceback) a stack without a site controller, bad outputs, and a folder holding someone else's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster.tools.cli import main
from gpucluster_agents import contract
from tests.render.hybrid.test_bundle_render import OUTPUT

REPO = Path(__file__).resolve().parents[2]


def bundle(*args: str) -> int:
    return main(["--project-dir", str(REPO), "bundle", *args])


def test_writes_the_bundle_offline_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert bundle("--stack", "hybrid-slurm", "--out", str(tmp_path / "b")) == 0
    out = capsys.readouterr().out
    assert "not installable yet" in out and "@@roleArn@@" in out
    assert (tmp_path / "b" / "install.sh").stat().st_mode & 0o111
    assert (tmp_path / "b" / "cloud.conf").read_text().startswith("# cloud.conf")


def test_fills_the_bundle_from_the_stack_outputs_and_replaces_an_earlier_one(tmp_path: Path, capsys):
    out = tmp_path / "b"
    assert bundle("--stack", "hybrid-slurm", "--out", str(out)) == 0
    assert "not installable" in capsys.readouterr().out
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"clusterName": "hybrid-slurm", "hybrid": OUTPUT}))
    assert bundle("--stack", "hybrid-slurm", "--out", str(out), "--outputs", str(outputs)) == 0
    assert "not installable" not in capsys.readouterr().out
    cfg = contract.parse(json.loads((out / "agent.json").read_text()))
    assert cfg.node_groups[0].launch_template_id == OUTPUT["slurm"]["burstNodeGroups"]["p5"]["launchTemplateId"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--stack", "hybrid-eks"], 2, "no gpucluster:hybrid.controller"),
        (["--stack", "no-such-stack"], 1, "no stack config"),
        (["--stack", "hybrid-slurm", "--outputs", "/nonexistent/outputs.json"], 1, "--outputs"),
    ],
)
def test_refusals_are_one_clean_line(tmp_path: Path, capsys, args: list[str], code: int, message: str):
    assert bundle(*args, "--out", str(tmp_path / "b")) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("gpucluster bundle:")


def test_bad_output_values_are_refused(tmp_path: Path, capsys):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"hybrid": {"slurm": {"burstNodeGroups": {"p5": {"launchTemplateId": "x", "subnetIds": []}}}}}))
    assert bundle("--stack", "hybrid-slurm", "--out", str(tmp_path / "b"), "--outputs", str(outputs)) == 2
    assert "launchTemplateId" in capsys.readouterr().err


def test_never_writes_into_a_folder_with_other_files(tmp_path: Path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert bundle("--stack", "hybrid-slurm", "--out", str(tmp_path)) == 1
    assert "notes.txt" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
