"""The preview workflow's own scripts, end to end, on two real checkouts of this repository: the test commits a
base (this tree) and heads that change a stack, checks them out side by side as the workflow does, and runs the
workflow's ``run:`` blocks with bash — scope, plan and compare, the sticky comment (against a fake GitHub API on
127.0.0.1) and the gate — with the environment the runner would give them. Installs are pip's job and not
repeated here: ``$GPUCLUSTER`` is this test run's own installation, as ``.venv-head`` would be.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.tools.ci.github_fake import TOKEN, FakeGitHub

WORKFLOW = ROOT / ".github" / "workflows" / "preview.yml"
GOLDEN = ROOT / "tests" / "golden" / "preview"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "gpucluster tests", "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "gpucluster tests", "GIT_COMMITTER_EMAIL": "tests@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}  # fmt: skip
STACK = "stacks/Pulumi.slurm-p5.yaml"

# git checkouts of two commits, the CLI planning each, a fake GitHub API server on 127.0.0.1
pytestmark = pytest.mark.slow


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _edit(repo: Path, old: str, new: str) -> None:
    path = repo / STACK
    text = path.read_text()
    assert old in text, f"{STACK} no longer holds {old!r}: update this test's PR"
    path.write_text(text.replace(old, new, 1))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A git repository holding this checkout's tracked files, with a base and two head commits."""
    repo = tmp_path_factory.mktemp("origin")
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True, text=True).stdout
    for name in filter(None, tracked.split("\0")):
        src, dst = ROOT / name, repo / name
        if not (src.exists() or src.is_symlink()):
            continue  # deleted in the work tree, not yet committed
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    _git(repo, "init", "-q", "-b", "main")
    shas = {"base": _commit(repo, "base")}
    # PR 1: a bigger p5 partition — more money, nothing replaced, no data lost.
    _edit(repo, "      maxSize: 16\n", "      maxSize: 24\n")
    _edit(repo, "        instanceCount: 16\n", "        instanceCount: 24\n")
    shas["grow"] = _commit(repo, "p5 partition up to 24 nodes")
    # PR 2, on top: EFA on the file system, which AWS can only do by replacing it.
    _edit(repo, "      storageCapacityGib: 4800\n", "      storageCapacityGib: 19200\n      enableEfa: true\n")
    shas["efa"] = _commit(repo, "EFA for Lustre")
    yield repo, shas


def _checkout(repo: Path, sha: str, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(repo), str(where)], check=True)
    _git(where, "checkout", "-q", sha)
    return where


def _steps() -> dict[str, dict[str, Any]]:
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["offline"]
    return {s.get("id") or s["name"]: s for s in job["steps"]}


class Runner:
    """Runs the offline job's ``run:`` blocks the way the runner does (``bash -eo pipefail``), with its env."""

    def __init__(self, work: Path, base_sha: str, head_sha: str, labels: list[str], github: FakeGitHub) -> None:
        self.work = work
        self.summary = work / "step_summary"
        self.summary.touch()
        self.outputs: dict[str, dict[str, str]] = {}
        """Each step's ``$GITHUB_OUTPUT`` (``steps.<id>.outputs``), by step id or name."""
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
            "GITHUB_WORKSPACE": str(work),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_API_URL": github.url,
            "GPUCLUSTER": str(Path(sys.executable).parent / "gpucluster"),
            "BASE_GPUCLUSTER": str(work / ".venv-base" / "bin" / "gpucluster"),
            "BASE_SHA": base_sha,
            "HEAD_SHA": head_sha,
            "ALLOW_DATA_LOSS": "true" if "allow-data-loss" in labels else "false",
        }

    def step(self, key: str, **env: str) -> subprocess.CompletedProcess[str]:
        script = _steps()[key]["run"]
        output = self.work / f"output-{len(self.outputs)}"
        output.touch()
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=self.work, env={**self.env, **env, "GITHUB_OUTPUT": str(output)},
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        self.outputs[key] = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        return proc


def _normalized(comment: str) -> str:
    return re.sub(r"`[0-9a-f]{7}`", "`<sha>`", comment)


def _pr_run(repo: Path, shas: dict[str, str], base: str, head: str, work: Path, github: FakeGitHub,
            labels: list[str] = ()) -> tuple[Runner, int]:  # type: ignore[assignment]  # fmt: skip
    work.mkdir()
    _checkout(repo, shas[base], work / "base")
    _checkout(repo, shas[head], work / "head")
    run = Runner(work, shas[base], shas[head], list(labels), github)
    scope = run.step("scope")
    assert scope.returncode == 0, scope.stderr
    assert run.outputs["scope"]["code-changed"] == "false"  # a stack-only change: the base install step is skipped
    assert run.outputs["scope"]["stacks"] == "slurm-p5"
    preview = run.step("preview")
    assert preview.returncode == 0, preview.stderr  # the step records the status; the gate decides
    policy = run.step("policy")
    assert policy.returncode == 0 and run.outputs["policy"]["status"] == "0", policy.stdout + policy.stderr
    assert "no violations" in policy.stdout, policy.stdout + policy.stderr
    comment = run.step("Comment on the pull request", GITHUB_TOKEN=TOKEN, REPO="acme/cluster", PR="7")
    assert comment.returncode == 0, comment.stderr
    gate = run.step(
        "Gate on data loss, invalid configs and policy violations",
        STATUS=run.outputs["preview"]["status"],
        POLICY=run.outputs["policy"]["status"],
    )
    return run, gate.returncode


def test_pr_comment_and_gate_on_two_commits(repo: tuple[Path, dict[str, str]], tmp_path: Path, update_golden: bool):
    repo_dir, shas = repo
    github = FakeGitHub()
    try:
        # PR 1: grows the partition. The check passes; one comment is created.
        run, gate = _pr_run(repo_dir, shas, "base", "grow", tmp_path / "grow", github)
        assert gate == 0
        comment = (tmp_path / "grow" / "preview" / "comment.md").read_text()
        assert [c["body"] for c in github.comments] == [comment]
        assert "### `slurm-p5`" in comment
        assert "Data loss" not in comment
        assert run.summary.read_text() == comment  # under the limit: the job summary is the same, uncut
        golden = GOLDEN / "comment-grow.md"
        if update_golden:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(_normalized(comment))
        assert _normalized(comment) == golden.read_text()

        # PR 2: the same pull request pushed again with EFA on Lustre: the comment is edited, not added, and the
        # check fails on data loss (exit 3) until the label is there.
        run, gate = _pr_run(repo_dir, shas, "base", "efa", tmp_path / "efa", github)
        assert gate == 3
        assert (
            len(github.comments) == 1
            and ("PATCH", f"/repos/acme/cluster/issues/comments/{github.comments[0]['id']}") in github.calls
        )
        body = github.comments[0]["body"]
        assert "Data loss" in body and "allow-data-loss" in body
        assert json.loads((tmp_path / "efa" / "preview" / "preview.json").read_text())["stacks"][0]["dataLoss"] is True

        run, gate = _pr_run(repo_dir, shas, "base", "efa", tmp_path / "efa-labelled", github, labels=["allow-data-loss"])
        assert gate == 0
        assert "allowed by the `allow-data-loss` label" in github.comments[0]["body"]
    finally:
        github.close()


def test_a_pr_touching_only_docs_plans_nothing(repo: tuple[Path, dict[str, str]], tmp_path: Path):
    from gpucluster.tools.ci.scope import scope

    repo_dir, shas = repo
    base = _checkout(repo_dir, shas["base"], tmp_path / "base")
    head = _checkout(repo_dir, shas["base"], tmp_path / "head")
    (head / "README.md").write_text((head / "README.md").read_text() + "\nA typo fixed.\n")
    (head / "docs" / "new.md").write_text("# new\n")
    sc = scope(base, head)
    assert sc.stacks == () and not sc.code_changed
    # …and one touching the package plans every stack, with the base's own code.
    comp = head / "components" / "network" / "network.py"
    comp.write_text(comp.read_text() + "\n")
    sc = scope(base, head)
    assert sc.code_changed and set(sc.stacks) == {
        p.name[len("Pulumi.") : -len(".yaml")] for p in (head / "stacks").glob("Pulumi.*.yaml")
    }


def test_code_change_without_the_base_install_is_refused_clearly(repo: tuple[Path, dict[str, str]], tmp_path: Path):
    repo_dir, shas = repo
    base = _checkout(repo_dir, shas["base"], tmp_path / "base")
    head = _checkout(repo_dir, shas["grow"], tmp_path / "head")
    (head / "__main__.py").write_text((head / "__main__.py").read_text() + "\n")
    r = subprocess.run(
        [str(Path(sys.executable).parent / "gpucluster"), "preview", "--base", str(base), "--head", str(head), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 1
    assert "--base-gpucluster" in r.stderr and "Traceback" not in r.stderr
