"""``gpucluster images lock``: the SSM parameter is read once (moto), the AMI recorded in the stack file, and the plan
keeps that AMI whatever the parameter says later, until the lock is made again."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from gpucluster.load import load_spec
from gpucluster.tools.cli_common import CliError
from gpucluster.tools.images_cli import run
from gpucluster.tools.plan.run.stackfile import PROJECT_DIR, load_stack_config

P5, DEV = "/gpucluster/images/p5", "/gpucluster/images/dev"
AMI_A, AMI_B, AMI_D = "ami-0aaaaaaaaaaaaaaaa", "ami-0bbbbbbbbbbbbbbbb", "ami-0ddddddddddddddddd"[:21]


STACK = f"""# A small Slurm stack whose groups read their images from parameters of our own.
config:
  aws:region: us-east-1
  gpucluster:nodeGroups:
    - name: p5
      instanceType: p5.48xlarge
      imageSsmParameter: {P5}
      availabilityZones: [us-east-1a]
      maxSize: 2
    - name: dev  # a comment the lock keeps
      instanceType: g6e.2xlarge
      availabilityZones: [us-east-1a]
      imageSsmParameter: {DEV}
      maxSize: 1
  gpucluster:slurm:
    nodeGroups:
      - name: p5
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project with the stack ``lk``."""
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(PROJECT_DIR / name, tmp_path / name)
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.lk.yaml").write_text(STACK)
    return tmp_path


def _ssm(p5: str) -> Any:
    ssm = boto3.client("ssm", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    ssm.put_parameter(Name=P5, Value=p5, Type="String")
    ssm.put_parameter(Name=DEV, Value=AMI_D, Type="String")
    return ssm


def _lock(project: Path, ssm: Any, day: dt.date) -> None:
    assert run(argparse.Namespace(stack="lk", project_dir=str(project)), ssm=ssm, today=day) == 0


def _images(project: Path) -> dict[str, str]:
    _, config, _ = load_stack_config("lk", project)
    return {g.name: g.image.value for g in load_spec(config, stack="lk").cluster.node_groups}


@pytest.mark.slow  # three moto sessions, each locking or reading the stack
def test_the_lock_keeps_the_image_until_it_is_made_again(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file = project / "stacks" / "Pulumi.lk.yaml"
    with mock_aws():
        _lock(project, _ssm(AMI_A), dt.date(2026, 11, 1))
    text = stack_file.read_text()
    assert text.startswith("# A small Slurm stack") and "- name: dev  # a comment the lock keeps" in text
    assert f'imageId: {AMI_A}\n        ssmParameter: {P5}\n        lockedAt: "2026-11-01"' in text
    assert f"p5: image {AMI_A} from {P5}; was unpinned" in capsys.readouterr().out

    # Later (another day) the parameter names a new AMI: the stack keeps the locked one and the plan reads no
    # parameter for it (the plan of a locked stack: tests/tools/plan/test_diff.py::test_a_new_image_shows_the_roll).
    with mock_aws():
        _ssm(AMI_B)
        assert _images(project) == {"p5": AMI_A, "dev": AMI_D}

    # Locking again, another day, moves to the new AMI, replacing the block, and says what it was.
    with mock_aws():
        _lock(project, _ssm(AMI_B), dt.date(2026, 11, 20))
    text = stack_file.read_text()
    assert text.count("imageLock:") == 2 and AMI_A not in text and 'lockedAt: "2026-11-20"' in text
    assert f"p5: image {AMI_B} from {P5}; was {AMI_A} (locked 2026-11-01)" in capsys.readouterr().out
    assert _images(project) == {"p5": AMI_B, "dev": AMI_D}


def test_a_parameter_that_is_not_an_ami_is_refused_and_nothing_written(project: Path) -> None:
    before = (project / "stacks" / "Pulumi.lk.yaml").read_text()
    with mock_aws():
        ssm = _ssm("not-an-ami")
        with pytest.raises(CliError, match="/gpucluster/images/p5 holds 'not-an-ami', not an AMI id"):
            _lock(project, ssm, dt.date(2026, 11, 1))
    assert (project / "stacks" / "Pulumi.lk.yaml").read_text() == before


def test_the_plan_warns_about_an_unpinned_image() -> None:
    """Without a lock the plan says the image is read again at every deploy (the shipped stacks are unpinned)."""
    from gpucluster.config.checks.images import unpinned_images

    _, config, _ = load_stack_config("slurm-p5")
    found = unpinned_images(load_spec(config, stack="slurm-p5").spec)
    assert [(f.code, f.value) for f in found] == [("image-unpinned", ["p5", "dev"])]
    assert "node groups p5, dev read their SSM image parameter" in found[0].message
    assert "gpucluster images lock" in found[0].fix
