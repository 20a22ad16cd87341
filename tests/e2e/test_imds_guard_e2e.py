"""End to end: no Slurm job of an unprivileged user can reach the instance metadata service (IMDS) on a
compute node, so none can take the instance role's credentials (and with them the munge key).

In a network namespace made here (the node's), with routes to 169.254.169.254 and fd00:ec2::254:

- a fake IMDSv2 (``fake_imds.py``: token PUT, the role's credentials) listens on both addresses, port 80,
  in a second namespace linked to the node's by a veth pair (IMDS is off the host on EC2 too);
- the guard is applied exactly as a compute node applies it at boot: the first ``bootcmd`` of the
  project's rendered compute user data (``slurm-p5``'s ``p5`` group), turned into the shell script
  cloud-init runs (cloud-init's own ``util.shellify``), with a private tmpfs on /usr/local/sbin where
  the command installs the guard (in a mount namespace of its own: ``unshare --mount``);
- a real slurmctld and slurmd (Debian's Slurm 22.05) run in the namespace (a one-node cluster of this
  test's own: the subject here is the guard, not slurm.conf, which tests/render checks);
- a job submitted as ``nobody`` asks IMDS for a token and the role's credentials, over IPv4 and IPv6:
  every connection is reset (curl exit 7, not a timeout) and the fake IMDS receives no request at all;
  the same job as root gets the token and the credentials (the fake IMDS works, so the failure is the
  guard's).

Also: the guard fails (exit status non-zero, no rules) where it cannot run iptables, and re-applying it
(every boot) leaves the same rules. Needs root (network namespaces, iptables, sbatch --uid).
Processes and the namespace are removed in teardown, also when a test fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.render.slurm.guard import imds_guard_bootcmd
from gpucluster.render.slurm.identity import session_lockdown_bootcmd
from gpucluster.render.slurm.names import SLURMCTLD_PORT, SLURMD_PORT
from gpucluster.tools.plan.run.engine import run_plan
from tests.conftest import require_tool
from tests.e2e.guard_netns import Namespace
from tests.e2e.slurm_harness import (
    MARKER_KEY,
    SBATCH,
    SLURMCTLD,
    LocalSlurm,
    conf_lines,
    local_keys,
    node_line,
)

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
STACK, LAUNCH_TEMPLATE = "slurm-p5", "slurm-p5-slurm-p5-lt"
ROLE, SECRET = "slurm-p5-node-role", "fake-secret-access-key-of-the-node-role"
SYSTEM_PYTHON = "/usr/bin/python3"  # cloud-init's own interpreter and modules
IMDS = ("http://169.254.169.254", "http://[fd00:ec2::254]")

JOB = f"""#!/bin/sh
# What a user's job tries: an IMDSv2 token, then the instance role's credentials, over IPv4 and IPv6.
echo "uid=$(id -u)"
for base in {" ".join(IMDS)}; do
  token=$(curl -fsS -m 10 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$base/latest/api/token" 2>/dev/null)
  echo "$base token rc=$?"
  creds=$(curl -fsS -m 10 -H "X-aws-ec2-metadata-token: $token" "$base/latest/meta-data/iam/security-credentials/{ROLE}" 2>/dev/null)
  echo "$base credentials rc=$? $creds"
done
"""


def rendered_compute_bootcmd() -> list[list[str]]:
    user_data = run_plan(STACK).files[f"{LAUNCH_TEMPLATE}/user-data"]
    return yaml.safe_load(user_data)["bootcmd"]


def cloud_init_boot_script(bootcmd: list[list[str]]) -> str:
    """The shell script cloud-init's bootcmd module runs for ``bootcmd`` (its own ``util.shellify``)."""
    code = "import json, sys; from cloudinit import util; sys.stdout.write(util.shellify(json.load(sys.stdin)))"
    import json

    return subprocess.run(
        [SYSTEM_PYTHON, "-c", code], input=json.dumps(bootcmd), capture_output=True, text=True, check=True
    ).stdout


def apply_guard_at_boot(ns: Namespace, boot_script: str, run_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run cloud-init's bootcmd script in the namespace, with a private /usr/local/sbin."""
    script = run_dir / "bootcmd.sh"
    script.write_text(boot_script)
    mount = f'mount -t tmpfs gpucluster-test /usr/local/sbin && exec sh "{script}"'
    return ns.run(require_tool("unshare"), "--mount", "--propagation", "private", "sh", "-c", mount, check=False)


class OneNodeSlurm(LocalSlurm):
    """slurmctld and one slurmd (node-1) in the namespace, as root, no munge (auth/none)."""

    def __init__(self, ns: Namespace, run_dir: Path) -> None:
        super().__init__(run_dir, run_dir / "slurm.conf", marker=ns.marker, wrap=ns.cmd, subdirs=("state", "spool", "log", "out"))
        run_dir.chmod(0o755)
        (run_dir / "out").chmod(0o1777)  # the jobs of nobody write their output here
        keys = {
            "ClusterName": "imdsguard",
            # the namespace has ports of its own: the project's ports
            **local_keys(run_dir, SLURMCTLD_PORT, SLURMD_PORT),
            "ReturnToService": "2",
            "SchedulerParameters": "sched_interval=2",
        }
        self.write_conf(
            [
                *conf_lines(keys),
                node_line("node-1", None, memory_mb=100, State="UNKNOWN"),
                "PartitionName=debug Nodes=node-1 Default=YES MaxTime=INFINITE State=UP",
            ]
        )

    def start(self) -> None:
        """slurmctld and slurmd side by side; up when the node is idle."""
        self.ctld = self.spawn([SLURMCTLD, "-D", "-i"], "slurmctld.out")
        self.start_slurmd("node-1")
        self.wait("node-1 idle", lambda: "State=IDLE" in self.scontrol("-o", "show", "node", "node-1", check=False), 60)

    def submit_as(self, user: str, group: str, script: Path) -> int:
        out = self.run(
            SBATCH,
            "--parsable",
            f"--uid={user}",
            f"--gid={group}",
            f"--chdir={self.dir / 'out'}",
            f"--output={self.dir / 'out'}/%j.out",
            str(script),
            check=True,
        ).stdout
        return int(out.strip().split(";")[0])

    def output_of(self, job: int, timeout: float = 120) -> str:
        """The job's output once it has ended (its state must be COMPLETED)."""
        info = self.wait_job(job, timeout)
        assert info.get("JobState") == "COMPLETED", f"job {job}: {info}\n{self.logs()}"
        return (self.dir / "out" / f"{job}.out").read_text()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted((self.dir / "log").glob("*")))


def results(output: str) -> dict[str, str]:
    """``{"<base> token": "rc=…", "<base> credentials": "rc=… <body>"}`` from the job's output."""
    out = {}
    for line in output.splitlines():
        for base in IMDS:
            for what in ("token", "credentials"):
                prefix = f"{base} {what} "
                if line.startswith(prefix):
                    out[f"{base} {what}"] = line[len(prefix) :]
    return out


def test_guard_fails_closed_without_iptables(netns, run_dir):
    """A node whose guard cannot run iptables gets no rules and a failed guard (so slurmd, which
    requires the unit, never starts): the script stops at the first missing command."""
    command = rendered_compute_bootcmd()[0]  # the guard's
    script = run_dir / "guard"
    script.write_text(command[-1])
    empty = run_dir / "bin"
    empty.mkdir()
    failed = netns.run("/usr/bin/env", "-i", f"PATH={empty}", "/bin/sh", str(script), check=False)
    assert failed.returncode != 0
    assert "GPUCLUSTER-IMDS" not in netns.rules()


def test_unprivileged_job_cannot_reach_imds_but_root_can(netns, run_dir):
    bootcmd = rendered_compute_bootcmd()
    assert bootcmd[0] == list(imds_guard_bootcmd())  # the guard is the node's first boot command
    # only the guard's: the next one (the session lockdown, tests/render/slurm/test_identity_render.py) writes /etc/sudoers.d
    assert bootcmd[1] == list(session_lockdown_bootcmd())
    boot_script = cloud_init_boot_script(bootcmd[:1])

    imds_log = run_dir / "imds.log"
    imds_log.touch()
    env = {**os.environ, MARKER_KEY: netns.marker}
    assert netns.imds is not None
    imds = subprocess.Popen(
        netns.imds.cmd(SYSTEM_PYTHON, str(HERE / "fake_imds.py"), str(imds_log), ROLE, SECRET),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert imds.stdout is not None and imds.stdout.readline().strip() == "ready"

    # before the guard, anyone reaches IMDS: the fake answers nobody too (the checks below can fail)
    for base in IMDS:
        before = netns.run(
            *("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"),
            *(
                "curl",
                "-fsS",
                "-m",
                "10",
                "-X",
                "PUT",
                "-H",
                "X-aws-ec2-metadata-token-ttl-seconds: 60",
                f"{base}/latest/api/token",
            ),
            check=False,
        )
        assert before.returncode == 0 and before.stdout == "fake-imds-token", before.stderr

    # the first boot, then a reboot: the same rules, once
    first = apply_guard_at_boot(netns, boot_script, run_dir)
    assert first.returncode == 0, first.stdout + first.stderr
    rules = netns.rules()
    for family in ("169.254.169.254/32", "fd00:ec2::254/128"):
        assert f"-A OUTPUT -d {family} -j GPUCLUSTER-IMDS" in rules, rules
    assert rules.count("-A GPUCLUSTER-IMDS -m owner --uid-owner 0 -j RETURN") == 2, rules
    assert rules.count("-A GPUCLUSTER-IMDS -p tcp -j REJECT --reject-with tcp-reset") == 2, rules
    second = apply_guard_at_boot(netns, boot_script, run_dir)
    assert second.returncode == 0, second.stderr
    assert netns.rules() == rules

    job = run_dir / "job.sh"
    job.write_text(JOB)
    job.chmod(0o755)
    slurm = OneNodeSlurm(netns, run_dir)
    slurm.start()

    requests_before = imds_log.read_text()
    user = slurm.output_of(slurm.submit_as("nobody", "nogroup", job))
    assert "uid=65534" in user, user
    got = results(user)
    assert set(got) == {f"{b} {w}" for b in IMDS for w in ("token", "credentials")}, user
    for base in IMDS:
        assert got[f"{base} token"] == "rc=7", user  # connection reset: refused at once, not timed out
        assert got[f"{base} credentials"].startswith("rc=7"), user
    assert SECRET not in user
    assert imds_log.read_text() == requests_before, "a request of nobody's job reached IMDS"

    root = slurm.output_of(slurm.submit_as("root", "root", job))
    assert "uid=0" in root, root
    got = results(root)
    for base in IMDS:
        assert got[f"{base} token"] == "rc=0", root
        assert got[f"{base} credentials"].startswith("rc=0 ") and SECRET in got[f"{base} credentials"], root
    assert imds_log.read_text().count(f"GET /latest/meta-data/iam/security-credentials/{ROLE}") == 2
