"""pam_slurm_adopt on a compute node (docs/people.md, "A shell on your job's node"): sshd's account stack admits a user only while they have a job
on that node, and admins (the admin group, through pam_access) always; root passes pam_slurm_adopt's own rule (see
:func:`test_root_is_admitted_past_pam_slurm_adopts_own_rule`).

Real programs: the shared Slurm harness's slurmctld + slurmd (Debian 12's 22.05 here, and Debian trixie's 24.11 in
its debootstrap root under ``chroot``, with munge: 24.11's cred/none cannot be loaded by the module) with
``PrologFlags=Contain``, ``pam_slurm_adopt`` and ``pam_access`` called by ``pamtester`` as sshd would call them (service ``sshd``, account
phase), all in a private mount namespace (``people.py``): the declared users made by the users script on a temp root,
the compute sshd PAM stack bound as ``/etc/pam.d/sshd`` with ``@NODENAME@`` replaced by the harness's node name, the
test's slurm.conf as ``/etc/slurm/slurm.conf`` — pam_slurm_adopt reads that default path; pamtester runs without
``SLURM_CONF`` as sshd does. A refusal is pamtester's PAM error plus the module's own syslog line.

Cgroups: where this machine mounts cgroup v1 (the freezer hierarchy; measured here: 22.05 and 24.11 both run
``proctrack/cgroup`` + ``task/cgroup`` in the harness), the node runs them, with a node name of its own (Slurm's v1
paths are ``slurm_<node>/uid_<uid>/job_<id>``), and a login held open at pamtester's password prompt is asserted in
the job's ``step_extern`` cgroup. Without cgroup v1 (a cgroup v2 machine: 22.05's cgroup/v2 needs systemd's dbus
here) the node keeps ``proctrack/pgid``, that test skips with that reason, and adoption is asserted by the module's
own line naming pamtester's pid and the job (``stepd_add_extern_pid`` answered).

Files under test, all rendered: the users program (``gpucluster_agents/boot/users.sh``), the compute sshd
stack and the admin group's pam_access file (``render/slurm/pam.py``), for the config tests' declared people
(``tests/conftest.py: identity_declared_config``, loaded and resolved). On Debian 12 the stack's module name resolves
because the namespace's PAM module directory holds bookworm's ``/lib/security/pam_slurm_adopt.so`` (``people.py``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.render.slurm.pam import ADMIN_ACCESS_FILE, admin_access, compute_pam_sshd
from tests.conftest import IN_CI, require_tool
from tests.e2e.people import CGROUP_V1_FREEZER, PAMTESTER, PeopleNode, declared_people, rendered_users_script, trixie_root_or_skip
from tests.e2e.slurm_harness import SBATCH, SCONTROL, SLURMCTLD, SLURMD

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("people-pam-slurm-adopt")]  # one worker builds each version's node once

NO_JOB = "Access denied by pam_slurm_adopt: you have no active jobs on this node"


def compute_pam() -> dict[str, str]:
    """The rendered compute ``/etc/pam.d/sshd`` (``@NODENAME@``: PeopleNode puts its node name, as node setup does)."""
    return {"sshd": compute_pam_sshd("people", declared_people())}


def compute_security() -> dict[str, str]:
    """The rendered pam_access file of the admin group."""
    identity = declared_people()
    assert identity.admin_group == "hpc-admins"
    return {Path(ADMIN_ACCESS_FILE).name: admin_access(identity.admin_group)}


@pytest.fixture(scope="module", params=["22.05", "24.11"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeopleNode]:
    for tool in (SLURMCTLD, SLURMD, SCONTROL, SBATCH, PAMTESTER, "unshare", "nsenter", "gcc"):
        require_tool(tool)
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("slurmd and bind mounts need root here")
    root = trixie_root_or_skip() if request.param == "24.11" else None
    n = PeopleNode(
        rendered_users_script(tmp_path_factory.mktemp("users")), root=root, pam=compute_pam(),
        security=compute_security(), cgroups=CGROUP_V1_FREEZER.is_dir(),
    )  # fmt: skip
    try:
        n.start()
        yield n
    finally:
        n.stop()
    assert n.leftover() == [] and n.leftover_cgroups() == []


def test_without_a_job_a_user_is_refused_by_pam_slurm_adopt_and_an_admin_is_admitted(node: PeopleNode):
    _, bob, log = node.pamtester("sshd", "bob", "acct_mgmt")
    assert bob.returncode == 1 and "Permission denied" in bob.stderr, bob
    assert NO_JOB in log, log
    _, alice, log = node.pamtester("sshd", "alice", "acct_mgmt")  # hpc-admins: pam_access is sufficient
    assert alice.returncode == 0 and "account management done" in alice.stdout, alice
    assert "pam_slurm_adopt" not in log and "access denied" not in log, log


def test_root_is_admitted_past_pam_slurm_adopts_own_rule(node: PeopleNode):
    """pam_slurm_adopt lets root through ("Ignoring root user": PAM_IGNORE), and the rendered stack admits root:
    pam_unix's ``[success=1 …]`` jump lands on ``pam_permit``, the stack's own yes, as Ubuntu's
    common-account does (without it nothing said yes and root was refused: measured on 22.05 and 24.11 before the
    fix). sshd still refuses root before PAM (``PermitRootLogin no`` in the rendered drop-in)."""
    _, root, log = node.pamtester("sshd", "root", "acct_mgmt")
    assert "Ignoring root user" in log, (root, log)  # the module's own rule, not pam_access (which refused root)
    assert root.returncode == 0 and "account management done" in root.stdout, (root, log)
    assert NO_JOB not in log


def test_a_running_job_admits_its_owner_only_and_adopts_the_login(node: PeopleNode):
    job = node.sbatch_as("bob", "--output=/dev/null", "--wrap", "sleep 300")
    node.slurm.wait("bob's job running", lambda: node.slurm.job(job).get("JobState") == "RUNNING", 60)
    assert node.slurm.job(job)["UserId"] == "bob(10002)"  # the declared uid, resolved through the bound passwd
    try:
        pid, bob, log = node.pamtester("sshd", "bob", "acct_mgmt")
        assert bob.returncode == 0 and "account management done" in bob.stdout, (bob, log)
        assert f"Connection by user bob: user has only one job {job}" in log, log
        assert f"Process {pid} adopted into job {job}" in log, log
        _, carol, log = node.pamtester("sshd", "carol", "acct_mgmt")
        assert carol.returncode == 1 and "Permission denied" in carol.stderr, carol
        assert NO_JOB in log, log
    finally:
        node.slurm.run("scancel", str(job))
    node.slurm.wait_job(job, 60)


def test_an_adopted_login_lives_in_the_jobs_extern_cgroup(node: PeopleNode):
    if not node.cgroups:
        (pytest.fail if IN_CI else pytest.skip)(
            "no cgroup v1 freezer hierarchy on this machine: the harness runs proctrack/pgid (see the module)"
        )
    # bob's earlier job's steps gone first (no process left in his cgroups; 24.11 keeps the empty directories): with two of his jobs on the node, action_unknown=newest may pick either
    # when both started within the same second
    bob_cgroups = CGROUP_V1_FREEZER / f"slurm_{node.node}" / "uid_10002"
    node.slurm.wait(
        "bob's earlier steps gone", lambda: not any(p.read_text().split() for p in bob_cgroups.rglob("cgroup.procs")), 60
    )
    job = node.sbatch_as("bob", "--output=/dev/null", "--wrap", "sleep 300")
    node.slurm.wait("bob's job running", lambda: node.slurm.job(job).get("JobState") == "RUNNING", 60)
    held = node.held_pamtester("sshd", "bob")
    try:
        deadline = time.monotonic() + 45
        while held.pid not in node.extern_cgroup_procs(job, 10002) and held.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held.poll() is None, (held.communicate(timeout=10), node.syslog.read_text())  # alive at its prompt
        assert held.pid in node.extern_cgroup_procs(job, 10002), (node.syslog.read_text(), node.slurm.debug())
        assert f"Process {held.pid} adopted into job {job}" in node.syslog.read_text()
    finally:
        held.communicate(input="", timeout=30)
        node.slurm.run("scancel", str(job))
    node.slurm.wait_job(job, 60)
    _, after, log = node.pamtester("sshd", "bob", "acct_mgmt")
    assert after.returncode == 1 and NO_JOB in log, (after, log)
