"""Every verb that reads a stack (``plan``, ``preflight``, ``policy``, and ``bundle`` once it exists: the verbs are
read from the CLI's own parser) answers a bad hybrid section with the error naming field, value and fix, exit code
2, and no traceback. Runs ``gpucluster.tools.cli.main`` in a scratch project holding the real ``__main__.py``."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
import yaml

from gpucluster.tools import cli
from tests.config.hybrid.test_hybrid_checks import H, setter, slurm_site
from tests.conftest import ROOT

BAD = {
    # a cross-field error (checks.hybrid) and a field error (the model) in one stack
    "hybrid-bad": slurm_site(setter("controller", "address", value="192.168.1.10")),
    "hybrid-bad-field": slurm_site(setter("srunPortRange", value="63000-60001")),
}
EXPECTED = {
    "hybrid-bad": f"{H}.controller.address: controller address 192.168.1.10 is not inside onPremCidrs (10.20.0.0/16)",
    "hybrid-bad-field": f"{H}.srunPortRange: srunPortRange '63000-60001' is not a port range.",
}
FIX = {
    "hybrid-bad": "Fix: add the controller's network to onPremCidrs",
    "hybrid-bad-field": "Fix: write low-high with 1024 ≤ low < high ≤ 65535",
}


def stack_verbs() -> list[str]:
    """The CLI's verbs that take ``--stack``."""
    verbs = []
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        if any("--stack" in a.option_strings for a in p._actions):
            verbs.append(name)
    return sorted(verbs)


def test_the_stack_verbs_include_plan_preflight_policy():
    assert {"plan", "preflight", "policy"} <= set(stack_verbs())


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hybrid-project")
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", root / "__main__.py")
    (root / "stacks").mkdir()
    for name, config in BAD.items():
        (root / "stacks" / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return root


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    """Preflight must refuse the config before it looks for credentials: give it none."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize("stack", sorted(BAD))
@pytest.mark.parametrize("verb", stack_verbs())
def test_verb_prints_the_hybrid_error(project, capsys, no_aws, tmp_path, verb, stack):
    argv = ["--project-dir", str(project), verb, "--stack", stack]
    if verb == "bundle":
        argv += ["--out", str(tmp_path / "bundle")]
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output, output
    assert EXPECTED[stack] in output, output[-3000:]
    assert FIX[stack] in output, output[-3000:]
    assert code == 2, output[-3000:]
    if verb == "bundle":
        assert not (tmp_path / "bundle").exists() or not any((tmp_path / "bundle").iterdir())
