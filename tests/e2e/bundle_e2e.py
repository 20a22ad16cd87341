"""An "on-prem" site for the hybrid end-to-end test: a real slurmctld (Debian's 22.05) whose slurm.conf is a
site's own (two on-prem nodes with their own slurmd, partition ``gpu``) with the bundle merged in as INSTALL.md
says (``slurm.conf.site``'s keys, ``Include cloud.conf`` last, ``Include cloud_gres.conf``, the cloud switch tree
appended to topology.conf), and the bundle installed as ``install.sh`` lays it out: the agent package unzipped
from the bundle's zip into ``<installDir>/lib``, the bundle's wrappers, ``agent.json`` and ``aws-config``.

Only what cannot work on one machine is changed (:func:`local_conf`, :func:`local_cloud_conf`): ports, paths,
root instead of SlurmUser, no munge or cgroups, one 127.0.0.1 address and port per node, this machine's node
size, fake GPU device files, short timers, and in agent.json the moto endpoint and this run's state and log
paths. The AWS profile is the bundle's, unchanged: its ``credential_process`` is a fake ``aws_signing_helper``
(at the stack's ``signingHelperPath``) that prints a session and logs each call."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from gpucluster.load import load_spec
from gpucluster.render.hybrid.bundle import AwsValues
from gpucluster.render.hybrid.bundle_slurm import site_of
from gpucluster_agents.contract import hostlist
from gpucluster_agents.power.slurm import NodeState, parse_show_nodes
from tests.agents.moto_env import MotoServer, World, free_port, instances, make_world, node_instances  # noqa: F401
from tests.e2e.slurm_e2e import (  # noqa: F401  (the test takes these from here)
    MARKER_KEY,
    SBATCH,
    SCONTROL,
    SLURMCTLD,
    SLURMD,
    build_uptime_shim,
    local_gres_conf,
    marked_pids,
    stop_cluster,
)
from tests.render.hybrid.bundle_site import files_of, site_settings_lines, stack_config, text

HERE = Path(__file__).resolve().parent
CLOUD_NODES = 2
SITE = ["onprem-1", "onprem-2"]
CLUSTER = "hybrid-slurm"
TIMERS = {"SuspendTime": "8", "SuspendTimeout": "5", "ResumeTimeout": "120"}
ARNS = {
    "trustAnchorArn": "arn:aws:rolesanywhere:us-east-1:123456789012:trust-anchor/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "profileArn": "arn:aws:rolesanywhere:us-east-1:123456789012:profile/1f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "roleArn": "arn:aws:iam::123456789012:role/hybrid-slurm-site-agent",
}
SESSION_KEY = "ASIAFROMSIGNINGHELPER"


def _decoded(config: dict[str, Any], key: str) -> Any:
    value = config[key]
    return json.loads(value) if isinstance(value, str) else value


def site_config(run_dir: Path) -> dict[str, Any]:
    """The hybrid-slurm stack, two cloud nodes on demand, the site's programs, and this run's paths."""
    config = stack_config()
    config["gpucluster:nodeGroups"] = [
        {"name": "p5", "instanceType": "p5.48xlarge", "availabilityZones": ["us-east-1a"], "minSize": 0, "maxSize": CLOUD_NODES}
    ]
    hybrid = _decoded(config, "gpucluster:hybrid")
    hybrid["controller"].update(
        installDir=str(run_dir / "install"),
        confDir=str(run_dir / "etc"),
        resumeProgram=str(run_dir / "site" / "site-resume"),
        suspendProgram=str(run_dir / "site" / "site-suspend"),
    )
    hybrid["credentials"].update(
        signingHelperPath=str(run_dir / "site" / "aws_signing_helper"),
        certificatePath=str(run_dir / "site" / "slurmctld.crt"),
        privateKeyPath=str(run_dir / "site" / "slurmctld.key"),
    )
    config["gpucluster:hybrid"] = hybrid
    return config


def script(path: Path, body: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def local_cloud_conf(conf: str, ports: dict[str, int], program: Path) -> str:
    """cloud.conf on one machine: one line per node with its own port, this machine's size, short timers,
    and the test's program (which runs the bundle's wrapper) in place of the wrappers' paths."""
    out: list[str] = []
    for line in conf.splitlines():
        key = line.split("=", 1)[0]
        if key in ("ResumeProgram", "SuspendProgram", "ResumeFailProgram"):
            command = {"ResumeProgram": "resume", "SuspendProgram": "suspend", "ResumeFailProgram": "resume-fail"}[key]
            out.append(f"{key}={program}-{command}")
        elif key == "NodeName":
            fields = dict(f.split("=", 1) for f in line.split())
            for node in hostlist.expand(fields["NodeName"]):
                f = dict(fields, NodeName=node, NodeAddr="127.0.0.1", Port=str(ports[node]), CPUs="1", RealMemory="512")
                f["Gres"] = re.sub(r":\d+$", ":2", f["Gres"])
                out.append(" ".join(f"{k}={v}" for k, v in f.items()))
        elif key == "PartitionName":
            line = re.sub(r"DefMemPerCPU=\d+", "DefMemPerCPU=512", line)
            for timer, value in TIMERS.items():
                line = re.sub(rf"\b{timer}=\d+", f"{timer}={value}", line)
            out.append(line)
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def local_conf(run_dir: Path, settings_lines: list[str], ctld_port: int, ports: dict[str, int], task_prolog: Path) -> str:
    """The site's own slurm.conf, run as root in ``run_dir``, with slurm.conf.site merged and cloud.conf last; the
    bundle's TaskProlog installed at ``task_prolog`` (INSTALL.md's path needs root on the test machine)."""
    d = run_dir
    base = [
        "ClusterName=site",
        "SlurmctldHost=localhost",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/none",
        "CredType=cred/none",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={ctld_port + 1}",
        f"StateSaveLocation={d / 'state'}",
        f"SlurmdSpoolDir={d / 'spool' / '%n'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}",
        f"SlurmdPidFile={d / 'pids' / 'slurmd-daemon-%n.pid'}",
        f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={d / 'log' / 'slurmd-%n.log'}",
        "SlurmctldDebug=debug",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "AccountingStorageType=accounting_storage/none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "AuthInfo=cred_expire=10",
        "SchedulerParameters=sched_interval=2,bf_interval=2",
    ]
    base += [f"NodeName={n} NodeAddr=127.0.0.1 Port={ports[n]} CPUs=1 RealMemory=512 State=UNKNOWN" for n in SITE]
    base.append(f"PartitionName=gpu Nodes={hostlist.compress(SITE)} Default=YES MaxTime=INFINITE State=UP")
    merged = [f"{line},power_save_interval=1" if line.startswith("SlurmctldParameters=") else line for line in settings_lines]
    merged = [line for line in merged if not line.startswith(("TCPTimeout=", "TaskProlog="))] + ["TCPTimeout=2"]
    assert len(merged) == len(settings_lines) - 1, "slurm.conf.site carries TaskProlog"
    merged.append(f"TaskProlog={task_prolog}")
    return "\n".join([*base, *merged, "Include cloud.conf"]) + "\n"


class HybridSite:
    def __init__(self, run_dir: Path, world: World, moto_url: str, shim: Path) -> None:
        self.dir = run_dir
        self.moto_url = moto_url
        self.marker = f"{run_dir}:{os.getpid()}"
        for sub in ("state", "spool", "log", "pids", "dev", "etc", "site"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        site = site_of(load_spec(site_config(run_dir), stack=CLUSTER).cluster)
        self.site = site
        groups = {"p5": {"launchTemplateId": world.launch_templates["p5"], "subnetIds": [world.subnet_ids[0]]}}
        self.files = files_of(site, AwsValues.from_output({"slurm": {"burstNodeGroups": groups}, "credentials": ARNS}))
        self.install()
        self.helper_calls = run_dir / "site" / "helper-calls"
        session = {
            "Version": 1,
            "AccessKeyId": SESSION_KEY,
            "SecretAccessKey": "from-the-helper",
            "SessionToken": "token",
            "Expiration": "2099-01-01T00:00:00Z",
        }
        script(
            Path(site.hybrid.credentials.signing_helper_path),
            f"echo \"$@\" >> {self.helper_calls}\necho '{json.dumps(session)}'\n",
        )
        for name in ("resume", "suspend"):
            script(run_dir / "site" / f"site-{name}", f'echo "$1" >> {run_dir / "site" / f"site-{name}.calls"}\n')

        self.conf_path = run_dir / "etc" / "slurm.conf"
        self.settings = {
            "python": sys.executable,
            "bin_dir": site.bin_dir,
            "moto_url": moto_url,
            "cluster": CLUSTER,
            "cloud_groups": ["p5"],
            "uptime_shim": str(shim),
            "marker_key": MARKER_KEY,
            "marker": self.marker,
            "pid_dir": str(run_dir / "pids"),
            "log_dir": str(run_dir / "log"),
            "slurmd": SLURMD,
            "scontrol": SCONTROL,
        }
        settings_path = run_dir / "etc" / "programs.json"
        settings_path.write_text(json.dumps(self.settings))
        program = run_dir / "site" / "program"
        for command in ("resume", "suspend", "resume-fail"):
            script(
                Path(f"{program}-{command}"),
                f'exec "{sys.executable}" "{HERE / "bundle_programs.py"}" "{settings_path}" {command} "$1"\n',
            )
        cloud_nodes = [f"p5-{i}" for i in range(1, CLOUD_NODES + 1)]
        ports = {n: free_port() for n in [*SITE, *cloud_nodes]}
        self.ctld_port = free_port()
        etc = run_dir / "etc"
        task_prolog = etc / "hybrid-task-prolog"
        task_prolog.write_text(text(self.files, "task-prolog"))
        task_prolog.chmod(0o755)
        etc.joinpath("slurm.conf").write_text(
            local_conf(run_dir, site_settings_lines(self.files), self.ctld_port, ports, task_prolog)
        )
        etc.joinpath("cloud.conf").write_text(local_cloud_conf(text(self.files, "cloud.conf"), ports, program))
        etc.joinpath("gres.conf").write_text("AutoDetect=off\nInclude cloud_gres.conf\n")
        etc.joinpath("cloud_gres.conf").write_text(local_gres_conf(text(self.files, "cloud_gres.conf"), run_dir / "dev", 2))
        etc.joinpath("topology.conf").write_text(
            f"SwitchName=site-leaf Nodes={hostlist.compress(SITE)}\n" + text(self.files, "cloud_topology.conf")
        )
        for i in range(2):
            (run_dir / "dev" / f"nvidia{i}").touch()
        self.ctld: subprocess.Popen[bytes] | None = None

    def install(self) -> None:
        """What install.sh does, into this run's folders: the package from the bundle's zip, the wrappers, the
        config and profile (the agent.json with this machine's endpoint and paths), and a venv python."""
        install = Path(self.site.controller.install_dir)
        zipfile.ZipFile(io.BytesIO(self.files["gpucluster_agents.zip"].content)).extractall(install / "lib")
        script(install / "venv" / "bin" / "python", f'exec "{sys.executable}" "$@"\n')
        for path, f in self.files.items():
            if path.startswith("bin/"):
                (install / "bin").mkdir(parents=True, exist_ok=True)
                (install / path).write_bytes(f.content)
                (install / path).chmod(f.mode)
        etc = Path(self.site.etc_dir)
        etc.mkdir(parents=True, exist_ok=True)
        agent = json.loads(text(self.files, "agent.json"))
        agent.update(
            endpoint_url=self.moto_url,
            log_file=str(self.dir / "log" / "agent.log"),
            state_dir=str(self.dir / "agent-state"),
            api_max_attempts=2,
            orphan_grace_seconds=600,
        )
        (etc / "agent.json").write_text(json.dumps(agent, indent=1))
        (etc / "aws-config").write_bytes(self.files["aws-config"].content)  # unchanged

    # ------------------------------------------------------------------ processes
    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "AWS_"))}
        env["SLURM_CONF"] = str(self.conf_path)
        env[MARKER_KEY] = self.marker
        return env

    def start(self) -> None:
        with open(self.dir / "log" / "slurmctld.out", "ab") as out:
            self.ctld = subprocess.Popen(
                [SLURMCTLD, "-D", "-i"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.ctld.poll() is not None:
                raise RuntimeError(f"slurmctld exited: {(self.dir / 'log' / 'slurmctld.out').read_text()[-3000:]}")
            if "is UP" in self.scontrol("ping", check=False):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("slurmctld did not come up in 30 s")
        for node in SITE:  # the site's own nodes run their slurmd all the time
            with open(self.dir / "log" / f"slurmd-{node}.out", "ab") as out:
                subprocess.Popen(
                    [SLURMD, "-D", "-N", node],
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    def scontrol(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([SCONTROL, *args], env=self.env, capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"scontrol {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def nodes(self) -> dict[str, NodeState]:
        return parse_show_nodes(self.scontrol("-o", "show", "nodes"))

    def sbatch(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SBATCH, "--parsable", f"--chdir={self.dir}", *args], env=self.env, capture_output=True, text=True, check=False
        )

    def job(self, job_id: int) -> dict[str, str]:
        line = self.scontrol("-o", "show", "job", str(job_id), check=False)
        return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line))

    def wait(self, what: str, condition: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not within {timeout}s\n{self.debug()}")
            time.sleep(0.5)

    def wait_job(self, job_id: int, timeout: float) -> dict[str, str]:
        done = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
        self.wait(f"job {job_id}", lambda: self.job(job_id).get("JobState") in done, timeout)
        return self.job(job_id)

    def log(self, name: str) -> str:
        path = self.dir / "log" / name
        return path.read_text() if path.exists() else ""

    def debug(self) -> str:
        parts = [self.scontrol("-o", "show", "nodes", check=False)]
        for name in ("programs.log", "agent.log", "agent.out", "slurmctld.log"):
            parts.append(f"--- {name}\n" + "\n".join(self.log(name).splitlines()[-40:]))
        return "\n".join(parts)

    def stop(self) -> None:
        stop_cluster(self.ctld, self.marker)

    def cleanup(self) -> None:
        if not os.environ.get("GPUCLUSTER_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
