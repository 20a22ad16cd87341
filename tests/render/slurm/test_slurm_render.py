"""Rendered Slurm files: exact node / partition / GRES lines from the instance catalog, every stack's
files accepted by the real slurmctld and slurmdbd (Debian 22.05) and pinned by golden files, and the
node-side scripts run for real (the TaskProlog; the munge-key and agent-package helper against moto)."""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml

from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.render.slurm.agent import LaunchTarget, agent_bundle, agent_config, aws_helper, boot_config, sha256
from gpucluster.render.slurm.compute import task_prolog
from gpucluster.render.slurm.conf import cgroup_conf, gres_conf, gres_line, node_line, partition_line, slurm_conf, topology_conf
from gpucluster.render.slurm.guard import (
    IMDS_GUARD,
    SIGNERS_SYSUSERS,
    imds_guard_bootcmd,
    imds_guard_script,
    imds_guard_unit,
)
from gpucluster.render.slurm.image import NODE_PACKAGES
from gpucluster.render.slurm.names import SlurmContext, munge_secret_name
from gpucluster.tools.plan.run.stackfile import stack_names
from gpucluster_agents import contract
from gpucluster_agents.contract import parse as parse_config
from tests.conftest import GOLDEN, ROOT, check_golden, group, make_config, require_tool
from tests.plans import shipped_plan
from tests.render.slurm_check import SLURMCTLD, SLURMDBD, check_slurmctld, check_slurmdbd, conf_files

pytestmark = pytest.mark.slow  # runs slurmctld and slurmdbd on every stack's files

CATALOG = load_catalog()
SLURM_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf", "slurmdbd.conf", "job_container.conf")


def context(*groups, **slurm) -> SlurmContext:
    return SlurmContext.of(load_spec(make_config(*groups, slurm=slurm), stack="lines").cluster)


P5 = group(name="p5", maxSize=16)
DEV = {"name": "dev", "instanceType": "g6e.2xlarge", "availabilityZones": ["us-east-1a"], "minSize": 2, "maxSize": 2}
TRN = group(name="trn-a", instanceType="trn1.32xlarge", maxSize=1)


# --- exact lines -------------------------------------------------------------------------------------------


def test_node_lines_come_from_the_catalog():
    ctx = context(P5, DEV, TRN, nodeGroups=[{"name": "dev", "mode": "static", "features": ["interactive"], "weight": 5}])
    lines = [node_line(g) for g in list(ctx.node_groups)]
    assert lines == [
        # 192 vCPUs, 95 % of 2,097,152 MiB, 8 H100, EFA, the zone
        "NodeName=p5-[1-16] State=CLOUD CPUs=192 RealMemory=1992294 Gres=gpu:h100:8 Features=dynamic,p5.48xlarge,h100,efa,us-east-1a",
        "NodeName=dev-[1-2] State=CLOUD CPUs=8 RealMemory=62259 Gres=gpu:l40s:1 Features=static,g6e.2xlarge,l40s,us-east-1a,interactive "
        "Weight=5",
        # one node: no range; 16 Trainium devices as a Neuron GRES
        "NodeName=trn-a-1 State=CLOUD CPUs=128 RealMemory=498073 Gres=neuron:16 Features=dynamic,trn1.32xlarge,trainium,efa,us-east-1a",
    ]


def test_partition_lines_default_tier_and_memory_per_cpu():
    ctx = context(P5, DEV, nodeGroups=[{"name": "dev", "mode": "static", "default": True}, {"name": "p5", "priorityTier": 10}])
    lines = [partition_line(g) for g in list(ctx.node_groups)]
    assert lines == [
        "PartitionName=p5 Nodes=p5-[1-16] Default=NO MaxTime=INFINITE State=UP DefMemPerCPU=10376 PriorityTier=10",
        "PartitionName=dev Nodes=dev-[1-2] Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=7782",
    ]


def test_gres_lines_name_device_files():
    ctx = context(
        P5, DEV, TRN, group(name="cpu", instanceType="m7i.xlarge", maxSize=2), nodeGroups=[{"name": "dev", "mode": "static"}]
    )
    lines = [gres_line(g) for g in list(ctx.node_groups)]
    assert lines == [
        "NodeName=p5-[1-16] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
        "NodeName=dev-[1-2] Name=gpu Type=l40s File=/dev/nvidia0",
        "NodeName=trn-a-1 Name=neuron File=/dev/neuron[0-15]",
        None,  # no accelerator, no GRES
    ]
    conf = slurm_conf(ctx)
    assert "GresTypes=gpu,neuron\n" in conf
    assert "SuspendExcParts=dev\n" in conf  # static partitions are never powered down


def test_slurm_conf_keys_for_cloud_nodes_efa_and_configless():
    conf = slurm_conf(context(P5, accounting={}, powerSaving={"suspendTimeSeconds": 900})).splitlines()
    for line in (
        "SlurmctldHost=lines-head(slurmctld.lines.gpucluster.internal)",
        "SuspendTime=900",
        "ResumeTimeout=1800",
        "ResumeProgram=/opt/gpucluster/bin/slurm-resume",
        "SuspendProgram=/opt/gpucluster/bin/slurm-suspend",
        "ResumeFailProgram=/opt/gpucluster/bin/slurm-resume-fail",
        "SlurmctldParameters=idle_on_node_suspend,enable_configless",  # the head node's 23.11: no defunct keys
        "PropagateResourceLimitsExcept=MEMLOCK",
        "TopologyPlugin=topology/tree",
        "TaskProlog=/etc/gpucluster/slurm/task-prolog",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "StateSaveLocation=/srv/slurm/slurmctld",
    ):
        assert line in conf, line
    assert not any(line.startswith("SuspendExcParts") for line in conf)


def test_agent_config_round_trips_through_the_agent_and_names_every_group():
    ctx = context(P5, DEV, nodeGroups=[{"name": "dev", "mode": "static"}])
    targets = {
        "p5": LaunchTarget("lt-0aaa", ("subnet-0aaa",), "pg-1"),
        "dev": LaunchTarget("lt-0bbb", ("subnet-0bbb",)),
    }
    built = agent_config(ctx, targets)
    cfg = parse_config(json.loads(contract.to_json(built)))  # render -> JSON -> the agent's own parser
    assert cfg == built
    p5, dev = cfg.node_groups
    assert (p5.name, p5.mode, p5.max_nodes, p5.launch_template_id, p5.launch_template_version) == (
        "p5",
        "dynamic",
        16,
        "lt-0aaa",
        "$Default",
    )
    assert (p5.efa_enabled, p5.placement_group, p5.subnet_ids) == (True, "pg-1", ("subnet-0aaa",))
    assert (dev.name, dev.mode, dev.static, dev.max_nodes) == ("dev", "static", True, 2)
    assert cfg.state_dir == "/srv/slurm/agent" and cfg.topology_conf == "/var/lib/gpucluster/slurm/topology.conf"


def test_the_repair_brake_reaches_the_agent_config_and_its_defaults_write_nothing():
    targets = {"p5": LaunchTarget("lt-0aaa", ("subnet-0aaa",))}
    default = contract.to_dict(agent_config(context(P5), targets))
    assert "repair" not in default  # the rendered agent.json only grows when a stack sets one
    built = agent_config(context(P5, agent={"repairBrakePercent": 35, "repairBrakeWindowSeconds": 900}), targets)
    cfg = parse_config(json.loads(contract.to_json(built)))
    assert (cfg.repair.brake_percent, cfg.repair.brake_window_seconds) == (35, 900)
    assert cfg.repair.max_share_percent == 10  # the rest keep the agent's defaults


def test_rolling_updates_reach_the_agent_config_and_their_defaults_write_nothing():
    targets = {"p5": LaunchTarget("lt-0aaa", ("subnet-0aaa",))}
    assert "updates" not in contract.to_dict(agent_config(context(P5), targets))
    section = {"maxDrainedPercent": 25, "maintenanceWindow": "Sat,Sun 02:00-06:00", "stopAfterBootFailures": 3}
    cfg = parse_config(json.loads(contract.to_json(agent_config(context(P5, updates=section), targets))))
    assert (cfg.updates.max_drained_percent, cfg.updates.maintenance_window) == (25, "Sat,Sun 02:00-06:00")
    assert cfg.updates.stop_after_boot_failures == 3 and cfg.updates.window is not None


def test_rebaselining_reaches_the_agent_config_for_the_gpu_groups_with_the_artifact_bucket():
    targets = {"p5": LaunchTarget("lt-0aaa", ("subnet-0aaa",))}
    cfg = parse_config(json.loads(contract.to_json(agent_config(context(P5), targets, artifact_bucket="c-slurm-0a1b"))))
    spec = cfg.updates.baseline
    assert spec is not None and (spec.bucket, spec.prefix, spec.groups, spec.nodes) == ("c-slurm-0a1b", "baselines/", ("p5",), 2)
    assert dict(spec.thresholds) == {"gemm_tflops": 5.0, "hbm_copy_gbps": 5.0, "nccl_busbw_gbps": 10.0}
    assert spec.package_dir == "/opt/gpucluster/lib"  # where compute nodes unpack the node package
    section = {"rebaseline": {"nodes": 3, "gemmMaxDropPercent": 2.5}}
    cfg = parse_config(json.loads(contract.to_json(agent_config(context(P5, updates=section), targets, artifact_bucket="b-1x"))))
    assert cfg.updates.baseline is not None and cfg.updates.baseline.nodes == 3
    assert dict(cfg.updates.baseline.thresholds)["gemm_tflops"] == 2.5
    off = agent_config(context(P5, updates={"rebaseline": {"nodes": 0}}), targets, artifact_bucket="b-1x")
    assert off.updates.baseline is None


@pytest.mark.parametrize("uid", ["0", "1000"])
def test_the_operator_command_runs_the_agent_as_slurm(tmp_path, uid):
    """/usr/local/sbin/gpucluster-agent: dash parses it; run with this checkout's agent (paths swapped), a fake
    ``id`` and ``runuser``: as root it goes through ``runuser -u slurm``, as anyone else straight to the agent."""
    from gpucluster.render.slurm.head import agent_command
    from gpucluster.render.slurm.names import AGENT_CONFIG_PATH, AGENT_LIB

    script = agent_command()
    subprocess.run(["/bin/sh", "-n"], input=script, text=True, check=True)
    config = tmp_path / "agent.json"
    rendered = contract.to_dict(agent_config(context(P5), {"p5": LaunchTarget("lt-0aaa", ("subnet-0aaa",))}))
    config.write_text(json.dumps({**rendered, "state_dir": str(tmp_path / "state"), "log_file": str(tmp_path / "a.log")}))
    local = (
        script.replace("/usr/bin/python3", sys.executable).replace(AGENT_LIB, str(ROOT)).replace(AGENT_CONFIG_PATH, str(config))
    )
    (tmp_path / "gpucluster-agent").write_text(local)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (fake / "runuser").write_text('#!/bin/sh\necho "runuser $1 $2" >&2\nshift 3\nexec "$@"\n')
    for f in (fake / "id", fake / "runuser", tmp_path / "gpucluster-agent"):
        f.chmod(0o755)
    out = subprocess.run(
        [str(tmp_path / "gpucluster-agent"), "status"],
        env={"PATH": f"{fake}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "no repair brake on" in out.stdout and "no capacity or failure holds" in out.stdout
    assert ("runuser -u slurm" in out.stderr) is (uid == "0")


def test_agent_bundle_is_reproducible_and_importable(tmp_path):
    a, b = agent_bundle(), agent_bundle()
    assert a == b and sha256(a) == hashlib.sha256(a).hexdigest()
    import zipfile

    zipfile.ZipFile(__import__("io").BytesIO(a)).extractall(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", "import gpucluster_agents.cli as c; print(c.COMMANDS)"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "resume" in out.stdout
    # The health program finds NVML's binding in the package itself, not in the image: from the extracted
    # package alone (python -I: no site-packages), the real binding loads and says there is no driver here.
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import pynvml; from gpucluster_agents.health.nvml import load_binding;"
        " b = load_binding(); print(b.__name__, pynvml.__file__.startswith(sys.argv[1]))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert out.stdout.split() == ["pynvml", "True"], out.stdout + out.stderr


# --- every stack's files: golden and accepted by the real Slurm -------------------------------------------------


def slurm_stack_files() -> list[tuple[str, dict[str, str]]]:
    out = []
    for stack in stack_names():
        plan = shipped_plan(stack)
        head = [p for p in plan.files if p.endswith("/etc/slurm/slurm.conf")]
        if not head:
            continue
        prefix = head[0][: -len("/etc/slurm/slurm.conf")]
        files = {
            name: plan.files[f"{prefix}/etc/slurm/{name}"] for name in SLURM_FILES if f"{prefix}/etc/slurm/{name}" in plan.files
        }
        files["topology.conf"] = plan.files[f"{prefix}/var/lib/gpucluster/slurm/topology.conf"]
        files["agent.json"] = plan.files[f"{prefix}/etc/gpucluster/agent.json"]
        out.append((stack, files))
    return out


STACK_FILES = slurm_stack_files()


def test_there_is_a_slurm_stack():
    assert "slurm-p5" in [s for s, _ in STACK_FILES]


@pytest.mark.parametrize(("stack", "files"), STACK_FILES, ids=[s for s, _ in STACK_FILES])
def test_stack_slurm_files_golden_and_accepted_by_slurmctld(stack, files, tmp_path, update_golden):
    for name, text in sorted(files.items()):
        check_golden(GOLDEN / "slurm" / stack / name, text, update_golden)
    require_tool(SLURMCTLD)
    rc, problems = check_slurmctld({k: v for k, v in files.items() if k.endswith(".conf") and k != "slurmdbd.conf"}, tmp_path)
    assert rc == 124 and problems == [], problems
    parse_config(__import__("json").loads(files["agent.json"]))


@pytest.mark.parametrize(("stack", "files"), [sf for sf in STACK_FILES if "slurmdbd.conf" in sf[1]])
def test_stack_slurmdbd_conf_accepted_by_slurmdbd(stack, files, tmp_path):
    require_tool(SLURMDBD)
    rc, problems = check_slurmdbd(files["slurmdbd.conf"], tmp_path)
    assert rc == 124 and problems == [], problems


VARIANTS = {
    "neuron-static-only": make_config(
        group(name="trn", instanceType="trn1.32xlarge", minSize=1, maxSize=4, desiredSize=1),
        slurm={"nodeGroups": [{"name": "trn", "mode": "static"}]},
    ),
    "three-partitions": make_config(
        P5,
        DEV,
        group(name="a100-spot", instanceType="p4d.24xlarge", maxSize=1, capacity={"type": "spot"}),
        slurm={
            "nodeGroups": [{"name": "dev", "mode": "static", "default": True}, {"name": "p5", "priorityTier": 10, "weight": 10}]
        },
    ),
}


@pytest.mark.parametrize("config", VARIANTS.values(), ids=VARIANTS.keys())
def test_variants_accepted_by_slurmctld(config, tmp_path):
    require_tool(SLURMCTLD)
    ctx = SlurmContext.of(load_spec(config, stack="variant").cluster)
    files = conf_files(ctx)
    rc, problems = check_slurmctld(files, tmp_path)
    assert rc == 124 and problems == [], problems


def test_the_check_can_fail(tmp_path):
    """The check above refuses a broken file: an unknown key in gres.conf stops slurmctld."""
    require_tool(SLURMCTLD)
    ctx = context(P5)
    files = {
        "slurm.conf": slurm_conf(ctx),
        "gres.conf": gres_conf(ctx) + "Bogus=1\n",
        "cgroup.conf": cgroup_conf(ctx),
        "topology.conf": topology_conf(ctx),
    }
    rc, problems = check_slurmctld(files, tmp_path)
    assert rc == 1 and any("Bogus" in p for p in problems), problems


def test_golden_dir_has_no_stale_files():
    expected = {GOLDEN / "slurm" / s / name for s, files in STACK_FILES for name in files}
    found = {
        p for p in (GOLDEN / "slurm").rglob("*") if p.is_file() and not {"by-version", "identity", "containers"} & set(p.parts)
    }
    # by-version/: test_slurm_versions.py; identity/: test_identity_render.py; containers/: test_containers_render.py
    assert found <= expected


# --- the node-side scripts, run ----------------------------------------------------------------------------------


def test_task_prolog_exports_the_node_environment_but_not_over_the_jobs(tmp_path):
    ctx = context(P5)
    g = ctx.node_groups[0]
    script = tmp_path / "task-prolog"
    script.write_text(task_prolog(g))
    script.chmod(0o755)
    env_file = tmp_path / "nccl.env"
    env_file.write_text("FI_PROVIDER=efa\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME=^docker,lo,veth\n")
    sh = require_tool("sh")
    out = subprocess.run(
        [sh, str(script)],
        env={"PATH": "/usr/bin:/bin", "GPUCLUSTER_NCCL_ENV": str(env_file), "NCCL_DEBUG": "INFO", "LD_LIBRARY_PATH": "/x"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == [
        "export FI_PROVIDER=efa",
        "export NCCL_SOCKET_IFNAME=^docker,lo,veth",  # NCCL_DEBUG is the job's own
        "export LD_LIBRARY_PATH=/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib:/opt/aws-ofi-nccl/lib:/x",
    ]


def test_task_prolog_never_runs_what_the_env_file_holds(tmp_path):
    """Defence in depth: even a hand-edited nccl.env with shell code in it is never evaluated;
    lines whose name is not a variable name are skipped, values are passed on literally."""
    ctx = context(P5)
    g = ctx.node_groups[0]
    script = tmp_path / "task-prolog"
    script.write_text(task_prolog(g))
    marker = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    canary = bin_dir / "gpucluster_canary"
    canary.write_text(f"#!/bin/sh\ntouch {marker}\n")
    canary.chmod(0o755)
    env_file = tmp_path / "nccl.env"
    env_file.write_text(
        "NCCL_DEBUG=INFO\n"
        "A}; gpucluster_canary; : ${B=2\n"
        "X;gpucluster_canary;Y=1\n"
        "$(gpucluster_canary)=1\n"
        "NCCL_ALGO=$(gpucluster_canary) `gpucluster_canary` ${IFS} 'q\" \\\n"
        "no equals sign\n"
        "1BAD=1\n"
        "LAST=no newline at the end"
    )
    out = subprocess.run(
        [require_tool("sh"), str(script)],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUCLUSTER_NCCL_ENV": str(env_file)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert not marker.exists()
    assert out[:3] == [
        "export NCCL_DEBUG=INFO",
        "export NCCL_ALGO=$(gpucluster_canary) `gpucluster_canary` ${IFS} 'q\" \\",  # literal, as slurmstepd takes it
        "export LAST=no newline at the end",
    ]
    assert out[3].startswith("export LD_LIBRARY_PATH=") and len(out) == 4


def test_env_file_refuses_what_would_change_its_lines():
    from gpucluster.render.core import env_file

    assert (
        env_file({"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "^docker,lo"}) == "NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=^docker,lo\n"
    )
    for bad in ({"A;B": "1"}, {"1A": "1"}, {"A": "x\ny=1"}, {"A": "x\ry"}, {"A": "x\u2028y"}, {"A": "\x00"}):
        with pytest.raises(ValueError, match="refusing"):
            env_file(bad)


def test_shell_scripts_parse(tmp_path):
    bash = require_tool("bash")
    plan_files = {p: t for _, files in [(s, shipped_plan(s).files) for s, _ in STACK_FILES] for p, t in files.items()}
    scripts = {p: t for p, t in plan_files.items() if "/usr/local/sbin/gpucluster-" in p and t.startswith("#!/bin/")}
    assert any(p.endswith("gpucluster-slurm-head") for p in scripts) and any(p.endswith("gpucluster-slurm-node") for p in scripts)
    for path, text in scripts.items():
        f = tmp_path / "s.sh"
        f.write_text(text)
        result = subprocess.run([bash, "-n", str(f)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{path}: {result.stderr}"


@pytest.fixture
def helper(tmp_path):
    ctx = context(P5)
    path = tmp_path / "gpucluster-aws"
    path.write_text(aws_helper())
    path.chmod(0o755)
    Path(f"{path}.json").write_text(boot_config(ctx).to_json())  # where the user data puts it: next to the helper
    return path


def helper_env(moto: str, key_file: Path, root: Path | None = None, imds: str | None = None) -> dict[str, str]:
    """The environment the boot helper (and the node package's programs it shares code with) runs in here: moto's
    endpoints, fake credentials, no IMDS but the test's, ``root`` for every path."""
    return {
        "PATH": os.environ["PATH"],
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
        "GPUCLUSTER_SM_ENDPOINT": moto,
        "GPUCLUSTER_S3_ENDPOINT": moto,
        "GPUCLUSTER_MUNGE_KEY": str(key_file),
        **({"GPUCLUSTER_ROOT": str(root)} if root else {}),
        **({"GPUCLUSTER_IMDS": imds} if imds else {}),
    }


def run_helper(
    helper: Path, moto: str, key_file: Path, *args: str, root: Path | None = None, imds: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = helper_env(moto, key_file, root, imds)
    return subprocess.run([sys.executable, str(helper), *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_munge_key_is_made_once_in_secrets_manager_and_read_by_every_node(helper, moto_endpoint, tmp_path, aws_env):
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", data=b"", method="POST"), timeout=10)
    sm = boto3.client("secretsmanager", region_name="us-east-1", endpoint_url=moto_endpoint)
    sm.create_secret(Name=munge_secret_name("lines"))  # what the stack creates: a secret with no value
    head_key, again, node_key = tmp_path / "head.key", tmp_path / "again.key", tmp_path / "node.key"
    made = run_helper(helper, moto_endpoint, head_key, "munge-key", "--create")
    assert made.returncode == 0, made.stderr
    assert "created the munge key" in made.stdout
    key = head_key.read_bytes()
    assert len(key) == 1024 and stat.S_IMODE(head_key.stat().st_mode) == 0o400
    # a second head node (a replacement) and a compute node read the same key; nothing makes a new one
    for path, args in ((again, ("munge-key", "--create")), (node_key, ("munge-key",))):
        r = run_helper(helper, moto_endpoint, path, *args)
        assert r.returncode == 0 and "created" not in r.stdout, r.stdout + r.stderr
        assert path.read_bytes() == key
    assert sm.get_secret_value(SecretId=munge_secret_name("lines"))["SecretBinary"] == key


def write_package(root: Path, sha: str) -> None:
    f = root / "etc" / "gpucluster" / "agent-package.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({"bucket": "artifacts", "key": "agent.zip", "sha256": sha, "dest": "/opt/gpucluster/lib"}))


def test_agent_package_is_installed_only_with_its_checksum(helper, moto_endpoint, tmp_path, aws_env):
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket="artifacts")
    bundle = agent_bundle()
    s3.put_object(Bucket="artifacts", Key="agent.zip", Body=bundle)
    root = tmp_path / "root"
    dest = root / "opt" / "gpucluster" / "lib"
    write_package(root, "0" * 64)
    bad = run_helper(helper, moto_endpoint, tmp_path / "k", "install-agent", root=root)
    assert bad.returncode != 0 and "expected 0000" in bad.stderr and not dest.exists()
    write_package(root, sha256(bundle))
    good = run_helper(helper, moto_endpoint, tmp_path / "k", "install-agent", root=root)
    assert good.returncode == 0, good.stderr
    assert (dest / "gpucluster_agents" / "agent.py").exists()
    again = run_helper(helper, moto_endpoint, tmp_path / "k", "install-agent", root=root)
    assert "already installed" in again.stdout


class FakeImds:
    """IMDSv2's token and user-data endpoints, serving ``self.user_data``."""

    def __init__(self, user_data: bytes) -> None:
        import http.server
        import threading

        imds = self
        self.user_data = user_data

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):
                self._send(b"token-1" if self.path == "/latest/api/token" else None)

            def do_GET(self):
                ok = self.path == "/latest/user-data" and self.headers.get("X-aws-ec2-metadata-token") == "token-1"
                self._send(imds.user_data if ok else None)

            def _send(self, body):
                self.send_response(200 if body is not None else 401)
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _order(text: str, *needles: str) -> list[int]:
    lines = text.splitlines()
    return [
        next(i for i, line in enumerate(lines) if needle in line and not line.lstrip().startswith(("#", "trap")))
        for needle in needles
    ]


def test_head_setup_runs_in_the_order_the_daemons_need():
    files = shipped_plan("slurm-p5").files
    setup = files["slurm-p5-slurm-head-files/usr/local/sbin/gpucluster-slurm-head"]
    order = _order(
        setup,
        "hostnamectl set-hostname slurm-p5-head",  # slurmctld only runs where SlurmctldHost names the host
        "mount /srv/slurm",  # state and database on the data volume
        "mount /var/lib/mysql",
        "apt-get -o DPkg::Lock::Timeout=600 install",
        "rm -f /usr/sbin/policy-rc.d",
        "gpucluster-imds-guard.service",
        "munge-key --create",
        "systemctl enable --now munge",
        "install -d -o slurm -g slurm",
        "install-agent",
        "systemctl enable --now mariadb",
        "systemctl enable --now slurmdbd",
        "systemctl enable --now slurmctld",
        "systemctl enable --now gpucluster-agent-maintain.timer",
        "systemctl enable gpucluster-head-config.service",
    )
    assert order == sorted(order), order
    node = files["slurm-p5-slurm-p5-lt/usr/local/sbin/gpucluster-slurm-node"]
    assert "apt-get" not in node  # a baked image (slurm.images) holds the packages: tests/render/slurm/test_node_image.py
    order = _order(
        node,
        "gpucluster-aws node-name",  # the name the agent gave the instance (its launch's node map, or its tag)
        "systemctl enable --now gpucluster-imds-guard.service",  # before the key and any Slurm daemon
        "munge-key",
        "SLURMD_OPTIONS=",
        "systemctl enable --now munge",
        "systemctl enable --now slurmd",
    )
    assert order == sorted(order), order


# --- the IMDS guard (only root reaches the instance role's credentials on a compute node) -------------------


def _unit(text: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=True, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    unit.read_string(text)
    return unit


def test_compute_nodes_apply_the_imds_guard_first_and_slurmd_requires_it(tmp_path):
    """The rendered compute user data: the guard is cloud-init's first boot command (which its own
    config runs before write_files, so the script travels in the command), a unit in a firewall's slot
    runs it at every boot, slurmd requires that unit, and the setup starts it before the munge key and
    slurmd. tests/e2e/test_imds_guard_e2e.py runs this very bootcmd against a real slurmd."""
    files = shipped_plan("slurm-p5").files
    require_tool("cloud-init")  # its own module order: bootcmd, then write_files
    modules = [
        m if isinstance(m, str) else m[0] for m in yaml.safe_load(Path("/etc/cloud/cloud.cfg").read_text())["cloud_init_modules"]
    ]
    modules = [m.replace("-", "_") for m in modules]
    assert modules.index("bootcmd") < modules.index("write_files"), modules
    for lt in ("slurm-p5-slurm-p5-lt", "slurm-p5-slurm-dev-lt"):
        doc = yaml.safe_load(files[f"{lt}/user-data"])
        assert doc["bootcmd"][0] == list(imds_guard_bootcmd()), lt
        script = doc["bootcmd"][0][-1]
        assert script == imds_guard_script(head=False)
        assert '--uid-owner 0 -j RETURN"' in script and "--uid-owner slurm" not in script  # jobs never, only root
        assert "REJECT --reject-with tcp-reset" in script and "fd00:ec2::254/128" in script
        unit = _unit(files[f"{lt}/etc/systemd/system/gpucluster-imds-guard.service"])
        assert unit["Unit"]["DefaultDependencies"] == "no"
        assert {"network-pre.target", "network-online.target", "munge.service", "slurmd.service"} <= set(
            unit["Unit"]["Before"].split()
        )
        assert (unit["Service"]["Type"], unit["Service"]["ExecStart"]) == ("oneshot", IMDS_GUARD)
        assert unit["Install"]["WantedBy"] == "sysinit.target"
        drop_in = _unit(files[f"{lt}/etc/systemd/system/slurmd.service.d/gpucluster.conf"])
        assert drop_in["Unit"]["Requires"] == "gpucluster-imds-guard.service"
        assert "gpucluster-imds-guard.service" in drop_in["Unit"]["After"].split()
    assert "iptables" in NODE_PACKAGES  # an image without it gets it before the unit must start
    # systemd reads the unit without a complaint (its command moved into this test's directory)
    analyze = require_tool("systemd-analyze")
    guard = tmp_path / "gpucluster-imds-guard"
    guard.write_text(imds_guard_script(head=False))
    guard.chmod(0o755)
    unit_file = tmp_path / "gpucluster-imds-guard.service"
    unit_file.write_text(imds_guard_unit(head=False).replace(IMDS_GUARD, str(guard)))
    verify = subprocess.run([analyze, "verify", "--man=no", str(unit_file)], capture_output=True, text=True, check=False)
    assert (verify.returncode, verify.stderr) == (0, ""), verify.stderr
    unit_file.write_text(unit_file.read_text().replace("Before=", "Befor="))  # the check can fail
    assert "Unknown key" in subprocess.run([analyze, "verify", "--man=no", str(unit_file)], capture_output=True, text=True).stderr


def test_head_node_guard_lets_root_slurm_and_the_collector_only():
    """slurm-p5 monitors (the default): the collector's signer's own user passes IMDS too, and nobody else (not
    ``prometheus``); the collector's loopback ports take root and ``prometheus`` only (tests/e2e/test_head_guard_e2e.py
    runs this script)."""
    files = shipped_plan("slurm-p5").files
    script = files["slurm-p5-slurm-head-files/usr/local/sbin/gpucluster-imds-guard"]
    assert script == imds_guard_script(head=True, collector=True)
    assert re.findall(r"-A \$chain -m owner --uid-owner (\S+) -j RETURN", script) == ["0", "slurm", "gpucluster-signer"]
    assert re.findall(r"-A \$loopback -m owner --uid-owner (\S+) -j RETURN", script) == ["0", "prometheus"]
    assert "REJECT --reject-with tcp-reset" in script and "ip6tables-restore" in script
    unit = _unit(files["slurm-p5-slurm-head-files/etc/systemd/system/gpucluster-imds-guard.service"])
    before = set(unit["Unit"]["Before"].split())
    assert {"network-pre.target", "slurmctld.service", "munge.service", "gpucluster-collector.service"} <= before
    assert "gpucluster-collector-signer.service" in before
    # without the collector, as before: root and slurm
    assert re.findall(r"--uid-owner (\S+) -j RETURN", imds_guard_script(head=True)) == ["0", "slurm"]
    assert "GPUCLUSTER-LOOPBACK" not in imds_guard_script(head=True)


def test_m2_head_guard_unit_makes_the_signers_user_before_every_run(tmp_path):
    """The user the rules name exists at every boot, also on a head node whose files were rewritten after its setup:
    the unit runs systemd-sysusers on the rendered file first (tests/e2e/test_head_guard_e2e.py runs that file through
    the real systemd-sysusers); both collector units require the guard, so neither listens unguarded."""
    files = shipped_plan("slurm-p5").files
    head = "slurm-p5-slurm-head-files"
    unit = _unit(files[f"{head}/etc/systemd/system/gpucluster-imds-guard.service"])
    assert unit["Service"]["ExecStartPre"] == f"/usr/bin/systemd-sysusers {SIGNERS_SYSUSERS}"
    assert f"{head}{SIGNERS_SYSUSERS}" in files
    assert {"systemd-remount-fs.service", "systemd-sysusers.service"} <= set(unit["Unit"]["After"].split())
    for name in ("gpucluster-collector.service", "gpucluster-collector-signer.service"):
        assert _unit(files[f"{head}/etc/systemd/system/{name}"])["Unit"]["Requires"] == "gpucluster-imds-guard.service"
    assert "ExecStartPre" not in imds_guard_unit(head=True) and "ExecStartPre" not in imds_guard_unit(head=False)
    analyze = require_tool("systemd-analyze")
    guard = tmp_path / "gpucluster-imds-guard"
    guard.write_text(imds_guard_script(head=True, collector=True))
    guard.chmod(0o755)
    unit_file = tmp_path / "gpucluster-imds-guard.service"
    unit_file.write_text(imds_guard_unit(head=True, collector=True).replace(IMDS_GUARD, str(guard)))
    verify = subprocess.run([analyze, "verify", "--man=no", str(unit_file)], capture_output=True, text=True, check=False)
    assert (verify.returncode, verify.stderr) == (0, ""), verify.stderr
