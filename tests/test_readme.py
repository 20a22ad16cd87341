"""The README stays short and true: every path it names exists, every ``gpucluster`` command it gives is a real
verb with real flags, every link resolves, its test command is what CI runs, and its table lists every shipped
stack with the cost the stack's own plan estimates. The docs' links between themselves resolve too."""

from __future__ import annotations

import argparse
import functools
import glob
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from gpucluster.tools.cli import parser as cli_parser
from gpucluster.tools.plan.run.stackfile import stack_names
from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_LINES = 300

# The repository's top-level entries a path may start with (a hidden folder only where it is the project's own).
TOP = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") and p.name not in {"build", "dist"}} | {
    ".ci",
    ".github",
}
TOP -= {n for n in TOP if n.endswith(".egg-info") or n.startswith("venv")}
# Words shaped like paths that name something else.
NOT_PATHS = {
    "gpucluster/node-group": "a tag key",
    "gpucluster/team": "a Kubernetes label",
    "gpucluster/gpu": "a Kubernetes label",
    "policy-pack/venv": "the pack's virtualenv, which Pulumi builds on first use (ignored by git)",
}
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", flags=re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")  # a span may wrap onto the next line
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _fences(text: str) -> list[str]:
    return FENCE.findall(text)


def _spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks."""
    return [span.replace("\n", " ") for span in SPAN.findall(FENCE.sub("", text))]


def _words(text: str) -> list[str]:
    words: list[str] = []
    for chunk in _spans(text) + _fences(text):
        words += chunk.split()
    return words


def _as_path(word: str) -> str | None:
    """The repository path a word of code names, else None. A path starts with a top-level entry of the
    repository; ``<name>`` and ``…`` stand for any name, ``{a,b}`` for each of a and b."""
    word = word.strip("()[],;:.'\"")
    if word.startswith("./"):
        word = word[2:]
    head = word.split("/", 1)[0]
    if head not in TOP or ("/" not in word and head == word and not (ROOT / head).is_file()):
        return None
    if "://" in word or "=" in word or word in NOT_PATHS:
        return None
    return word


def _exists(path: str, base: Path = ROOT) -> bool:
    pattern = re.sub(r"<[^>]*>|…", "*", path)
    braces = re.search(r"\{([^{}]*)\}", pattern)
    if braces:
        return all(_exists(pattern[: braces.start()] + alt + pattern[braces.end() :], base) for alt in braces.group(1).split(","))
    if "*" in pattern:
        return bool(glob.glob(str(base / pattern)))
    return (base / pattern).exists()


def named_paths(text: str) -> set[str]:
    return {p for w in _words(text) if (p := _as_path(w))}


@functools.cache
def parser() -> argparse.ArgumentParser:
    return cli_parser()


# --- gpucluster commands -----------------------------------------------------------------------------------


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:  # argparse keeps the verbs here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(p: argparse.ArgumentParser) -> set[str]:
    return {o for a in p._actions for o in a.option_strings}


def commands(text: str) -> list[str]:
    """Every ``gpucluster …`` command line in code: a span or a fenced line that starts with it, or a command
    after ``&&``, ``;`` or ``$`` (so ``from gpucluster import X`` is not one)."""
    found: list[str] = []
    lines = _spans(text) + [line for block in _fences(text) for line in block.splitlines()]
    for line in lines:
        for part in re.split(r"&&|;|\$ |\|", line):
            part = part.split("#", 1)[0].strip()
            if part.startswith("gpucluster "):
                found.append(part)
    return found


def command_problems(command: str) -> list[str]:
    """What in one command line is not in the CLI's parser: the verb, a sub-verb or a flag."""
    try:
        words = shlex.split(command.replace("…", "").replace("[", " ").replace("]", " "))
    except ValueError:
        words = command.split()
    p, top = parser(), parser()
    words = words[1:]
    while words and words[0] == "--project-dir":  # the global option before the verb
        words = words[2:]
    if not words or words[0] in ("--version", "--help"):
        return []
    verbs = _subparsers(p)
    if words[0] not in verbs:
        return [f"{command}: {words[0]!r} is not a verb of gpucluster ({', '.join(sorted(verbs))})"]
    p = verbs[words[0]]
    sub = _subparsers(p)
    if sub and len(words) > 1 and not words[1].startswith("-") and words[1] in sub:
        p = sub[words[1]]
    elif sub and words[0] != "plan":  # catalog needs its sub-verb; plan's own flags plan a stack
        return [f"{command}: {words[0]} needs one of {', '.join(sorted(sub))}"]
    known = _options(p) | _options(top)
    return [
        f"{command}: {flag} is not a flag of gpucluster {words[0]}"
        for w in words
        if w.startswith("-") and (flag := w.split("=", 1)[0]) not in known and flag != "-"
    ]


# --- links --------------------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    text = FENCE.sub("", doc.read_text())
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def link_problems(doc: Path) -> list[str]:
    problems = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            problems.append(f"{doc.name}: link {target} leads nowhere")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            problems.append(f"{doc.name}: link {target}: {dest.name} has no heading #{anchor}")
    return problems


# --- the README -----------------------------------------------------------------------------------------------


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md is {lines} lines; details go to docs/ (at most {MAX_LINES})"


def test_every_path_the_readme_names_exists():
    readme = README.read_text()
    paths = named_paths(readme)
    assert len(paths) >= 10, sorted(paths)  # the check reads the README's paths, not none
    made = set(re.findall(r"^cp \S+ (\S+)$", readme, flags=re.M))  # what the walk-through makes (from a real file)
    assert made == {"stacks/Pulumi.mine.yaml"}
    missing = sorted(p for p in paths - made if not _exists(p))
    assert not missing, f"README.md names paths that do not exist: {missing}"


def test_every_command_the_readme_gives_is_real():
    found = commands(README.read_text())
    verbs = {c.split()[1] for c in found}
    assert {"plan", "preflight", "stacks", "generate"} <= verbs, verbs
    problems = [p for c in found for p in command_problems(c)]
    assert not problems, problems


def test_every_link_of_the_readme_and_the_docs_resolves():
    problems = [p for doc in [README, ROOT / "CONTRIBUTING.md", *DOCS] for p in link_problems(doc)]
    assert not problems, problems


def test_every_path_the_docs_name_exists():
    missing = [f"{doc.name}: {p}" for doc in DOCS for p in sorted(named_paths(doc.read_text())) if not _exists(p)]
    missing += [f"CONTRIBUTING.md: {p}" for p in named_paths((ROOT / "CONTRIBUTING.md").read_text()) if not _exists(p)]
    assert not missing, missing


def test_readme_test_command_is_what_ci_runs():
    """The command the README gives is the one .ci/run runs after its set-up: the same run, parallel or not
    (pyproject.toml's addopts), in CI and at a desk."""
    readme = README.read_text()
    (command,) = re.findall(r"the test command alone is `([^`]+)`", readme)
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "== tests (the README's test command)" in line)
    assert lines[at + 1].strip() == command
    assert "bash .ci/run" in readme and "gpucluster plan --stack dev" in readme


def _stack_rows() -> dict[str, list[str]]:
    readme = README.read_text()
    rows = re.findall(r"^\| \[?`([a-z0-9-]+)`\]?(?:\([^)]*\))? \|(.*)\|$", readme, flags=re.M)
    return {name: [c.strip() for c in rest.split("|")] for name, rest in rows}


def test_the_stack_table_lists_every_shipped_stack():
    assert set(_stack_rows()) == set(stack_names())


@pytest.mark.parametrize("stack", stack_names())
def test_the_stack_tables_cost_is_the_plans_estimate(stack):
    """The table's $/hour is the stack's own estimate (the golden plan's `estimate` output, which the plan
    tests keep equal to `gpucluster plan --stack X`), to the cent: now, and at maximum size where it differs."""
    plan = json.loads((ROOT / "tests" / "golden" / "plans" / f"{stack}.json").read_text())
    estimate = plan["outputs"]["estimate"]
    cost = _stack_rows()[stack][-1]
    amounts = [float(a.replace(",", "")) for a in re.findall(r"\$([\d,]+(?:\.\d+)?)", cost)]
    want = [estimate["usdPerHour"], estimate["usdPerHourAtMax"]]
    # a line the price data lacks: the figures are the priced part, and the table counts what they leave out
    unpriced = estimate.get("unpriced") or []
    assert ("unpriced" in cost) == bool(unpriced) and (not unpriced or f"+ {len(unpriced)} unpriced" in cost), cost
    assert len(amounts) == len(set(want)), (cost, want)
    assert amounts == sorted(set(want)), (stack, cost, want)


# --- the checks themselves catch what they are for --------------------------------------------------------------


def test_the_checks_catch_a_missing_path_a_fake_verb_and_a_fake_flag(tmp_path):
    text = "Run `gpucluster plann --stack dev`, read `docs/nowhere.md` and `gpucluster/tools/cli.py`.\n"
    assert named_paths(text) == {"docs/nowhere.md", "gpucluster/tools/cli.py"}
    assert not _exists("docs/nowhere.md") and _exists("gpucluster/tools/cli.py")
    assert _exists("stacks/Pulumi.<name>.yaml") and not _exists("stacks/Pulumi.<name>.json")
    assert _exists("tests/{facts,config}/") and not _exists("tests/{facts,nope}/")
    assert command_problems("gpucluster plann --stack dev")
    assert command_problems("gpucluster plan --stak dev")
    assert command_problems("gpucluster catalog --region us-east-1")
    assert not command_problems("gpucluster plan diff base.json head.json --format markdown --exit-code")
    assert not command_problems("gpucluster --project-dir x catalog refresh-prices --region R --types TYPE …")
    assert commands("```python\nfrom gpucluster import GpuNodeGroup\n```\n") == []
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# B\n\n## Real heading\n")
    doc.write_text("[b](b.md#real-heading) [c](c.md) [d](b.md#no-such)\n")
    assert link_problems(doc) == ["a.md: link c.md leads nowhere", "a.md: link b.md#no-such: b.md has no heading #no-such"]


# --- the walk-through and the program are real: planned as the README says, printing what it quotes ---------------


def _fence(lang: str, first_line: str, doc: Path = README) -> str:
    """The fenced block of ``lang`` in ``doc`` whose first line starts with ``first_line``."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", doc.read_text(), flags=re.M | re.S)  # in order: pairs stay paired
    (block,) = [b for lng, b in blocks if lng == lang and b.startswith(first_line)]
    return block


def _stack_project(tmp_path: Path, stack: str, text: str) -> Path:
    """A copy of this project (the stack program) with one stack file of its own."""
    for name in ("Pulumi.yaml", "__main__.py"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(text)
    return tmp_path


def _plan(capsys, project: Path, stack: str) -> tuple[int, str]:
    from gpucluster.tools import cli

    code = cli.main(["plan", "--stack", stack, "--project-dir", str(project), "--no-files"])
    out = capsys.readouterr()
    return code, out.out + out.err


def _matches(quoted: str, printed: str) -> list[str]:
    """The quoted lines (``…`` standing for the rest) that no printed line matches."""
    lines = printed.splitlines()
    return [
        q
        for q in quoted.splitlines()
        if q.strip() and not any(re.fullmatch(".*".join(map(re.escape, q.split("…"))) + ".*", line) for line in lines)
    ]


def test_your_first_stack_plans_as_the_readme_shows(tmp_path, capsys):
    stack_file = _fence("yaml", "# stacks/Pulumi.mine.yaml")
    project = _stack_project(tmp_path, "mine", stack_file)
    code, printed = _plan(capsys, project, "mine")
    assert code == 0, printed
    shown = _fence("", "$ gpucluster plan --stack mine").splitlines()[1:]
    assert printed.splitlines()[: len(shown)] == shown

    # The typo the walk-through shows fails as quoted, with exit 2 and nothing created.
    (project / "stacks" / "Pulumi.mine.yaml").write_text(stack_file.replace("g6e.12xlarge", "g6e.12xl"))
    code, printed = _plan(capsys, project, "mine")
    assert code == 2
    quoted = _fence("", "stack 'mine' is invalid")
    assert not _matches(quoted, printed), printed


def test_the_readmes_own_program_plans(tmp_path, capsys):
    """The Python program under "Use the components from your own program" plans with the command the README
    gives, and its summary shows the group and a cost."""
    (tmp_path / "__main__.py").write_text(_fence("python", "import pulumi_aws as aws"))
    *make, command = _fence("bash", "printf 'name: mine").strip().splitlines()
    for line in make:  # the README's own lines write the project and stack files, as a user runs them
        subprocess.run(["bash", "-c", line], cwd=tmp_path, check=True)
    assert command.split() == ["gpucluster", "plan", "--stack", "dev", "--project-dir", "."]
    code, printed = _plan(capsys, tmp_path, "dev")
    assert code == 0, printed
    assert "train: 0 × p5.48xlarge now, max 2" in printed
    assert re.search(r"cost +\$0\.00/h now, \$[\d,.]+/h at max size", printed), printed


def test_the_stack_file_guide_plans_and_fails_as_shown(tmp_path, capsys):
    """docs/stacks.md's minimal config plans; with the two mistakes it names, it fails as quoted."""
    doc = ROOT / "docs" / "stacks.md"
    minimal = _fence("yaml", "config:", doc)
    project = _stack_project(tmp_path, "bad", minimal)
    code, printed = _plan(capsys, project, "bad")
    assert code == 0, printed
    assert "p5: 0 × p5.48xlarge now, max 16" in printed
    bad = minimal.replace("p5.48xlarge", "p5.48xl") + "      associatePublicIpAddress: true\n"
    (project / "stacks" / "Pulumi.bad.yaml").write_text(bad)
    code, printed = _plan(capsys, project, "bad")
    assert code == 2
    assert not _matches(_fence("", "stack 'bad' is invalid", doc), printed), printed


def test_the_quoted_output_check_sees_a_difference():
    assert _matches("a … c\nb", "a x c\nb\n") == []
    assert _matches("a … c\nd", "a x c\nb\n") == ["d"]


def test_the_docs_commands_use_real_flags():
    """In docs/ and CONTRIBUTING.md a ``gpucluster`` line in code may be output or a picture (``gpucluster plan:
    the program calls…``, ``gpucluster agent (ResumeProgram …)``), so only lines that start with a real verb are
    commands there: their sub-verbs and flags must be real. The README is held to every line (above)."""
    verbs = set(_subparsers(parser()))
    found = [
        (doc.name, c) for doc in [*DOCS, ROOT / "CONTRIBUTING.md"] for c in commands(doc.read_text()) if c.split()[1] in verbs
    ]
    assert len(found) >= 20, found
    problems = [f"{name}: {p}" for name, c in found for p in command_problems(c)]
    assert not problems, problems
