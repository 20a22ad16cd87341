"""Fixtures for the node-agent tests: a moto server (one per session, reset per test), a fault
proxy in front of it, a fake scontrol, and a harness that runs the agent the way slurmctld does."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpucluster_agents import cli
from gpucluster_agents.contract import hostlist
from tests.agents.ec2_fault_proxy import FaultProxy
from tests.agents.moto_env import AWS_ENV, MotoServer, World, agent_env, make_world, node_instances

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

CLUSTER = "testcl"
# The interpreter for agent processes (spawned tests, e2e programs); e.g. a python3.9 venv with boto3
# to check the head-node floor. The in-process tests always use the interpreter running pytest.
AGENT_PYTHON = os.environ.get("GPUCLUSTER_AGENT_PYTHON") or sys.executable
GROUPS = {"p5": "p5.48xlarge", "g6e": "g6e.12xlarge"}


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def moto(moto_server: MotoServer) -> MotoServer:
    moto_server.reset()
    return moto_server


@pytest.fixture
def proxy(moto: MotoServer) -> Iterator[FaultProxy]:
    p = FaultProxy(moto.url)
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)


class FakeSlurm:
    """State of the fake scontrol, and what slurmctld would do before calling the agent."""

    def __init__(self, directory: Path, nodes: list[str]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.state_path = directory / "slurm-state.json"
        self.state_path.write_text(
            json.dumps({"nodes": {n: {"state": "IDLE+CLOUD+POWERED_DOWN", "reason": None, "addr": None} for n in nodes}})
        )
        self.bin_dir = directory / "bin"
        self.bin_dir.mkdir(exist_ok=True)
        script = self.bin_dir / "scontrol"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{HERE / "fake_scontrol.py"}" "{self.state_path}" "$@"\n')
        script.chmod(0o755)

    def data(self) -> dict[str, Any]:
        return json.loads(self.state_path.read_text())

    def node(self, name: str) -> dict[str, Any]:
        return self.data()["nodes"][name]

    def set(self, nodes: str, state: str, reason: str | None = None) -> None:
        data = self.data()
        for n in hostlist.expand(nodes):
            data["nodes"][n]["state"] = state
            data["nodes"][n]["reason"] = reason
        self.state_path.write_text(json.dumps(data))

    def set_flag(self, key: str, value: Any) -> None:
        data = self.data()
        data[key] = value
        self.state_path.write_text(json.dumps(data))

    def calls(self) -> list[list[str]]:
        p = Path(str(self.state_path) + ".calls")
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines()]

    def updates(self) -> list[list[str]]:
        return [c for c in self.calls() if c and c[0] == "update"]


@dataclass
class Harness:
    tmp: Path
    moto: MotoServer
    proxy: FaultProxy
    world: World
    slurm: FakeSlurm
    config: dict[str, Any] = field(default_factory=lambda: {})
    now: float | None = None  # the agent's clock for the next runs (a stepped clock); None: the real one
    boot: float | None = None  # with ``now``: the boot clock's seconds (holds follow it); None: it reads ``now``

    @property
    def config_path(self) -> Path:
        return self.tmp / "agent.json"

    @property
    def log_path(self) -> Path:
        return Path(self.config["log_file"])

    def write_config(self) -> Path:
        self.config_path.write_text(json.dumps(self.config, indent=1))
        return self.config_path

    def group(self, name: str) -> dict[str, Any]:
        return next(g for g in self.config["node_groups"] if g["name"] == name)

    def run(self, command: str, hostlist_expr: str = "") -> int:
        """Run the agent in this process (cli.main), as slurmctld would run the program; in its own
        process when GPUCLUSTER_AGENT_PYTHON names another interpreter. With ``now`` set the agent's
        clock reads ``now`` (always in this process: the Agent is built with that clock)."""
        if self.now is not None:
            return self._run_clocked(command, hostlist_expr)
        if AGENT_PYTHON != sys.executable:
            proc = self.spawn(command, hostlist_expr)
            out = proc.communicate(timeout=120)[0]
            assert not out, out.decode()
            return proc.returncode
        self.write_config()
        args = ["--config", str(self.config_path), command]
        if hostlist_expr:
            args.append(hostlist_expr)
        return cli.main(args)

    def _run_clocked(self, command: str, hostlist_expr: str) -> int:
        from unittest import mock

        from gpucluster_agents import agent as agent_module
        from gpucluster_agents.power.state import StateDir

        now, boot = self.now, self.boot
        real = agent_module.Agent

        class Clocked(real):  # type: ignore[misc, valid-type]
            def __init__(self, cfg: Any, **kw: Any) -> None:
                def clock() -> float:
                    return float(now)  # type: ignore[arg-type]

                if boot is not None:
                    at = float(boot)
                    kw["state"] = StateDir(cfg.state_dir, clock, lambda: ("test-boot", at))
                super().__init__(cfg, clock=clock, **kw)

        self.write_config()
        args = ["--config", str(self.config_path), command, *([hostlist_expr] if hostlist_expr else [])]
        with mock.patch.object(agent_module, "Agent", Clocked):
            return cli.main(args)

    def spawn(self, command: str, hostlist_expr: str = "") -> subprocess.Popen[bytes]:
        """Run the agent as its own process (``python -m gpucluster_agents``)."""
        self.write_config()
        args = [AGENT_PYTHON, "-m", "gpucluster_agents", command]
        if hostlist_expr:
            args.append(hostlist_expr)
        return subprocess.Popen(
            args,
            cwd=str(REPO),
            env=agent_env({"GPUCLUSTER_AGENT_CONFIG": str(self.config_path), "PYTHONPATH": str(REPO)}),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def slurm_resume(self, nodes: str) -> int:
        """What slurmctld does: mark the nodes POWERING_UP, then run ResumeProgram."""
        self.slurm.set(nodes, "IDLE+CLOUD+POWERING_UP")
        return self.run("resume", nodes)

    def slurm_suspend(self, nodes: str) -> int:
        self.slurm.set(nodes, "IDLE+CLOUD+POWERING_DOWN")
        rc = self.run("suspend", nodes)
        self.slurm.set(nodes, "IDLE+CLOUD+POWERED_DOWN")
        return rc

    def nodes(self) -> dict[str, list[str]]:
        """node name -> its live instance ids in moto ("" for instances without a node tag)."""
        return node_instances(self.moto.url, CLUSTER)

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


def base_config(tmp: Path, endpoint: str, world: World, bin_dir: Path) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "cluster_name": CLUSTER,
        "region": "us-east-1",
        "endpoint_url": endpoint,
        "log_file": str(tmp / "log" / "agent.log"),
        "state_dir": str(tmp / "state"),
        "slurm_bin_dir": str(bin_dir),
        "topology_conf": None,  # on in the topology tests (it costs two calls per resume)
        "orphan_grace_seconds": 120,
        "api_retry_mode": "standard",
        "api_max_attempts": 5,
        "node_groups": [
            {
                "name": "p5",
                "max_nodes": 16,
                "instance_type": GROUPS["p5"],
                "launch_template_id": world.launch_templates["p5"],
                "launch_template_version": "$Latest",
                "subnet_ids": [world.subnet_ids[0]],
                "efa_enabled": True,
                "capacity": {"type": "on-demand"},
                "tags": {"team": "ml"},
            },
            {
                "name": "g6e",
                "max_nodes": 8,
                "instance_type": GROUPS["g6e"],
                "launch_template_id": world.launch_templates["g6e"],
                "subnet_ids": list(world.subnet_ids),
                "capacity": {"type": "spot"},
            },
        ],
    }


@pytest.fixture
def harness(
    request: pytest.FixtureRequest, tmp_path: Path, moto: MotoServer, proxy: FaultProxy, aws_env: None
) -> Iterator[Harness]:
    world = make_world(moto.url, GROUPS)
    nodes = [f"p5-{i}" for i in range(1, 17)] + [f"g6e-{i}" for i in range(1, 9)]
    slurm = FakeSlurm(tmp_path / "slurm", nodes)
    h = Harness(tmp_path, moto, proxy, world, slurm)
    h.config = base_config(tmp_path, proxy.url, world, slurm.bin_dir)
    yield h
    # Every test ends with no live instance that no node owns (and none owned twice).
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.passed:
        left = h.nodes()
        assert "" not in left, f"instances without a node left running: {left['']}"
        assert all(len(v) == 1 for v in left.values()), f"a node owns several instances: {left}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


def deep_copy(cfg: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(cfg)


def require_tool(path: str) -> str:
    """A tool the test needs: missing is a failure in CI (CI=true), a skip elsewhere."""
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{path} is required in CI (apt-get install slurmctld slurmd slurm-client munge)")
    pytest.skip(f"{path} not installed")


@pytest.fixture
def scontrol_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for running the real scontrol offline: it needs a slurm.conf even for hostnames."""
    d = tmp_path_factory.mktemp("slurmconf")
    conf = d / "slurm.conf"
    conf.write_text("ClusterName=offline\nSlurmctldHost=localhost\nNodeName=n1 State=CLOUD\nPartitionName=p Nodes=n1\n")
    env = dict(os.environ)
    env["SLURM_CONF"] = str(conf)
    return env


class FakeEc2:
    """EC2 answered in-process by botocore ``before-call`` hooks, for scale tests where moto is too slow.
    Implements the calls the agent makes when resuming: DescribeInstances (by cluster tag or by launch
    token), CreateFleet (instant, always fulfilled), CreateTags."""

    def __init__(self) -> None:
        import boto3
        from botocore.awsrequest import AWSResponse

        self.client = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="y", region_name="us-east-1").client(
            "ec2", region_name="us-east-1"
        )
        self._response = AWSResponse
        self.calls: Counter[str] = Counter()
        self.fleets: list[list[str]] = []
        self.instances: dict[str, dict[str, Any]] = {}
        self.node_tags: dict[str, str] = {}
        self.ips: dict[str, str] = {}
        self.client.meta.events.register("before-call.ec2.*", self._answer)

    def _answer(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        """``params`` is the serialized request: EC2's query protocol, flat keys like ``TagSpecification.1.Tag.2.Key``."""
        import datetime

        from tests.agents.ec2_fault_proxy import indexed

        q: dict[str, str] = {k: str(v) for k, v in params["body"].items()}
        op = model.name
        self.calls[op] += 1
        ok = self._response("https://ec2.fake", 200, {}, None)
        if op == "CreateFleet":
            n = int(q["TargetCapacitySpecification.TotalTargetCapacity"])
            tags = {}
            j = 1
            while f"TagSpecification.1.Tag.{j}.Key" in q:
                tags[q[f"TagSpecification.1.Tag.{j}.Key"]] = q[f"TagSpecification.1.Tag.{j}.Value"]
                j += 1
            ids = []
            for _i in range(n):
                k = len(self.instances)
                iid = f"i-{k + 1:017x}"
                ip = f"10.{k // 65536}.{k // 256 % 256}.{k % 256}"
                self.ips[iid] = ip
                self.instances[iid] = {
                    "InstanceId": iid,
                    "State": {"Name": "running"},
                    "LaunchTime": datetime.datetime.now(datetime.timezone.utc),
                    "PrivateIpAddress": ip,
                    "InstanceType": "p5.48xlarge",
                    "Tags": [{"Key": k2, "Value": v} for k2, v in tags.items()],
                }
                ids.append(iid)
            self.fleets.append(ids)
            return ok, {"FleetId": "fleet-1", "Instances": [{"InstanceIds": ids}], "Errors": []}
        if op == "CreateTags":
            for iid in indexed(q, "ResourceId"):
                j = 1
                while f"Tag.{j}.Key" in q:
                    key, value = q[f"Tag.{j}.Key"], q.get(f"Tag.{j}.Value", "")
                    self.instances[iid]["Tags"].append({"Key": key, "Value": value})
                    if key == "gpucluster:node-name":
                        self.node_tags[iid] = value
                    j += 1
            return ok, {}
        if op == "DescribeInstances":
            filters: dict[str, list[str]] = {}
            j = 1
            while f"Filter.{j}.Name" in q:
                filters[q[f"Filter.{j}.Name"]] = indexed(q, f"Filter.{j}.Value")
                j += 1
            out = []
            for inst in self.instances.values():
                tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
                if all(tags.get(name[4:]) in values for name, values in filters.items() if name.startswith("tag:")):
                    out.append(inst)
            return ok, {"Reservations": [{"Instances": out}] if out else []}
        raise AssertionError(f"FakeEc2 does not implement {op}")
