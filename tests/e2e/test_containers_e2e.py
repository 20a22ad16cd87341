"""Containers in Slurm jobs end to end, on both Slurm releases the tests run: real slurmctld and slurmd (22.05 of
this machine, and 24.11 of the trixie root), pyxis built against each release's headers and enroot from the vendored
releases, and the files gpucluster renders for a node (``render/slurm/containers.py``), all set up by
``tests/e2e/containers.py: container_node``. Jobs run as the declared user alice with ``runuser``."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.render.slurm.containers import ContainerLayout
from tests.e2e.containers import ALICE, BOB, IMAGE_ID, TRIXIE_NEEDS, ContainerNode, container_node
from tests.e2e.people import RUNUSER
from tests.e2e.slurm_harness import SLURMD
from tests.render.slurm_versions import TRIXIE_VERSION
from tests.render.trixie_overlay import trixie_with

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("containers-e2e")]


@pytest.fixture(scope="module", params=["22.05", TRIXIE_VERSION])
def cnode(request: pytest.FixtureRequest) -> Iterator[ContainerNode]:
    root = None if request.param == "22.05" else trixie_with(*TRIXIE_NEEDS)
    with container_node(root) as node:
        version = node.node.slurm.run(SLURMD, "-V")
        assert version.stdout.split()[-1].startswith(request.param), version.stdout
        yield node


def test_a_job_runs_in_the_image_as_its_user(cnode: ContainerNode):
    proc = cnode.srun(f"--container-image={cnode.image}", "sh", "-c", "id -u; cat /etc/os-release")
    assert proc.returncode == 0, proc.stderr + cnode.node.slurm.debug(("slurmctld.log",))
    assert proc.stdout.split() == [str(ALICE), f"ID={IMAGE_ID}"]


def test_a_readable_mount_works_and_unreadable_ones_are_refused(cnode: ContainerNode):
    mine = cnode.work / "alice-data"
    mine.mkdir(mode=0o700, exist_ok=True)
    os.chown(mine, ALICE, ALICE)
    (mine / "note").write_text("hello\n")
    os.chown(mine / "note", ALICE, ALICE)
    proc = cnode.srun(f"--container-image={cnode.image}", f"--container-mounts={mine}:/data", "cat", "/data/note")
    assert proc.returncode == 0 and proc.stdout == "hello\n", proc.stderr
    bob_home = cnode.work / "home-bob"
    bob_home.mkdir(mode=0o700, exist_ok=True)
    os.chown(bob_home, BOB, BOB)
    munge = (cnode.node.root or Path("/")) / "etc/munge"
    assert munge.is_dir() and munge.stat().st_mode & 0o077 == 0  # munge's own, 0700, on the node
    for source in ("/etc/munge", str(bob_home)):
        proc = cnode.srun(f"--container-image={cnode.image}", f"--container-mounts={source}:/x", "ls", "/x")
        assert proc.returncode != 0, proc.stdout
        assert f"gpucluster: container mount {source} refused: alice cannot read it here" in proc.stderr, proc.stderr


def test_remap_root_is_root_of_nothing_on_the_host(cnode: ContainerNode):
    mine = cnode.work / "alice-remap"
    mine.mkdir(mode=0o700, exist_ok=True)
    os.chown(mine, ALICE, ALICE)
    script = "id -u; touch /data/made-as-root; cat /host-etc/shadow >/dev/null 2>&1 && echo shadow-read || echo no-shadow"
    proc = cnode.srun(
        f"--container-image={cnode.image}", "--container-remap-root", f"--container-mounts={mine}:/data,/etc:/host-etc",
        "sh", "-c", script,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "no-shadow"]  # "root" inside, and the host's shadow stays unreadable
    made = (mine / "made-as-root").stat()
    assert (made.st_uid, made.st_gid) == (ALICE, ALICE)  # owned by alice on the host


def test_the_pytorch_hook_gives_each_task_its_rank(cnode: ContainerNode):
    proc = cnode.srun(
        "-n2", "--overcommit", f"--container-image={cnode.image}", "sh", "-c", 'echo "$RANK $WORLD_SIZE $MASTER_ADDR"'
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == [f"0 2 {cnode.node.node}", f"1 2 {cnode.node.node}"]


def test_the_nodes_nccl_settings_reach_the_task_in_the_container(cnode: ContainerNode):
    """The node's TaskProlog (a p5 group's) and the nccl.env it reads are bound into every container by the rendered
    enroot mounts: slurmstepd runs the TaskProlog inside the container, after pyxis entered it, and sets what it
    prints in the task's environment, beside the image's own. On 24.11 the node runs no TaskProlog (slurmstepd
    runs it through itself, which cannot load inside an image: docs/containers.md); the settings are still there."""
    inside = cnode.srun(f"--container-image={cnode.image}", "cat", str(cnode.work / "nccl.env"))
    assert inside.returncode == 0, inside.stderr
    assert dict(line.split("=", 1) for line in inside.stdout.splitlines()) == cnode.nccl_env
    proc = cnode.srun(f"--container-image={cnode.image}", "env")
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert seen["PYTORCH_VERSION"] == "2.5.0"  # the image's environment (its /etc/environment) kept
    expected = cnode.nccl_env if cnode.node.root is None else dict.fromkeys(cnode.nccl_env)
    assert {k: seen.get(k) for k in cnode.nccl_env} == expected


def user_dirs(root: Path, uid: int) -> list[Path]:
    return [root / d / f"user-{uid}" for d in ("runtime", "data", "cache", "tmp")]


@pytest.mark.parametrize("kind", ["nvme", "tmpfs"])
def test_per_user_dirs_are_private_during_the_job_and_gone_after_it(cnode: ContainerNode, kind: str):
    root = cnode.work / kind / "enroot"
    cnode.use(ContainerLayout(str(root), kind == "tmpfs", 64))
    try:
        argv = ["srun", "-N1", "--chdir=/tmp", f"--container-image={cnode.image}", "--container-name=keep", "sleep", "3"]
        with subprocess.Popen(
            cnode.node.slurm.wrap(RUNUSER, "-u", "alice", "--", *argv), env=cnode.node.slurm.env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ) as srun:  # fmt: skip
            try:
                data = root / "data" / f"user-{ALICE}"
                cnode.node.slurm.wait("the job's container", lambda: any(data.glob("pyxis_*")), 30, 0.1)
                for d in user_dirs(root, ALICE):
                    st = d.stat()
                    assert (st.st_mode & 0o777, st.st_uid) == (0o700, ALICE), d
                    parent = d.parent.stat()
                    assert (parent.st_mode & 0o777, parent.st_uid) == (0o755, 0), d.parent
                assert all(p.name.startswith("pyxis_") for p in data.iterdir())
                _, err = srun.communicate(timeout=60)
            except BaseException:
                srun.kill()  # else leaving the with block waits for it
                raise
        assert srun.returncode == 0, err
        cnode.wait_idle()
        assert [d for d in user_dirs(root, ALICE) if d.exists() and d.parent.name != "cache"] == []
        if kind == "tmpfs":
            assert (
                subprocess.run(
                    ["findmnt", "-no", "FSTYPE", str(cnode.work / "tmpfs")], capture_output=True, text=True
                ).stdout.strip()
                == "tmpfs"
            )
    finally:
        cnode.use(ContainerLayout(str(cnode.work / "nvme" / "enroot"), False, 64))


def test_the_epilog_keeps_the_layer_cache_under_its_budget(cnode: ContainerNode):
    root = cnode.work / "nvme" / "enroot"
    cnode.use(ContainerLayout(str(root), False, 1))  # 1 MiB
    try:
        cache = root / "cache" / f"user-{BOB}"
        cache.mkdir(parents=True, exist_ok=True)
        now = time.time()
        # three 600 KiB layers, the first the least recently used (600 KiB, not 512: whether du counts the directories
        # differs between coreutils releases, and no boundary case depends on it)
        for i, age in enumerate((3000, 2000, 1000)):
            layer = cache / f"sha256:{i}"
            layer.write_bytes(b"\0" * 600 * 1024)
            os.utime(layer, (now - age, now - age))
        proc = cnode.srun("true")
        assert proc.returncode == 0, proc.stderr
        cnode.wait_idle()
        assert sorted(p.name for p in cache.iterdir()) == ["sha256:2"]  # 1.8 MiB -> under 1 MiB: the oldest two went
    finally:
        cnode.use(ContainerLayout(str(root), False, 64))


def test_a_node_without_the_pyxis_drop_in_runs_jobs_through_the_same_plugstack(cnode: ContainerNode):
    """The rendered plugstack.conf's include matches nothing on a node without pyxis: srun and slurmstepd read it
    and run a plain job; pyxis's options are then unknown. (slurmctld started on it in the fixture.)"""
    drop_in = cnode.node.dir / "etc-slurm" / "plugstack.conf.d" / "pyxis.conf"
    kept = drop_in.read_text()
    drop_in.unlink()
    try:
        proc = cnode.srun("id", "-u")
        assert proc.returncode == 0 and proc.stdout.split() == [str(ALICE)], proc.stderr
        proc = cnode.srun(f"--container-image={cnode.image}", "true")
        assert proc.returncode != 0 and "unrecognized option" in proc.stderr, proc.stderr
    finally:
        drop_in.write_text(kept)
