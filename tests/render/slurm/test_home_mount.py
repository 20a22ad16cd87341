"""The shared /home mount: the fstab line exact, nosuid,nodev required, the script idempotent and failing closed (run
with stand-ins for mount and mountpoint: there is no NFS server here)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpucluster.render.slurm.home import HomeMount, home_mount_script, requires_home

HOME = HomeMount("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com")


def test_fstab_entry():
    assert HOME.fstab_entry() == (
        "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com:/fsx/home /home nfs4 nfsvers=4.1,nosuid,nodev,_netdev 0 0"
    )


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("options", "nfsvers=4.1,_netdev", "lack nosuid,nodev"),
        ("server", "a b", "cannot hold"),
        ("path", "/x\n/y", "cannot hold"),
    ],
)
def test_bad_values_are_refused(field, value, fragment):
    with pytest.raises(ValueError, match=fragment):
        HomeMount(**{"server": HOME.server, field: value}).fstab_entry()


def run(tmp_path: Path, mount_rc: int) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (
        ("mount", f"echo mount $* >>{tmp_path}/calls; exit {mount_rc}"),
        ("mountpoint", "exit 1"),
        ("sleep", "exit 0"),
        ("mkdir", '[ "$2" = /home ] && exit 0; exec /bin/mkdir "$@"'),
    ):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = tmp_path / "mount-home"
    script.write_text(home_mount_script(HOME))
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GPUCLUSTER_FSTAB": str(tmp_path / "fstab"),
        "GPUCLUSTER_LOG": str(tmp_path / "log"),
    }
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False)


def test_script_adds_one_fstab_line_and_mounts(tmp_path):
    (tmp_path / "fstab").write_text("LABEL=root / ext4 defaults 0 1\n")
    for _ in range(2):
        assert run(tmp_path, 0).returncode == 0
    assert (tmp_path / "fstab").read_text().splitlines() == ["LABEL=root / ext4 defaults 0 1", HOME.fstab_entry()]
    assert (tmp_path / "calls").read_text().splitlines() == ["mount /home", "mount /home"]


def test_script_fails_closed(tmp_path):
    (tmp_path / "fstab").write_text("")
    result = run(tmp_path, 32)
    assert result.returncode == 1
    assert len((tmp_path / "calls").read_text().splitlines()) == 30  # every try, then the failure


def test_slurm_daemons_require_home():
    drop_in = requires_home("sackd.service", HOME)
    assert drop_in.path == "/etc/systemd/system/sackd.service.d/gpucluster-home.conf"
    assert "RequiresMountsFor=/home" in drop_in.text()


def test_head_and_compute_mount_home_before_users_and_slurm():
    import dataclasses

    from gpucluster.render.slurm.compute import node_slurm_part
    from gpucluster.render.slurm.head import head_files
    from gpucluster.render.slurm.identity import USERS_UNIT
    from tests.render.identity_cases import DECLARED
    from tests.render.slurm.test_identity_render import context, head_doc

    ctx = context(DECLARED)
    compute = {f.path: f.text() for f in node_slurm_part(ctx, ctx.node_groups[0], HOME).write_files}
    setup = compute["/usr/local/sbin/gpucluster-slurm-node"]
    order = [setup.index(s) for s in ("gpucluster-mount-home", f"enable --now {USERS_UNIT}", "enable --now slurmd")]
    assert order == sorted(order)
    assert "RequiresMountsFor=/home" in compute["/etc/systemd/system/slurmd.service.d/gpucluster-home.conf"]
    assert "/usr/local/sbin/gpucluster-mount-home" not in {f.path for f in node_slurm_part(ctx, ctx.node_groups[0]).write_files}

    doc_files = {f["path"] for f in head_doc(DECLARED)["write_files"]}
    assert "/usr/local/sbin/gpucluster-mount-home" not in doc_files  # no home given: none
    from gpucluster.render.slurm.agent import AgentBundle, LaunchTarget, agent_config
    from gpucluster.render.slurm.head import HeadInputs

    targets = {g.name: LaunchTarget("lt-0123456789abcdef0", ("subnet-0",)) for g in ctx.node_groups}
    given = HeadInputs("vol-0", AgentBundle("b", "k", "0" * 64), agent_config(ctx, targets), home=HOME)
    head = {f.path: f.text() for f in head_files(dataclasses.replace(ctx), given)}
    setup = head["/usr/local/sbin/gpucluster-slurm-head"]
    assert setup.index("gpucluster-mount-home") < setup.index("enable --now slurmctld")
    assert "RequiresMountsFor=/home" in head["/etc/systemd/system/slurmctld.service.d/gpucluster-home.conf"]


def test_compute_user_data_sizes_and_names_home_by_a_stand_in():
    """With slurm.home, the compute user data (and so the 16 KB check) carries the home mount with a stand-in DNS name
    of the real one's length; SlurmCluster swaps the real name in."""
    from gpucluster.load import load_spec
    from gpucluster.render.compute.user_data import scheduler_part, user_data_findings
    from gpucluster.render.slurm.home import home_stand_in, with_home_server
    from tests.conftest import group, make_config

    people = {"groups": [{"name": "llm", "gid": 5002}], "users": [{"name": "bob", "uid": 10002, "groups": ["llm"]}]}
    cluster = load_spec(make_config(group(name="p5", maxSize=2), slurm={"identity": people}), stack="home").cluster
    assert cluster.slurm is not None and cluster.slurm.home is not None
    files = {f.path: f.text() for f in scheduler_part(cluster, cluster.node_groups[0]).write_files}
    stand_in = home_stand_in(cluster.region).server
    assert stand_in in files["/usr/local/sbin/gpucluster-mount-home"]
    assert len(stand_in) == len(HOME.server)
    assert user_data_findings(cluster) == []
    real = with_home_server(files["/usr/local/sbin/gpucluster-mount-home"], cluster.region, HOME.server)
    assert HOME.fstab_entry() in real and stand_in not in real
    with pytest.raises(ValueError, match="cannot hold"):
        with_home_server("", cluster.region, "fs-1 x")
