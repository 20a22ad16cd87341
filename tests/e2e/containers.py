"""pyxis and enroot built from the vendored release archives (``../shared/vendor``, checked against the sha256 pins of
``gpucluster/facts/containers.py``) for the container tests, and a tiny squashfs image.

The build is done once per machine and kept (``$GPUCLUSTER_CACHE``, default ``~/.cache/gpucluster``) under a key of
the three archives' sha256 and the Slurm headers' version, so another Slurm or another pin builds afresh; a machine
lock keeps two test processes from building at once. What it holds is the tree a node has under ``/usr/local``:
``bin/enroot*``, ``lib/enroot``, ``etc/enroot`` (enroot's sysconfdir), ``share/enroot/hooks.d`` (the optional hooks)
and ``lib/slurm/spank_pyxis.so``; a test binds a copy over ``/usr/local`` in its node's mount namespace.

:func:`container_node` is that node, started (the people harness's, ``people.py``: declared users alice 10001 and bob
10002 in a private mount namespace). Its ``/etc/slurm`` holds the rendered ``plugstack.conf`` and
``plugstack.conf.d/pyxis.conf``; its ``/usr/local`` is a copy of the built tree with the rendered ``enroot.conf`` and
hooks in enroot's sysconfdir (``/usr/local/etc/enroot`` here, ``/etc/enroot`` on a node); the layout's root (a node's
``/scratch/enroot`` or ``/run/enroot``) is a directory of the run, a tmpfs for the tmpfs layout; the container
prolog/epilog and the mount check are the node package's programs, named by the rendered wrappers. ``/dev/fuse`` is a
0666 node of the run (a node's is; this machine's is root's only). The image is a squashfs of a busybox root.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.facts.containers import ENROOT, MAKESELF, PYXIS, Source
from gpucluster.load import load_spec
from gpucluster.render.compute.node import NCCL_ENV_PATH
from gpucluster.render.core import env_file
from gpucluster.render.slurm.compute import task_prolog
from gpucluster.render.slurm.containers import (
    CONTAINER_JOB,
    ENROOT_EXTRA_HOOKS,
    JOB_PROGRAM,
    MOUNT_CHECK_PROGRAM,
    PYXIS_SO,
    ContainerLayout,
    container_files,
    plugstack_conf,
    slurmd_start_pre,
)
from gpucluster_agents.boot.containers import install
from gpucluster_agents.contract.containers import NCCL_ENV, TASK_PROLOG
from tests.conftest import IN_CI, ROOT, group, machine_lock, make_config, require_tool
from tests.e2e.people import PeopleNode, rendered_users_script
from tests.e2e.slurm_harness import SBATCH, SCONTROL, SLURMCTLD, SLURMD, run_dir

VENDOR = Path(os.environ.get("GPUCLUSTER_VENDOR", ROOT.parent / "shared" / "vendor"))
CACHE = Path(os.environ.get("GPUCLUSTER_CACHE", Path.home() / ".cache" / "gpucluster"))
ALICE, BOB = 10001, 10002
"""Declared users of the people harness (``tests/conftest.py: identity_declared_config``)."""
IMAGE_ID = "gpucluster-test-image"
BUILD_TOOLS = ("make", "gcc", "mksquashfs", "squashfuse", "fuse-overlayfs", "jq", "parallel", "zstd", "pigz", "column", "busybox")


def slurm_headers_version(include: Path = Path("/usr/include/slurm/slurm_version.h")) -> str:
    """The Slurm release whose ``spank.h`` pyxis compiles against (``SLURM_VERSION_NUMBER``, e.g. ``22.5.8``)."""
    if not include.exists():
        (pytest.fail if IN_CI else pytest.skip)(f"{include} is missing: .ci/run installs libslurm-dev")
    found = re.search(r"^#define SLURM_VERSION_NUMBER 0x([0-9a-f]+)$", include.read_text(), re.M)
    assert found, include
    number = int(found.group(1), 16)
    return f"{number >> 16}.{(number >> 8) & 0xFF}.{number & 0xFF}"


def checked_archive(source: Source) -> Path:
    """The vendored archive of ``source``, refused unless its sha256 is the pinned one."""
    path = VENDOR / source.archive
    if not path.exists():
        (pytest.fail if IN_CI else pytest.skip)(f"{path} is missing (the vendored sources, ../shared/vendor)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == source.archive_sha256, f"{path}: sha256 {digest}, pinned {source.archive_sha256}"
    return path


BUILD_VERSION = "2"
"""Bumped when the build itself changes (its key then names a new tree)."""


def build_key(root: Path = Path("/")) -> str:
    version = slurm_headers_version(root / "usr/include/slurm/slurm_version.h")
    parts = [BUILD_VERSION, *(s.archive_sha256 for s in (PYXIS, ENROOT, MAKESELF)), version]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _unpack(archive: Path, dest: Path, strip: bool = True) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    tops = list(dest.iterdir())
    return tops[0] if strip and len(tops) == 1 else dest


def _build(stage: Path, work: Path, root: Path) -> None:
    """Into ``stage``: enroot, and pyxis compiled against the ``spank.h`` of ``root``'s Slurm (only its Slurm headers:
    the C library's are this machine's, which links it)."""
    run = lambda *argv, cwd: subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True)  # noqa: E731
    enroot = _unpack(checked_archive(ENROOT), work / "enroot")
    makeself = _unpack(checked_archive(MAKESELF), work / "makeself")
    shutil.rmtree(enroot / "deps" / "makeself")
    shutil.copytree(makeself, enroot / "deps" / "makeself")
    (enroot / "deps" / "linux-headers" / ".stamp").touch()  # the system's kernel headers serve
    # Debian 12's glibc lacks strlcpy: libbsd's, linked statically (a plain -lbsd finds enroot's partial libbsd.a)
    libbsd = subprocess.run(["gcc", "-print-file-name=libbsd.so"], check=True, capture_output=True, text=True).stdout.strip()
    run("make", "-C", "deps", "FORCE_GLIBC=1", cwd=enroot)  # its own flags: the overrides below are the top's
    flags = ("FORCE_GLIBC=1", "prefix=/usr/local", "sysconfdir=/usr/local/etc")
    # built without DESTDIR (the Makefile writes DESTDIR into the paths enroot reads), installed with it
    run("make", *flags, "CFLAGS=-D_GNU_SOURCE -include bsd/string.h", f"LDLIBS=-l:libbsd.a {libbsd}", cwd=enroot)
    run("make", "install", *flags, f"DESTDIR={stage}", cwd=enroot)
    pyxis = _unpack(checked_archive(PYXIS), work / "pyxis")
    include = work / "slurm-include"
    include.mkdir()
    (include / "slurm").symlink_to(root / "usr/include/slurm")
    # the Makefile prepends its own flags to CPPFLAGS from the environment (one given to make would replace them)
    subprocess.run(["make"], cwd=pyxis, check=True, capture_output=True, text=True,
                   env={**os.environ, "CPPFLAGS": f"-I{include}"})  # fmt: skip
    (stage / "usr" / "local" / "lib" / "slurm").mkdir(parents=True, exist_ok=True)
    shutil.copy2(pyxis / "spank_pyxis.so", stage / "usr" / "local" / "lib" / "slurm" / "spank_pyxis.so")


def built_usr_local(root: Path = Path("/")) -> Path:
    """The cached ``/usr/local`` tree with enroot and pyxis for ``root``'s Slurm (built now if this key has none)."""
    for tool in BUILD_TOOLS:
        require_tool(tool)
    done = CACHE / "containers" / build_key(root)
    tree = done / "usr" / "local"
    with machine_lock("containers-build"):
        if not (done / ".done").exists():
            shutil.rmtree(done, ignore_errors=True)
            done.mkdir(parents=True)
            with tempfile.TemporaryDirectory(prefix="gc-containers-") as work:
                _build(done, Path(work), root)
            (done / ".done").touch()
    return tree


def busybox_image(dest: Path, marker: str) -> Path:
    """A squashfs image of a tiny root (busybox-static) holding ``/etc/os-release`` with ``marker`` (0644), and
    ``PYTORCH_VERSION`` in its environment, as a PyTorch image has."""
    root = dest.with_suffix(".root")
    (root / "bin").mkdir(parents=True)
    shutil.copy2(require_tool("busybox"), root / "bin" / "busybox")
    for applet in ("sh", "id", "cat", "env", "echo", "touch", "stat", "ls", "true", "mkdir", "sleep"):
        (root / "bin" / applet).symlink_to("busybox")
    for d in ("etc", "dev", "proc", "sys", "tmp", "run", "home", "mnt", "root", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release").write_text(f"ID={marker}\n")
    (root / "etc" / "os-release").chmod(0o644)
    (root / "etc" / "environment").write_text("PYTORCH_VERSION=2.5.0\n")  # what enroot's PyTorch hook looks for
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    subprocess.run(["mksquashfs", str(root), str(dest), "-noappend", "-all-root", "-quiet"], check=True, capture_output=True)
    dest.chmod(0o644)
    shutil.rmtree(root)
    return dest


def p5_task_prolog(work: Path) -> dict[str, str]:
    """A p5 group's TaskProlog (``render/slurm/compute.py: task_prolog``) and ``nccl.env``
    (``render/compute/node.py``) written into the run dir, the prolog reading that file: what gives every task of a
    node its NCCL/EFA settings. Returns those settings."""
    slurm = load_spec(make_config(group(name="p5"), slurm={"nodeGroups": [{"name": "p5"}]}), stack="cont").cluster.slurm
    assert slurm is not None
    env = dict(slurm.node_groups[0].nccl_env)
    assert env, "a p5 group has NCCL settings"
    (work / "nccl.env").write_text(env_file(env))
    prolog = work / "task-prolog"
    prolog.write_text(task_prolog(slurm.node_groups[0]).replace(NCCL_ENV_PATH, str(work / "nccl.env")))
    prolog.chmod(0o755)
    return env


class ContainerNode:
    """The people node with pyxis and enroot, and the run's files; ``nccl_env``: the settings its TaskProlog gives."""

    def __init__(self, work: Path, node: PeopleNode, image: Path, nccl_env: dict[str, str]) -> None:
        self.work, self.node, self.image, self.nccl_env = work, node, image, nccl_env
        self.started = False
        self.enroot_etc = work / "usr-local" / "etc" / "enroot"
        self.prolog = work / "prolog.d" / Path(CONTAINER_JOB).name

    def use(self, layout: ContainerLayout) -> None:
        """The container files of ``layout`` as the node writes them (``gpucluster_agents.boot.containers`` on a
        scratch root), relocated where this node reads them; read afresh by every job. Once the node runs, only
        when it is idle: a job's epilog (pyxis's removes its containers as enroot.conf says) reads them too."""
        if self.started:
            self.wait_idle()
        sysroot = self.work / "sysroot"
        shutil.rmtree(sysroot, ignore_errors=True)
        install(layout.root, layout.cache_budget_mib, str(sysroot))
        assert {f.path: f.text() for f in container_files(layout)} == {
            "/" + str(p.relative_to(sysroot)): p.read_text() for p in sysroot.rglob("*") if p.is_file() and not p.is_symlink()
        }  # the rendered files (the goldens') are what the node writes
        for made in sysroot.rglob("*"):
            if made.is_dir():
                continue
            path = "/" + str(made.relative_to(sysroot))
            if path.startswith("/etc/enroot/"):
                dest = self.enroot_etc / path.removeprefix("/etc/enroot/")
            elif path == CONTAINER_JOB:
                dest = self.prolog
            else:
                dest = self.node.dir / "etc-slurm" / path.removeprefix("/etc/slurm/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.unlink(missing_ok=True)
            if made.is_symlink():  # enroot's own hooks, under this build's prefix
                dest.symlink_to(
                    str(made.readlink()).replace(ENROOT_EXTRA_HOOKS, ENROOT_EXTRA_HOOKS.replace("/usr/", "/usr/local/", 1))
                )
                continue
            text = made.read_text().replace(JOB_PROGRAM, str(self.work / "bin" / "containers-job.sh"))
            text = text.replace(TASK_PROLOG, str(self.work / "task-prolog")).replace(NCCL_ENV, str(self.work / "nccl.env"))
            dest.write_text(text.replace(MOUNT_CHECK_PROGRAM, str(self.work / "bin" / "enroot-mount-check.sh")))
            dest.chmod(made.stat().st_mode & 0o777)

    def wait_idle(self) -> None:
        """Until the node has no job, the epilog included (COMPLETING ends after it)."""
        slurm = self.node.slurm
        slurm.wait("node idle", lambda: slurm.node(self.node.node).get("State") == "IDLE", 60, 0.05)

    def srun(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.node.as_user("alice", "srun", "-N1", "--chdir=/tmp", *args, timeout=timeout)


TRIXIE_NEEDS = ("usr/sbin/slurmctld", "usr/sbin/slurmd", "usr/sbin/munged", "usr/bin/srun", "usr/sbin/runuser",
                "usr/bin/setpriv", "usr/include/slurm/spank.h", "usr/bin/mksquashfs", "usr/bin/unsquashfs",
                "usr/bin/fuse-overlayfs", "usr/bin/squashfuse", "usr/bin/jq", "usr/bin/parallel", "usr/bin/zstd",
                "usr/bin/pigz", "usr/bin/column", "usr/lib/x86_64-linux-gnu/libbsd.so.0")  # fmt: skip
"""What a 24.11 container node needs in the trixie root: Slurm, munge, the enroot runtime's programs, the headers."""


def _node_dev(root: Path, work: Path) -> Path:
    """A copy of ``root``'s ``/dev`` (debootstrap's few nodes) with a 0666 ``fuse``, to bind over it."""
    dev = work / "dev"
    dev.mkdir()
    subprocess.run(["cp", "-a", f"{root}/dev/.", f"{dev}/"], check=True)
    subprocess.run(["mknod", "-m", "0666", str(dev / "fuse"), "c", "10", "229"], check=True)
    return dev


@contextlib.contextmanager
def container_node(root: Path | None = None) -> Iterator[ContainerNode]:
    """A started node with pyxis, enroot and the rendered files (the NVMe layout, a 64 MiB cache budget): Slurm 22.05
    of this machine, or with ``root`` the Slurm of that root (trixie's 24.11), made the node's root with ``pivot_root``
    (``chroot`` would forbid enroot's user namespaces). The run dir is bound into the root at its own path, so the node
    and the test name every file alike."""
    for tool in (SLURMCTLD, SLURMD, SCONTROL, SBATCH, "srun", "unshare", "nsenter", "setpriv", "mknod"):
        require_tool(tool)
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("slurmd, bind mounts and /dev/fuse need root here")
    built = built_usr_local(root or Path("/"))
    work = run_dir("gccont-")
    work.chmod(0o755)
    seen = None if root is None else root / work.relative_to("/")
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
    nccl_env = p5_task_prolog(work)
    if root is None:  # 24.11's slurmstepd cannot run a TaskProlog in a container (docs/containers.md)
        conf["TaskProlog"] = str(work / "task-prolog")
    binds = {Path("/usr/local"): work / "usr-local", Path("/dev/fuse"): work / "fuse"}
    if root is not None and seen is not None:
        seen.mkdir()
        binds = {root / "usr/local": work / "usr-local", root / "dev": _node_dev(root, work), seen: work}
    node = PeopleNode(rendered_users_script(work), root=root, conf=conf, extra_binds=binds, pivot=True, subreaper=True)
    try:
        slurm_etc = node.dir / "etc-slurm"
        (slurm_etc / "plugstack.conf").write_text(plugstack_conf())
        cn = ContainerNode(work, node, image, nccl_env)
        nvme = ContainerLayout(str(work / "nvme" / "enroot"), False, 64)
        cn.use(nvme)
        assert (slurm_etc / "plugstack.conf.d" / "pyxis.conf").read_text().splitlines()[-1].startswith(f"required {PYXIS_SO}")
        try:
            for layout in (nvme, ContainerLayout(str(work / "tmpfs" / "enroot"), True, 64)):
                pre = slurmd_start_pre(layout)[-1].removeprefix("ExecStartPre=")
                subprocess.run(shlex.split(pre), check=True)  # what slurmd's drop-in runs first
            node.start()
            cn.started = True
        except AssertionError as e:
            logs = "".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (node.dir / "log").glob("slurmd*"))
            raise AssertionError(logs) from e
        yield cn
    finally:
        node.stop()
        subprocess.run(["umount", "-l", str(work / "tmpfs")], check=False)
        shutil.rmtree(work, ignore_errors=True)
        if seen is not None:
            with contextlib.suppress(OSError):
                seen.rmdir()
