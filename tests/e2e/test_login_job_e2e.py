"""A job submitted by a declared user from a login node runs as that user (docs/people.md).

Two namespaces of the shared Slurm harness (``people.py``) see the same declared users (the users script's passwd
and group on a temp root): the compute node (slurmctld + slurmd) and a login node with no slurm.conf of its own.
``alice`` (declared uid 10001, gid 10001) submits there with ``runuser -u alice -- sbatch`` and ``srun``:

- 22.05 (this machine): the client reads a copy of the cluster's slurm.conf through ``SLURM_CONF``, as a login node
  without sackd would;
- 24.11 (trixie root): the rendered login unit's ``sackd -D --conf-server <controller>`` (pointed at 127.0.0.1:<port>) fetches the configuration from the test slurmctld
  (``SlurmctldParameters=enable_configless``) into the login namespace's own ``/run/slurm/conf``, and the client,
  with no ``SLURM_CONF`` and no ``/etc/slurm/slurm.conf``, reads it from there (configless login nodes).

The job's ``id -u``/``id -g`` and its output file's owner are the declared ids. ``srun``'s I/O comes back through
the listener it opens in ``SrunPortRange``: while the step runs, every port srun listens on lies in the range.

The slurm.conf is the harness's with ``SrunPortRange`` (a free range of this machine, not the rendered 60001-63000,
which other runs may hold); the rendered login configuration is checked by i21-render's tests.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.render.slurm.login import sackd_unit
from tests.conftest import IN_CI, require_tool
from tests.e2e.namespace import MountNamespace
from tests.e2e.people import RUNUSER, PeopleNode, rendered_users_script, trixie_root_or_skip
from tests.e2e.slurm_harness import SBATCH, SCONTROL, SLURMCTLD, SLURMD, marked_pids

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("people-login-job")]  # one worker builds each version's cluster once

ALICE_UID = ALICE_GID = 10001


def port_range() -> tuple[int, int]:
    first = random.randrange(42000, 48000, 100)
    return first, first + 99


@pytest.fixture(scope="module", params=["22.05", "24.11"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PeopleNode, MountNamespace, Path | None, tuple[int, int]]]:
    for tool in (SLURMCTLD, SLURMD, SCONTROL, SBATCH, "srun", "unshare", "nsenter", "ss"):
        require_tool(tool)
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("slurmd and bind mounts need root here")
    root = trixie_root_or_skip() if request.param == "24.11" else None
    ports = port_range()
    conf = {"SrunPortRange": f"{ports[0]}-{ports[1]}", "SlurmctldParameters": "enable_configless"}
    node = PeopleNode(rendered_users_script(tmp_path_factory.mktemp("users")), root=root, conf=conf)
    try:
        node.start()
        login = node.login_namespace()
        client_conf: Path | None = None
        if root is None:  # 22.05 has no sackd: the login node holds a copy of slurm.conf
            client_conf = node.dir / "login-slurm.conf"
            client_conf.write_text(node.slurm.conf_path.read_text())
        else:
            port = re.search(r"^SlurmctldPort=(\d+)$", node.slurm.conf_path.read_text(), re.M)
            assert port
            node.spawn_in(login, rendered_sackd_command(f"127.0.0.1:{port.group(1)}"), "sackd.out")
            fetched = node.dir / "login-run-0" / "slurm" / "conf" / "slurm.conf"
            try:
                node.slurm.wait("sackd configless slurm.conf", fetched.exists, 30, 0.2)
            except AssertionError as e:
                raise AssertionError(node.slurm.log("sackd.out")[-3000:]) from e
        yield node, login, client_conf, ports
    finally:
        node.stop()
    assert node.leftover() == [] and node.leftover_cgroups() == []


def rendered_sackd_command(controller: str) -> list[str]:
    """The ExecStart of the rendered login unit (``render/slurm/login.py: sackd_unit``), for this controller.

    ``/run/slurm`` is made by the test (``PeopleNode.login_namespace``): sackd makes only ``/run/slurm/conf``, and on
    a node systemd's ``RuntimeDirectory=slurm`` (the packaged sackd.service has it) makes the parent."""
    unit = sackd_unit(controller, home=False)
    line = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    assert argv[0] == "/usr/sbin/sackd" and "-D" in argv, argv  # foreground: the harness keeps its pid
    return argv


def on_login(node: PeopleNode, login: MountNamespace, conf: Path | None, *argv: str) -> list[str]:
    """``argv`` as alice on the login node: the command line, and its environment is set by :func:`login_env`."""
    chroot = ["chroot", str(node.root)] if node.root is not None else []
    return login.argv(*chroot, RUNUSER, "-u", "alice", "--", *argv)


def login_env(node: PeopleNode, conf: Path | None) -> dict[str, str]:
    env = {k: v for k, v in node.slurm.env.items() if k != "SLURM_CONF"}
    if conf is not None:
        env["SLURM_CONF"] = str(conf)
    return env


def test_a_batch_job_runs_as_the_declared_user_and_owns_its_output(cluster):  # type: ignore[no-untyped-def]
    node, login, conf, _ = cluster
    home = node.dir / "home-alice"
    home.mkdir(mode=0o700)
    os.chown(home, ALICE_UID, ALICE_GID)
    inner = node.inside(home)
    proc = subprocess.run(
        on_login(node, login, conf, SBATCH, "--parsable", f"--chdir={inner}", f"--output={inner}/out-%j",
                 "--wrap", "id -u; id -g; id -un"),
        env=login_env(node, conf), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    job = int(proc.stdout.strip().split(";")[0])
    ended = node.slurm.wait_job(job, 60)
    assert ended["JobState"] == "COMPLETED", ended
    assert ended["UserId"] == f"alice({ALICE_UID})" and ended["GroupId"] == f"alice({ALICE_GID})", ended
    out = home / f"out-{job}"
    assert out.read_text().split() == [str(ALICE_UID), str(ALICE_GID), "alice"]
    st = out.stat()
    assert (st.st_uid, st.st_gid) == (ALICE_UID, ALICE_GID)


def srun_listeners(marker_pids: list[int]) -> dict[int, list[int]]:
    """The TCP ports each srun of the run listens on (``ss -ltnpH``)."""
    lines = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    found: dict[int, list[int]] = {}
    for pid in marker_pids:
        if Path(f"/proc/{pid}/comm").read_text().strip() != "srun":
            continue
        found[pid] = [int(line.split()[3].rsplit(":", 1)[1]) for line in lines if f"pid={pid}," in line]
    return found


def test_srun_from_the_login_node_gets_its_output_back_through_srun_port_range(cluster):  # type: ignore[no-untyped-def]
    node, login, conf, (first, last) = cluster
    argv = on_login(node, login, conf, "srun", "-N1", "-n1", "--chdir=/tmp", "sh", "-c", "id -u; id -g; sleep 4")
    with subprocess.Popen(argv, env=login_env(node, conf), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as srun:
        listeners: dict[int, list[int]] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(listeners.values()):
            time.sleep(0.3)
            listeners = srun_listeners(marked_pids(node.slurm.marker))
        out, err = srun.communicate(timeout=60)
    assert srun.returncode == 0, err
    assert out.split() == [str(ALICE_UID), str(ALICE_GID)]
    ports = [port for found in listeners.values() for port in found]
    assert ports and all(first <= port <= last for port in ports), (listeners, first, last)
