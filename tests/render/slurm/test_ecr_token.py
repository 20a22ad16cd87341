"""How an unprivileged user's enroot pulls from the named ECR repositories (``render/slurm/registries.py``): root's
token program run for real against moto's ECR, its token file readable by users; the credentials lines read by
enroot's own netrc evaluation (from the vendored enroot source) give enroot user ``AWS`` and that token; the node's
files and timer only when a group runs containers with registries."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from gpucluster.load import load_spec
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.names import NODE_SETUP, SlurmContext
from gpucluster.render.slurm.registries import CREDENTIALS, ECR_TOKEN_TIMER, TOKEN_PROGRAM, credentials_lines, ecr_files
from tests.conftest import IN_CI, group, make_config, require_tool

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
REGISTRIES = (f"{ECR}/team-a/train", f"{ECR}/shared/*", "210987654321.dkr.ecr.eu-west-2.amazonaws.com/base")
VENDOR = Path(os.environ.get("GPUCLUSTER_VENDOR", Path(__file__).resolve().parents[3].parent / "shared" / "vendor"))


@pytest.mark.slow  # a moto server
def test_the_token_program_writes_a_token_per_region_users_can_read(moto_endpoint, tmp_path: Path):
    files = {f.path: f for f in ecr_files(REGISTRIES)}
    program = tmp_path / "token.sh"
    program.write_text(files[TOKEN_PROGRAM].content)
    out = tmp_path / "ecr"
    env = {**os.environ, "AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "GPUCLUSTER_ECR_TOKEN_DIR": str(out),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # fmt: skip
    done = subprocess.run(["bash", str(program)], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["eu-west-2", "us-east-1"]  # no temporary file left
    ecr = boto3.client("ecr", region_name="us-east-1", endpoint_url=moto_endpoint, aws_access_key_id="testing",
                       aws_secret_access_key="testing")  # fmt: skip
    expected = base64.b64decode(ecr.get_authorization_token()["authorizationData"][0]["authorizationToken"]).decode()
    assert expected.startswith("AWS:")
    token = (out / "us-east-1").read_text().strip()
    assert token and expected.endswith(token)
    assert stat.S_IMODE((out / "us-east-1").stat().st_mode) == 0o644


def test_enroot_reads_the_credentials_lines_as_user_aws_with_the_token(tmp_path: Path):
    archive = VENDOR / "enroot-4.1.2.tar.gz"
    if not archive.is_file():
        (pytest.fail if IN_CI else pytest.skip)(f"{archive} is missing")
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(tmp_path)], check=True)
    lines = credentials_lines(REGISTRIES)
    assert lines.splitlines() == [
        f"machine {ECR} login AWS password $(cat /run/gpucluster/ecr/us-east-1)",
        "machine 210987654321.dkr.ecr.eu-west-2.amazonaws.com login AWS password $(cat /run/gpucluster/ecr/eu-west-2)",
    ]
    tokens = tmp_path / "ecr"
    tokens.mkdir()
    (tokens / "us-east-1").write_text("tok-east\n")
    (tokens / "eu-west-2").write_text("tok-west\n")
    creds = tmp_path / ".credentials"
    creds.write_text(lines.replace("/run/gpucluster/ecr", str(tokens)))
    # enroot's own evaluation of the file (src/common.sh common::evalnetrc), as it runs before a pull
    script = f"source {tmp_path}/enroot-4.1.2/src/common.sh; common::evalnetrc {creds}"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"machine {ECR} login AWS password tok-east",
        "machine 210987654321.dkr.ecr.eu-west-2.amazonaws.com login AWS password tok-west",
    ]


def _setup_and_paths(**containers) -> tuple[str, set[str]]:
    cluster = load_spec(make_config(group(name="p5"), slurm={"containers": containers}), stack="s").cluster
    assert cluster.slurm is not None
    (g,) = cluster.slurm.node_groups
    part = node_slurm_part(SlurmContext.of(cluster), g)
    return next(f.content for f in part.write_files if f.path == NODE_SETUP), {f.path for f in part.write_files}


def test_nodes_get_the_token_timer_only_with_registries(tmp_path: Path):
    setup, paths = _setup_and_paths(registries=list(REGISTRIES))
    assert {TOKEN_PROGRAM, CREDENTIALS, f"/etc/systemd/system/{ECR_TOKEN_TIMER}"} <= paths
    assert f"systemctl enable --now {ECR_TOKEN_TIMER}" in setup
    assert setup.index(ECR_TOKEN_TIMER) < setup.index("systemctl enable --now slurmd")
    for off in ({}, {"registries": list(REGISTRIES), "enabled": False}):
        setup, paths = _setup_and_paths(**off)
        assert ECR_TOKEN_TIMER not in setup and TOKEN_PROGRAM not in paths
    program = tmp_path / "token.sh"
    program.write_text({f.path: f for f in ecr_files(REGISTRIES)}[TOKEN_PROGRAM].content)
    check = subprocess.run([require_tool("shellcheck"), "-s", "bash", "-S", "warning", str(program)],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout
