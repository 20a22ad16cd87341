"""Every verb answers bad input, missing credentials and refused AWS calls with a message and an exit
code — never a traceback (items 3 and 4).

Each row runs ``gpucluster.tools.cli.main(argv)`` in a scratch project (the real ``__main__.py`` and a stack
file written for the row) and asserts the exit code, the message fragment, and that nothing on stdout
or stderr is a traceback. A few rows run the CLI as its own process, as a user would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.tools import cli
from tests.conftest import HOSTILE_SLURM_SETTINGS, ROOT

GROUP = {"name": "gpu", "instanceType": "g6e.xlarge", "availabilityZones": ["us-east-1a"], "maxSize": 2}


def stack_yaml(**config: Any) -> str:
    """A stack file (emitted by PyYAML) with ``aws:region`` and one node group unless overridden."""
    doc: dict[str, Any] = {"aws:region": "us-east-1", "gpucluster:nodeGroups": [GROUP]}
    doc.update({k.replace("__", ":"): v for k, v in config.items()})
    return yaml.safe_dump({"config": {k: v for k, v in doc.items() if v is not None}}, sort_keys=False)


def hostile_slurm_p5() -> str:
    """slurm-p5 with the review's seven slurm.settings keys that name code, a user or an authentication method."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.slurm-p5.yaml").read_text())
    doc["config"]["gpucluster:slurm"]["settings"] = HOSTILE_SLURM_SETTINGS
    return yaml.safe_dump(doc, sort_keys=False)


BOMB = "config:\n  aws:region: us-east-1\n" + "".join(
    f"  l{n}: &l{n} [{', '.join([f'*l{n - 1}' if n else 'x'] * 9)}]\n" for n in range(9)
)

STACKS: dict[str, str] = {
    "ok": stack_yaml(),
    "p5e": stack_yaml(gpucluster__nodeGroups=[{**GROUP, "instanceType": "p5e.48xlarge"}]),
    "lustre-zone": stack_yaml(gpucluster__storage={"lustre": {"storageCapacityGib": 1200, "availabilityZone": "us-east-1c"}}),
    "inf-size": stack_yaml(
        gpucluster__storage={"lustre": {}, "workload": {"datasetSizeTib": float("inf"), "checkpointSizeGib": 100}}
    ),
    "big-size": "config:\n  aws:region: us-east-1\n  gpucluster:nodeGroups:\n"
    "    - {name: gpu, instanceType: g6e.xlarge, availabilityZones: [us-east-1a], maxSize: 2, pricePerHour: 1e400}\n",
    "inf-price": stack_yaml(gpucluster__nodeGroups=[{**GROUP, "pricePerHour": float("inf")}]),
    "big-user-data": stack_yaml(
        gpucluster__nodeGroups=[{**GROUP, "ncclEnv": {"NCCL_BIG": "".join(f"{(n * 7919) % 1000003:06x}" for n in range(5000))}}]
    ),
    "config-list": "config:\n  - aws:region: us-east-1\n",
    "scalar-root": "just some text\n",
    "not-yaml": "config:\n  aws:region: [us-east-1\n",
    "dup-key": "config:\n  aws:region: us-east-1\n  gpucluster:nodeGroups: []\n  gpucluster:nodeGroups:\n    - name: gpu\n",
    "bomb": BOMB,
    "esc": "environment:\n  - ml-team/gpu-cluster\nconfig:\n  aws:region: us-east-1\n",
    "hatch": hostile_slurm_p5(),
}
VALUES = yaml.safe_dump({"gpucluster:nodeGroups": [GROUP]})
# Stack files that are not UTF-8 text: binary junk (a gzip header and an ELF one), a Latin-1
# file, and UTF-8 with a NUL byte (decodes, but YAML allows no such character).
BINARY: dict[str, bytes] = {
    "gzip": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + bytes(range(256)),
    "elf": b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"config:\n",
    "latin1": "config:\n  aws:region: us-east-1\n  gpucluster:tags: {owner: Jos\u00e9}\n".encode("latin-1"),
    "nul": b"config:\n  aws:region: us-east-1\x00\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", root / "__main__.py")
    (root / "stacks").mkdir()
    for name, text in STACKS.items():
        (root / "stacks" / f"Pulumi.{name}.yaml").write_text(text)
    (root / "values.yaml").write_text(VALUES)
    for name, data in BINARY.items():
        (root / "stacks" / f"Pulumi.{name}.yaml").write_bytes(data)
    (root / "binary.json").write_bytes(BINARY["gzip"])
    (root / "not-json.txt").write_text("not json {")
    (root / "list.json").write_text("[1, 2]")
    (root / "no-main").mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", root / "no-main" / "Pulumi.yaml")
    (root / "no-main" / "stacks").mkdir()
    (root / "no-main" / "stacks" / "Pulumi.ok.yaml").write_text(STACKS["ok"])
    (root / "empty").mkdir()
    return root


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """An environment where boto3 finds no credentials (and never asks the instance metadata service)."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # a session another test made keeps its credentials


# (id, argv ({P} = the project dir), exit code, fragment of stdout+stderr)
CASES = [
    (
        "missing-price-text",
        "plan --stack p5e --no-files",
        0,
        "no list price for p5e.48xlarge in the catalog; set gpucluster:nodeGroups[0].pricePerHour",
    ),
    (
        "lustre-zone-without-subnet",
        "plan --stack lustre-zone",
        2,
        "gpucluster:storage.lustre.availabilityZone: the cluster has no node group or subnet in us-east-1c",
    ),
    ("user-data-over-16k", "plan --stack big-user-data", 2, "gpucluster:nodeGroups[0]: the user data of node group 'gpu' is"),
    (
        "inf-dataset-size",
        "plan --stack inf-size",
        2,
        "gpucluster:storage.workload.datasetSizeTib: input should be a finite number",
    ),
    ("1e400-price", "plan --stack big-size", 2, "gpucluster:nodeGroups[0].pricePerHour: input should be a finite number"),
    ("inf-price-json", "plan --stack inf-price --json", 2, "input should be a finite number"),
    ("config-not-a-mapping", "plan --stack config-list", 2, "`config:` must be a mapping of `namespace:key: value`, not a list"),
    ("scalar-root", "plan --stack scalar-root", 2, "the document must be a mapping with a `config:` key"),
    ("unparsable-yaml", "plan --stack not-yaml", 2, "Pulumi.not-yaml.yaml line 3"),
    ("duplicate-key", "plan --stack dup-key", 2, "found duplicate key 'gpucluster:nodeGroups' (first at line 3)"),
    ("alias-bomb", "plan --stack bomb", 2, "more than 100000 values once its aliases"),
    (
        "esc-without-values",
        "plan --stack esc --no-files",
        2,
        "imports Pulumi ESC environment(s) ml-team/gpu-cluster; the offline plan cannot see ESC values",
    ),
    (
        "esc-with-config",
        "plan --stack esc --no-files --config gpucluster:nodeGroups=[{name: gpu, instanceType: g6e.xlarge, availabilityZones: [us-east-1a], maxSize: 2}]",
        0,
        "Resources:",
    ),
    ("esc-with-config-file", "plan --stack esc --no-files --config-file {P}/values.yaml", 0, "Resources:"),
    ("config-without-equals", "plan --stack ok --config gpucluster:tags", 2, "expected KEY=VALUE"),
    ("missing-stack", "plan --stack nope", 1, "no stack config"),
    ("project-dir-after-verb", "plan --stack ok --no-files --project-dir {P}", 0, "Resources:"),
    ("project-dir-missing", "plan --stack ok --project-dir {P}/nowhere", 1, "does not exist"),
    ("project-dir-without-pulumi-yaml", "plan --stack ok --project-dir {P}/empty", 1, "no Pulumi.yaml in"),
    ("project-dir-without-main", "plan --stack ok --project-dir {P}/no-main", 1, "no __main__.py in"),
    ("diff-missing-file", "plan diff {P}/gone.json {P}/gone2.json", 1, "gone.json: no such file"),
    ("diff-not-json", "plan diff {P}/not-json.txt {P}/not-json.txt", 1, "is not a JSON plan"),
    ("diff-json-not-a-plan", "plan diff {P}/list.json {P}/list.json", 1, "is not a JSON plan"),
    ("preflight-bad-yaml", "preflight --stack dup-key", 2, "duplicate key"),
    ("preflight-invalid-config", "preflight --stack lustre-zone", 2, "availabilityZone"),
    ("policy-ok", "policy --stack ok", 0, "no violations"),
    ("policy-invalid-config", "policy --stack lustre-zone", 2, "the plan failed, nothing to check"),
    ("policy-bad-yaml", "policy --stack dup-key", 2, "duplicate key"),
    ("policy-missing-stack", "policy --stack nope", 1, "no stack config"),
    ("policy-plan-not-a-plan", "policy --plan {P}/list.json", 1, "is not a JSON plan"),
    ("stacks", "stacks", 0, "bomb"),
    ("stacks-without-project", "stacks --project-dir {P}/empty", 1, "no Pulumi.yaml in"),
    ("catalog-show-bad-type", "catalog show p5.48xlargee", 1, "unknown instance type 'p5.48xlargee'; close: p5.48xlarge"),
    ("catalog-show", "catalog show trn2.48xlarge", 0, "trn2.48xlarge"),
    ("unknown-option", "plan --bogus", 2, "gpucluster plan: error: unknown option --bogus\n"),
    # A misspelt option is reported as itself, with the closest one the verb knows (argparse alone said
    # "argument plan_command: invalid choice: 'lab' (choose from 'diff')" for this one).
    ("misspelt-option", "plan --stak lab", 2, "gpucluster plan: error: unknown option --stak (did you mean --stack?)"),
    (
        "misspelt-option-usage",
        "usage --stack ok --sinse 2026-01-01",
        2,
        "gpucluster usage: error: unknown option --sinse (did you mean --since?)",
    ),
    ("misspelt-verb", "catalog shoe", 2, "invalid choice: 'shoe' (choose from 'show', 'refresh', 'refresh-prices')"),
    # --stack the same on every verb that reads a stack: never a default stack, the stacks named when it is missing.
    *[
        (f"no-stack-{verb.split()[0]}", verb, 2, "name a stack with --stack NAME (stacks here: big-size, big-user-data, bomb,")
        for verb in (
            "plan",
            "plan --json",
            "preflight",
            "policy",
            "bundle --out {P}/bundle-out",
            "usage",
            "baseline",
            "images lock",
        )
    ],
    # Binary and non-UTF-8 stack files: a config error naming the file (exit 2), for every verb that reads one.
    *[
        (
            f"{verb.split(' --out')[0].replace(' --', '-')}-{name}",
            f"{verb} --stack {name}",
            2,
            f"Pulumi.{name}.yaml{sep} not UTF-8 text YAML",
        )
        for verb in ("plan", "plan --json", "preflight", "policy", "bundle --out {P}/bundle-out")
        for name, sep in (("gzip", " is"), ("elf", ":"), ("latin1", " is"), ("nul", ":"))
    ],
    ("config-file-binary", "plan --stack ok --config-file {P}/stacks/Pulumi.gzip.yaml", 2, "Pulumi.gzip.yaml is not UTF-8 text"),
    ("diff-binary-plan", "plan diff {P}/binary.json {P}/binary.json", 1, "binary.json is not a JSON plan: byte 0x8b at offset 1"),
    ("policy-binary-plan", "policy --plan {P}/binary.json", 1, "binary.json is not a JSON plan: byte 0x8b"),
]


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize(("argv", "code", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cli_answers_with_a_message_and_an_exit_code(project, capsys, argv, code, fragment):
    args = ["--project-dir", str(project), *[a.replace("{P}", str(project)) for a in _split(argv)]]
    got, output = run_cli(args, capsys)
    assert "Traceback" not in output and "Exception ignored" not in output, output
    assert _words(fragment) in _words(output), output[-3000:]  # the text plan wraps long lines
    assert got == code, output[-3000:]


@pytest.mark.parametrize("verb", ["plan", "plan --json", "plan --no-files", "policy", "preflight"])
def test_h2_every_verb_refuses_the_hostile_settings_naming_each_key(project, capsys, verb: str):
    """The loader's refusal reaches every verb that loads a stack: exit 2, each key's field, value and fix, and no
    traceback (preflight stops on the config before it asks AWS anything)."""
    got, output = run_cli(["--project-dir", str(project), *verb.split(), "--stack", "hatch"], capsys)
    assert "Traceback" not in output and got == 2, output[-3000:]
    for key, value in HOSTILE_SLURM_SETTINGS.items():
        assert f"gpucluster:slurm.settings.{key}" in output and value in output, (key, output[-3000:])
    count = _words(output).count("not settable: it names code that runs as root")  # wrapped at the plan's width
    assert count >= len(HOSTILE_SLURM_SETTINGS)


def _words(text: str) -> str:
    """``text`` with each run of white space one space: the same words whatever the width it was wrapped to."""
    return " ".join(text.split())


def _split(argv: str) -> list[str]:
    """Split on spaces, keeping a ``--config KEY=VALUE`` value (which has spaces) whole."""
    head, sep, value = argv.partition("--config gpucluster:nodeGroups=")
    return [*head.split(), "--config", f"gpucluster:nodeGroups={value}"] if sep else argv.split()


def test_json_plan_is_strict_json_for_every_catalog_price(project, capsys):
    """A group without a list price: the JSON plan says null (never NaN/Infinity) and parses strictly."""
    code, output = run_cli(["--project-dir", str(project), "plan", "--stack", "p5e", "--json"], capsys)
    assert code == 0

    def refuse(token: str) -> float:
        raise ValueError(f"non-finite number {token} in the JSON plan")

    doc = json.loads(output, parse_constant=refuse)
    group = doc["outputs"]["estimate"]["nodeGroups"][0]
    assert group["usdPerNodeHour"] is None and group["usdPerHour"] is None
    assert doc["outputs"]["estimate"]["unpriced"] == [group["nodeGroup"]]  # the total: the priced part
    assert "pricePerHour" in group["priceSource"]


def test_preflight_without_credentials_is_one_line(project, capsys, no_credentials):
    code, output = run_cli(["--project-dir", str(project), "preflight", "--stack", "ok"], capsys)
    assert code == 1 and "Traceback" not in output
    assert output.strip().splitlines() == [
        "gpucluster preflight: no AWS credentials (Unable to locate credentials); set AWS_PROFILE (or AWS_ACCESS_KEY_ID "
        "and AWS_SECRET_ACCESS_KEY), or run `aws sso login`"
    ]


def test_preflight_whose_checks_cannot_run_exits_1(project, capsys, aws_env, monkeypatch):
    """Nothing answers at the endpoint: each check is reported as "could not check …" and preflight exits
    1 (not 0: nothing was checked), without a traceback."""
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    argv = ["--project-dir", str(project), "preflight", "--stack", "ok", "--endpoint-url", "http://127.0.0.1:9"]
    code, output = run_cli(argv, capsys)
    assert code == 1 and "Traceback" not in output, output
    assert "could not check instance type offerings per zone: EndpointConnectionError" in output
    assert "could not check vCPU quotas: EndpointConnectionError" in output


def test_catalog_refresh_without_credentials_is_one_line(capsys, no_credentials, tmp_path):
    code, output = run_cli(["catalog", "refresh", "--region", "us-east-1", "--add", "p5.48xlarge"], capsys)
    assert code == 1 and "Traceback" not in output
    assert output.strip().splitlines() == [
        "gpucluster catalog refresh: no AWS credentials (Unable to locate credentials); set AWS_PROFILE (or "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or run `aws sso login`"
    ]


def test_catalog_refresh_refused_call_is_one_line(capsys, moto_endpoint, aws_env):
    """EC2 refuses the call (an instance type it does not know): one line naming the error, exit 1,
    and the committed catalog is left alone."""
    from gpucluster.tools.catalog_refresh import INSTANCE_TYPES_FILE

    before = INSTANCE_TYPES_FILE.read_text()
    code, output = run_cli(["catalog", "refresh", "--endpoint-url", moto_endpoint, "--add", "p9.96xlarge"], capsys)
    assert code == 1 and "Traceback" not in output
    assert output.startswith("gpucluster catalog refresh: EC2 DescribeInstanceTypes in us-east-1 failed: InvalidInstanceType")
    assert INSTANCE_TYPES_FILE.read_text() == before


@pytest.mark.slow  # a CLI process per verb
def test_cli_processes_exit_cleanly(project):
    """As separate processes with every ResourceWarning shown: no traceback, no ``Exception ignored``, no
    unclosed event loop. Before the fix each plan left about ten worker-thread event loops unclosed
    (shown here deterministically by ``-W always::ResourceWarning``); about one plan in five to
    twenty-five then printed asyncio's ``Invalid file descriptor: -1`` at exit. The 200-run check is
    ``bench/plan_exit_noise.py``."""
    for argv, code in (
        (["plan", "--stack", "ok", "--no-files"], 0),
        (["plan", "--stack", "esc", "--json"], 2),
        (["plan", "--stack", "dup-key"], 2),
    ):
        proc = subprocess.run(
            [sys.executable, "-W", "always::ResourceWarning", "-m", "gpucluster.tools.cli", "--project-dir", str(project), *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == code, proc.stderr
        for noise in ("Traceback", "Exception ignored", "unclosed", "ResourceWarning"):
            assert noise not in proc.stderr, proc.stderr


def _verbs(parser, prefix: str = "") -> dict[str, object]:
    """Every verb of the CLI (``plan``, ``plan diff``, ``catalog show`` ...) and its parser."""
    import argparse

    found: dict[str, object] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[f"{prefix}{name}"] = child
                found.update(_verbs(child, f"{prefix}{name} "))
    return found


def test_every_verb_has_a_description_and_the_same_stack_option():
    verbs = _verbs(cli.parser())
    assert {"plan", "plan diff", "preflight", "policy", "images lock", "preview-comment", "catalog show"} <= set(verbs)
    for name, parser in verbs.items():
        assert parser.description, f"gpucluster {name} --help has no description"
        stack = parser._option_string_actions.get("--stack")
        if stack is not None:
            assert (stack.option_strings, stack.default, stack.required) == (["--stack", "-s"], None, False), name


def test_top_level_help_lists_every_verb():
    """``gpucluster --help`` names every verb a user can run (the leaves of the tree: ``plan diff``, ``images lock``)."""
    verbs = _verbs(cli.parser())
    leaves = [name for name in verbs if not any(other.startswith(name + " ") for other in verbs)]
    leaves += ["plan"]  # plan is a verb of its own and the parent of plan diff
    missing = [name for name in leaves if f"gpucluster {name} " not in cli.__doc__]
    assert not missing, f"the top-level help does not list: {missing}"
    assert cli.__doc__.count("\n    3  ") == 1, "each exit code is listed once"


def test_images_lock_without_credentials_says_what_to_set(project, capsys, no_credentials):
    """Offline, `images lock` said only "Unable to locate credentials"; now it says what to set, like preflight and
    baseline do, and how to lock by hand."""
    code, output = run_cli(["--project-dir", str(project), "images", "lock", "--stack", "ok"], capsys)
    assert code == 1 and "Traceback" not in output, output
    assert output.strip().splitlines() == [
        "gpucluster images lock: node group gpu: cannot read SSM parameter "
        "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id: Unable to locate "
        "credentials; set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or run `aws sso login` (or lock "
        "by hand: set nodeGroups[].imageLock {imageId, ssmParameter, lockedAt}, docs/images.md)"
    ]
