"""Users of a Slurm cluster stay apart: ``PrivateData=accounts,jobs,usage,users`` and a private
``/tmp`` and ``/dev/shm`` per job (``job_container/tmpfs``, ``PrologFlags=Contain``, ``job_container.conf`` with
``BasePath`` on the node group's NVMe scratch, else ``/var/lib/gpucluster/job-tmp``).

slurmctld 22.05 and 24.11 accepting the rendered slurm.conf is checked with every stack's files
(``test_slurm_render.py``, ``test_slurm_versions.py``). Here a real slurmctld and slurmd 22.05 run as root with the
rendered privacy keys and the rendered job_container.conf (the only local change: BasePath moved under a scratch
directory of the test, since slurmd refuses one in /tmp): slurmd reads the file, a job's /tmp is a private directory
under the node's BasePath that nobody else sees and that is gone when the job ends, and ``squeue`` run as nobody
does not show root's job.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.load import load_spec
from gpucluster.render.slurm.conf import slurm_conf
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.render.slurm.privacy import JOB_TMP_BASE, job_container_conf, merge_comma_keys
from tests.conftest import IN_CI, group, make_config, require_tool
from tests.e2e.slurm_harness import MARKER_KEY, LocalSlurm, conf_lines, free_port, local_keys, node_line

pytestmark = pytest.mark.slow  # starts slurmctld and slurmd (LocalSlurm)

CONFIG = make_config(
    group(name="a100", instanceType="p4d.24xlarge", maxSize=2),
    group(name="dev", instanceType="g6e.xlarge", maxSize=1, enableEfaSupport=False),
    storage={"nvmeScratch": {"mountPoint": "/scratch", "nodeGroups": ["a100"]}},
    slurm={"nodeGroups": [{"name": "a100"}, {"name": "dev"}]},
)


def ctx(version: str = "22.05") -> SlurmContext:
    return SlurmContext.of(load_spec(CONFIG, stack="privacy").cluster, slurm_version=version)


def test_job_container_conf_puts_each_groups_tmp_on_its_scratch():
    assert job_container_conf(ctx()).splitlines()[2:] == [
        f"BasePath={JOB_TMP_BASE} AutoBasePath=true",
        "NodeName=a100-[1-2] BasePath=/scratch/slurm-job-tmp AutoBasePath=true",
    ]


@pytest.mark.parametrize("version", ["22.05", "23.11", "24.11"])
def test_slurm_conf_keys(version):
    lines = slurm_conf(ctx(version)).splitlines()
    assert "JobContainerType=job_container/tmpfs" in lines
    private = [line for line in lines if line.startswith("PrivateData=")]
    expected = "PrivateData=cloud,accounts,jobs,usage,users" if version == "22.05" else "PrivateData=accounts,jobs,usage,users"
    assert private == [expected]
    assert [line for line in lines if line.startswith("PrologFlags=")] == ["PrologFlags=Contain,Alloc"]


def test_comma_keys_are_merged_onto_one_line():
    assert merge_comma_keys(["A=1", "PrologFlags=Alloc"], ["PrologFlags=Contain,Alloc", "B=2"]) == [
        ["A=1", "PrologFlags=Alloc,Contain"],
        ["B=2"],
    ]


def test_a_scratch_in_tmp_or_dev_shm_is_refused_at_load_so_no_base_path_is_there():
    """slurmd refuses a BasePath in /tmp or /dev/shm (fatal at start): the mount-point rule keeps every scratch
    mount point, and so every BasePath under it, out of both."""
    for where in ("/tmp/scratch", "/dev/shm/scratch"):
        config = {**CONFIG, "gpucluster:storage": {"nvmeScratch": {"mountPoint": where, "nodeGroups": ["a100"]}}}
        with pytest.raises(ConfigError, match=r"storage\.nvmeScratch\.mountPoint"):
            load_spec(config, stack="privacy")


# --- a real slurmctld and slurmd -----------------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path):
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("the job_container test needs root (slurmd makes mount namespaces); run CI as root")
        pytest.skip("needs root (slurmd makes mount namespaces)")
    for tool in ("slurmctld", "slurmd"):
        require_tool(tool)
    base = Path("/var/tmp") / f"gpucluster-jc-{os.getpid()}-{tmp_path.name}"  # slurmd refuses a BasePath in /tmp
    rendered = slurm_conf(ctx()).splitlines()
    keep = ("JobContainerType=", "PrologFlags=", "PrivateData=")
    keys = {
        "ClusterName": "privacy",
        **local_keys(tmp_path, free_port()),
        "SlurmdSpoolDir": f"{base}/spool",  # a short path: slurmd's domain socket lives there
        "SlurmctldLogFile": f"{tmp_path}/slurmctld.log",
        "SlurmdLogFile": f"{tmp_path}/slurmd.log",
        "SlurmdDebug": "debug",
        "MpiDefault": "none",
    }
    etc = base / "etc"  # readable by nobody (squeue as nobody reads slurm.conf; the test's tmp_path is 0700)
    slurm = LocalSlurm(tmp_path, etc / "slurm.conf")
    base.chmod(0o755)
    slurm.write_conf(
        [
            *conf_lines(keys),
            *[line for line in rendered if line.startswith(keep)],
            node_line("a100-1", None, cpus=os.cpu_count() or 1, memory_mb=100),
            "PartitionName=a100 Nodes=a100-1 Default=YES",
        ]
    )
    jc = job_container_conf(ctx()).replace(JOB_TMP_BASE, f"{base}/default").replace("/scratch/", f"{base}/scratch/")
    (etc / "job_container.conf").write_text(jc)
    # the commands' environment: only the config, the system's tools and the run's marker
    env = {"SLURM_CONF": str(etc / "slurm.conf"), "PATH": "/usr/sbin:/usr/bin:/bin", MARKER_KEY: slurm.marker}
    try:
        slurm.start_ctld()
        slurm.start_slurmd("a100-1")
        yield tmp_path, env, base
    finally:
        slurm.stop()
        shutil.rmtree(base, ignore_errors=True)


def srun(env: dict[str, str], *command: str, user: str = "root") -> subprocess.CompletedProcess[str]:
    argv = ["srun", "-N1", "--chdir=/", *command]
    if user != "root":
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_a_job_gets_a_private_tmp_that_goes_when_it_ends(cluster):
    run_dir, env, base = cluster
    marker = f"gpucluster-jc-{os.getpid()}"
    job = srun(env, "bash", "-c", f"echo job > /tmp/{marker}; grep -E ' /tmp | /dev/shm ' /proc/self/mountinfo")
    assert job.returncode == 0, job.stderr + (run_dir / "slurmd.log").read_text()[-3000:]
    log = (run_dir / "slurmd.log").read_text()
    assert "job_container.conf read successfully" in log and not re.search(r"\] (fatal|error): .*(job_container|BasePath)", log)
    tmp_mount = next(line for line in job.stdout.splitlines() if " /tmp " in line)
    assert re.search(rf" {re.escape(str(base))}/scratch/slurm-job-tmp/a100-1/\d+/\.\d+ /tmp ", tmp_mount), tmp_mount
    assert any(" /dev/shm " in line and "tmpfs" in line for line in job.stdout.splitlines()[1:] or [job.stdout])
    assert not Path(f"/tmp/{marker}").exists(), "the job's /tmp file landed in the node's /tmp"
    node_base = base / "scratch" / "slurm-job-tmp" / "a100-1"
    deadline = time.monotonic() + 20  # slurmd removes it when the job ends, just after srun returns
    while list(node_base.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(node_base.iterdir()) == [], "the job's private /tmp was not removed when the job ended"


def test_private_data_hides_root_jobs_from_nobody(cluster):
    _, env, _ = cluster
    held = subprocess.run(
        ["sbatch", "--hold", "--chdir=/", "--wrap", "sleep 60"], env=env, capture_output=True, text=True, timeout=30
    )
    assert held.returncode == 0, held.stderr
    job_id = held.stdout.split()[-1]
    mine = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30)
    theirs = subprocess.run(
        ["runuser", "-u", "nobody", "--", "squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30
    )
    assert job_id in mine.stdout.split(), mine
    assert theirs.returncode == 0 and theirs.stdout.split() == [], theirs
    subprocess.run(["scancel", job_id], env=env, check=False, timeout=30)
