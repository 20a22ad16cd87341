"""Containers in Slurm jobs end to end: real slurmctld and slurmd (22.05), pyxis and enroot built from the vendored
releases (``tests/e2e/containers.py``), and the files gpucluster renders for a node (``render/slurm/containers.py``).

The node is the people harness's (``people.py``: declared users alice 10001 and bob 10002 in a private mount
namespace). Its ``/etc/slurm`` holds the rendered ``plugstack.conf`` and ``plugstack.conf.d/pyxis.conf``; its
``/usr/local`` is a copy of the built tree with the rendered ``enroot.conf`` and hooks in enroot's sysconfdir
(``/usr/local/etc/enroot`` here, ``/etc/enroot`` on a node); the layout's root (a node's ``/scratch/enroot`` or
``/run/enroot``) is a directory of the run, a tmpfs for the tmpfs layout; the container prolog/epilog and mount check
are the node package's programs, named by the rendered wrappers. ``/dev/fuse`` is a 0666 node of the run (a node's
is; this machine's is root's only). Jobs run as alice with ``runuser``; the image is a squashfs of a busybox root.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.render.slurm.containers import (
    CONTAINER_JOB,
    ENROOT_EXTRA_HOOKS,
    JOB_PROGRAM,
    MOUNT_CHECK_PROGRAM,
    PYXIS_SO,
    TRAINING_HOOKS,
    ContainerLayout,
    container_files,
    job_files,
    plugstack_conf,
    slurmd_start_pre,
)
from tests.conftest import IN_CI, ROOT, require_tool
from tests.e2e.containers import built_usr_local, busybox_image
from tests.e2e.people import RUNUSER, PeopleNode, rendered_users_script
from tests.e2e.slurm_harness import SBATCH, SCONTROL, SLURMCTLD, SLURMD, run_dir

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("containers-e2e")]

ALICE, BOB = 10001, 10002
IMAGE_ID = "gpucluster-test-image"


class ContainerNode:
    """The people node with pyxis and enroot, and the run's files."""

    def __init__(self, work: Path, node: PeopleNode, image: Path) -> None:
        self.work, self.node, self.image = work, node, image
        self.enroot_etc = work / "usr-local" / "etc" / "enroot"
        self.prolog = work / "prolog.d" / Path(CONTAINER_JOB).name

    def use(self, layout: ContainerLayout) -> None:
        """The rendered enroot files and container prolog of ``layout`` (read afresh by every job)."""
        files = {f.path: f.text() for f in (*container_files(layout), *job_files(layout))}
        for path, text in files.items():
            text = text.replace(JOB_PROGRAM, str(self.work / "bin" / "containers-job.sh"))
            text = text.replace(MOUNT_CHECK_PROGRAM, str(self.work / "bin" / "enroot-mount-check.sh"))
            if path.startswith("/etc/enroot/"):
                dest = self.enroot_etc / path.removeprefix("/etc/enroot/")
            elif path == CONTAINER_JOB:
                dest = self.prolog
            else:
                dest = self.node.dir / "etc-slurm" / path.removeprefix("/etc/slurm/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
            dest.chmod(0o755 if "hooks.d" in path or path == CONTAINER_JOB else 0o644)
        for hook in TRAINING_HOOKS:  # what the node's setup links (relocated with enroot's prefix)
            link = self.enroot_etc / "hooks.d" / hook
            link.unlink(missing_ok=True)
            link.symlink_to(ENROOT_EXTRA_HOOKS.replace("/usr/", "/usr/local/", 1) + "/" + hook)

    def srun(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.node.as_user("alice", "srun", "-N1", "--chdir=/tmp", *args, timeout=timeout)


@pytest.fixture(scope="module")
def cnode() -> Iterator[ContainerNode]:
    for tool in (SLURMCTLD, SLURMD, SCONTROL, SBATCH, "srun", "unshare", "nsenter", "setpriv", "mknod"):
        require_tool(tool)
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("slurmd, bind mounts and /dev/fuse need root here")
    built = built_usr_local()
    work = run_dir("gccont-")
    work.chmod(0o755)
    shutil.copytree(built, work / "usr-local", symlinks=True)
    (work / "bin").mkdir()
    for name in ("containers-job.sh", "enroot-mount-check.sh"):
        shutil.copy2(ROOT / "gpucluster_agents" / "boot" / name, work / "bin" / name)
    (work / "prolog.d").mkdir()
    (work / "tmpfs").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=64m", "gccont", str(work / "tmpfs")], check=True)
    subprocess.run(["mknod", "-m", "0666", str(work / "fuse"), "c", "10", "229"], check=True)
    image = busybox_image(work / "image.sqsh", IMAGE_ID)
    conf = {
        "Prolog": f"{work}/prolog.d/*",
        "Epilog": str(work / "prolog.d" / Path(CONTAINER_JOB).name),
        "PrologFlags": "Alloc,Contain",
    }
    binds = {Path("/usr/local"): work / "usr-local", Path("/dev/fuse"): work / "fuse"}
    node = PeopleNode(rendered_users_script(work), conf=conf, extra_binds=binds)
    try:
        slurm_etc = node.dir / "etc-slurm"
        (slurm_etc / "plugstack.conf").write_text(plugstack_conf())
        cn = ContainerNode(work, node, image)
        nvme = ContainerLayout(str(work / "nvme" / "enroot"), False, 64)
        cn.use(nvme)
        assert (slurm_etc / "plugstack.conf.d" / "pyxis.conf").read_text().splitlines()[-1].startswith(f"required {PYXIS_SO}")
        try:
            for layout in (nvme, ContainerLayout(str(work / "tmpfs" / "enroot"), True, 64)):
                pre = slurmd_start_pre(layout)[-1].removeprefix("ExecStartPre=")
                subprocess.run(shlex.split(pre), check=True)  # what slurmd's drop-in runs first
            node.start()
        except AssertionError as e:
            logs = "".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (node.dir / "log").glob("slurmd*"))
            raise AssertionError(logs) from e
        yield cn
    finally:
        node.stop()
        subprocess.run(["umount", "-l", str(work / "tmpfs")], check=False)
        shutil.rmtree(work, ignore_errors=True)


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
    assert Path("/etc/munge").is_dir() and Path("/etc/munge").stat().st_mode & 0o077 == 0  # munge's own, 0700
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


def wait_idle(cnode: ContainerNode) -> None:
    """Until the node has no job, the epilog included (COMPLETING ends after it)."""
    cnode.node.slurm.wait("node idle", lambda: cnode.node.slurm.node(cnode.node.node).get("State") == "IDLE", 60)


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
            data = root / "data" / f"user-{ALICE}"
            cnode.node.slurm.wait("the job's container", lambda: any(data.glob("pyxis_*")), 30, 0.1)
            for d in user_dirs(root, ALICE):
                st = d.stat()
                assert (st.st_mode & 0o777, st.st_uid) == (0o700, ALICE), d
                parent = d.parent.stat()
                assert (parent.st_mode & 0o777, parent.st_uid) == (0o755, 0), d.parent
            assert all(p.name.startswith("pyxis_") for p in data.iterdir())
            _, err = srun.communicate(timeout=60)
        assert srun.returncode == 0, err
        wait_idle(cnode)
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
        for i, age in enumerate((3000, 2000, 1000)):  # three 512 KiB layers, the first the least recently used
            layer = cache / f"sha256:{i}"
            layer.write_bytes(b"\0" * 512 * 1024)
            os.utime(layer, (now - age, now - age))
        proc = cnode.srun("true")
        assert proc.returncode == 0, proc.stderr
        wait_idle(cnode)
        assert sorted(p.name for p in cache.iterdir()) == ["sha256:2"]  # 1.5 MiB -> under 1 MiB: the oldest two went
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
