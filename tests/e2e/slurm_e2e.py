"""A real slurmctld (Debian's Slurm 22.05) in a temp dir, with cloud node groups whose
Resume/Suspend/ResumeFail programs run the agent against moto.

Two layers:
- ``rendered``: the project's own files for the test cluster (``gpucluster.render.slurm``: slurm.conf,
  gres.conf, cgroup.conf, the initial topology.conf, the TaskProlog and the agent's config), exactly
  as a head node gets them.
- ``local_overrides`` (and ``local_gres_conf``, ``local_agent_config``): the only local patch, making
  such files run on one machine: private ports and paths, SlurmUser=root, no munge, no cgroups, one
  NodeAddr=127.0.0.1/Port per node, node sizes of this machine, fake GPU device files, short timers,
  the agent talking to moto.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster_agents.contract import hostlist
from tests.e2e.slurm_harness import (  # noqa: F401  (the tests take the harness's names from here too)
    MARKER_KEY,
    SBATCH,
    SCONTROL,
    SLURMCTLD,
    SLURMD,
    LocalSlurm,
    build_uptime_shim,
    fake_gpus,
    free_port,
    local_gres_conf,
    local_keys,
    marked_pids,
    power_programs,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LOCAL_SLURM = "22.05"
"""The version of Debian bookworm's Slurm that these tests run: files are rendered for it."""


@dataclass(frozen=True)
class GroupSpec:
    """A Slurm node group of the test cluster (a ``gpucluster:nodeGroups`` entry and its
    ``gpucluster:slurm.nodeGroups`` settings)."""

    name: str
    instance_type: str
    nodes: int
    priority_tier: int
    mode: str = "dynamic"


# ---------------------------------------------------------------------------- the rendered files
@dataclass(frozen=True)
class Rendered:
    """The project's files for a head node of this cluster, as ``gpucluster.render.slurm`` makes them."""

    slurm_conf: str
    gres_conf: str
    cgroup_conf: str
    topology_conf: str
    task_prolog: str
    nccl_env: str
    agent_config: dict[str, Any]


def render(cluster: str, groups: list[GroupSpec], launch_templates: dict[str, str], subnet_ids: list[str]) -> Rendered:
    """Load a stack config for ``groups`` with the project's loader and render every file from it."""
    from gpucluster.load import load_spec
    from gpucluster.render.core import env_file
    from gpucluster.render.slurm.agent import LaunchTarget, agent_config
    from gpucluster.render.slurm.compute import task_prolog
    from gpucluster.render.slurm.conf import cgroup_conf, gres_conf, slurm_conf, topology_conf
    from gpucluster.render.slurm.names import SlurmContext
    from gpucluster_agents.contract import to_dict

    config: dict[str, Any] = {
        "aws:region": "us-east-1",
        "gpucluster:nodeGroups": [
            {
                "name": g.name,
                "instanceType": g.instance_type,
                "availabilityZones": ["us-east-1a"],
                "maxSize": g.nodes,
                **({"minSize": g.nodes} if g.mode == "static" else {}),
            }
            for g in groups
        ],
        "gpucluster:slurm": {
            "nodeGroups": [{"name": g.name, "mode": g.mode, "priorityTier": g.priority_tier} for g in groups],
        },
    }
    # Rendered for the Slurm that runs here (Debian's 22.05), which needs the pre-23.11 cloud keys.
    ctx = SlurmContext.of(load_spec(config, stack=cluster).cluster, slurm_version=LOCAL_SLURM)
    targets = {g.name: LaunchTarget(launch_templates[g.name], (subnet_ids[0],)) for g in groups}
    first = ctx.node_groups[0]
    return Rendered(
        slurm_conf=slurm_conf(ctx),
        gres_conf=gres_conf(ctx),
        cgroup_conf=cgroup_conf(ctx),
        topology_conf=topology_conf(ctx),
        task_prolog=task_prolog(first),
        nccl_env=env_file(dict(first.nccl_env)),
        agent_config=to_dict(agent_config(ctx, targets)),  # the JSON document, to patch locally
    )


# ---------------------------------------------------------------------------- local overrides
@dataclass
class Local:
    run_dir: Path
    ctld_port: int
    node_ports: dict[str, int]
    programs: dict[str, str]  # ResumeProgram etc. -> wrapper path
    task_prolog: str = "/bin/true"
    cpus: int = 1
    memory_mb: int = 512
    gpus: int = 2
    timers: dict[str, str] | None = None
    slurmd_port: int | None = None  # default port of slurm.conf; every node has its own Port (node_ports)


LOCAL_TIMERS = {
    "ResumeTimeout": "120",
    "SuspendTime": "8",
    "SuspendTimeout": "5",
    "AuthInfo": "cred_expire=10",  # a requeued job waits cred_expire before it may start again (default 120 s)
    "SchedulerParameters": "sched_interval=2,bf_interval=2",  # start the requeued job soon (defaults 60 s / 30 s)
}


HEALTH_KEYS = {
    "HealthCheckProgram",
    "HealthCheckInterval",
    "HealthCheckNodeState",
    "Prolog",
    "PrologFlags",
    "PrologEpilogTimeout",
    "Epilog",
}
"""slurm.conf keys of the node health wiring (gpucluster/render/slurm/health.py) and the container prolog's Epilog
(gpucluster/render/slurm/containers.py): programs the nodes have and this machine has not
(``tests/e2e/test_containers_e2e.py`` runs them)."""

CONTAINER_KEYS = {"JobContainerType"}
"""The per-job /tmp (gpucluster/render/slurm/privacy.py) needs job_container.conf with a BasePath outside /tmp, where
these clusters run: ``tests/render/slurm/test_slurm_privacy.py`` runs it; these tests run without (PrologFlags goes with the
health keys)."""


def local_overrides(conf: str, local: Local) -> str:
    """Patch a rendered slurm.conf to run on this machine as root, in ``local.run_dir``."""
    d = local.run_dir
    set_keys: dict[str, str] = {
        **local_keys(d, local.ctld_port, local.slurmd_port),
        "TaskProlog": local.task_prolog,
        "SelectTypeParameters": "CR_Core",
        "SlurmctldDebug": "debug",
        **local.programs,
        **(local.timers or LOCAL_TIMERS),
    }
    # values appended to a comma-separated key the rendered config already sets
    append_keys = {"SlurmctldParameters": "power_save_interval=1"}
    out: list[str] = []
    seen: set[str] = set()
    for line in conf.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else ""
        if key == "NodeName":
            # one line per node: its own address and port, and a size slurmd on this machine reports
            fields = dict(f.split("=", 1) for f in line.split())
            if fields["NodeName"] == "DEFAULT":
                fields.update(CPUs=str(local.cpus), RealMemory=str(local.memory_mb))
                out.append(" ".join(f"{k}={v}" for k, v in fields.items()))
                continue
            for node in hostlist.expand(fields["NodeName"]):
                f = dict(fields)
                f.update(
                    NodeName=node,
                    NodeAddr="127.0.0.1",
                    Port=str(local.node_ports[node]),
                    CPUs=str(local.cpus),
                    RealMemory=str(local.memory_mb),
                )
                if "Gres" in f:  # the rendered GPU type stays (gres.conf names it); the count is this machine's
                    f["Gres"] = re.sub(r":\d+$", f":{local.gpus}", f["Gres"])
                out.append(" ".join(f"{k}={v}" for k, v in f.items()))
            continue
        if key == "PartitionName" and "DefMemPerCPU=" in line:
            # memory per CPU of this machine's node size, not of the instance type
            out.append(re.sub(r"DefMemPerCPU=\d+", f"DefMemPerCPU={local.memory_mb // local.cpus}", line))
            continue
        if key in HEALTH_KEYS | CONTAINER_KEYS and key not in set_keys:
            continue  # the health wrappers exist on real compute nodes only; a test that wants them sets them
        if key in set_keys:
            out.append(f"{key}={set_keys[key]}")
            seen.add(key)
            continue
        if key in append_keys:
            out.append(f"{line},{append_keys[key]}")
            seen.add(key)
            continue
        out.append(line)
    extra = [f"{k}={v}" for k, v in {**set_keys, **append_keys}.items() if k not in seen]
    nodes_at = next((i for i, line in enumerate(out) if line.startswith("NodeName=")), len(out))
    return "\n".join(out[:nodes_at] + extra + out[nodes_at:]) + "\n"


def local_agent_config(rendered: dict[str, Any], local: dict[str, Any]) -> dict[str, Any]:
    """The rendered agent config with this machine's paths, the moto endpoint and test timings."""
    return {**rendered, **local}


# ---------------------------------------------------------------------------- the running cluster
class SlurmCluster(LocalSlurm):
    def __init__(
        self,
        run_dir: Path,
        cluster: str,
        groups: list[GroupSpec],
        rendered: Rendered,
        local_agent: dict[str, Any],
        moto_url: str,
        shim: Path,
    ) -> None:
        """``rendered``: the project's files for this cluster; ``local_agent``: the agent settings of
        this machine (moto endpoint, paths, retries) laid over the rendered agent config."""
        super().__init__(run_dir, subdirs=("state", "spool", "log", "pids", "dev", "bin", "etc"))
        self.cluster = cluster
        self.groups = groups
        self.moto_url = moto_url
        self.rendered = rendered
        nodes = [f"{g.name}-{i}" for g in groups for i in range(1, g.nodes + 1)]

        # the agent's config: the rendered one, with real scontrol and topology.conf next to slurm.conf
        self.agent_config_path = run_dir / "etc" / "agent.json"
        agent_config = local_agent_config(
            rendered.agent_config,
            {**local_agent, "slurm_bin_dir": "/usr/bin", "topology_conf": str(run_dir / "etc" / "topology.conf")},
        )
        self.agent_config = agent_config
        self.agent_config_path.write_text(json.dumps(agent_config, indent=1))

        self.settings = {
            "python": os.environ.get("GPUCLUSTER_AGENT_PYTHON") or sys.executable,
            "repo": str(REPO),
            "agent_config": str(self.agent_config_path),
            "moto_url": moto_url,
            "cluster": cluster,
            "slurm_conf": str(self.conf_path),
            "uptime_shim": str(shim),
            "marker_key": MARKER_KEY,
            "marker": self.marker,
            "pid_dir": str(run_dir / "pids"),
            "log_dir": str(run_dir / "log"),
            "slurmd": SLURMD,
            "scontrol": SCONTROL,
        }
        settings_path = run_dir / "etc" / "programs.json"
        settings_path.write_text(json.dumps(self.settings, indent=1))
        programs = power_programs(run_dir / "bin" / "slurm-", HERE / "slurm_programs.py", settings_path)
        # the rendered TaskProlog, reading this run's copy of the node's NCCL environment
        nccl_env = run_dir / "etc" / "nccl.env"
        nccl_env.write_text(rendered.nccl_env)
        prolog = run_dir / "bin" / "task-prolog"
        prolog.write_text(rendered.task_prolog.replace("/etc/gpucluster/nccl.env", str(nccl_env)))
        prolog.chmod(0o755)

        ctld_port = free_port()
        local = Local(
            run_dir=run_dir,
            ctld_port=ctld_port,
            node_ports={n: free_port() for n in nodes},
            programs=programs,
            task_prolog=str(prolog),
        )
        fake_gpus(run_dir / "dev", local.gpus)
        self.conf_path.write_text(local_overrides(rendered.slurm_conf, local))
        (run_dir / "etc" / "gres.conf").write_text(local_gres_conf(rendered.gres_conf, run_dir / "dev", local.gpus))
        (run_dir / "etc" / "cgroup.conf").write_text(rendered.cgroup_conf)
        (run_dir / "etc" / "topology.conf").write_text(rendered.topology_conf)

    # ------------------------------------------------------------------ process control
    def start(self) -> None:
        """slurmctld; exits (and this raises) on an invalid slurm.conf. slurmctld starts each node's slurmd through
        the ResumeProgram (``slurm_programs.py``)."""
        self.start_ctld()

    def run_agent(self, command: str) -> int:
        """Run the agent as the head node's systemd timer does (``maintain``), with this run's settings."""
        from tests.e2e.slurm_programs import agent_env

        return subprocess.run(
            [self.settings["python"], "-m", "gpucluster_agents", command],
            env=agent_env(self.settings),
            cwd=str(REPO),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        ).returncode

    def debug(self, logs: Sequence[str] = ("programs.log", "slurmctld.log"), lines: int = 60) -> str:
        parts = [super().debug(logs, lines)]
        agent_log = Path(self.agent_config["log_file"])
        if agent_log.exists():
            parts.append("--- agent.log\n" + "\n".join(agent_log.read_text().splitlines()[-lines:]))
        return "\n".join(parts)
