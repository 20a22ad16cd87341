"""The node health program wired into Slurm (``gpucluster:slurm.health``): slurm.conf's keys, accepted by
the real slurmctld 22.05 in every variant; the compute nodes' wrappers run for real with a fake health
program (exit codes, the time budget, a job's opt-out) and a fake scontrol; the node package that
carries the program reaches compute nodes; the section's validators."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.render.core import render
from gpucluster.render.slurm.agent import ARTIFACT_BUCKET_STAND_IN, agent_bundle, package_key, sha256, with_artifact_bucket
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.conf import cgroup_conf, gres_conf, slurm_conf, topology_conf
from gpucluster.render.slurm.health import (
    HEALTH_BOOT_UNIT,
    HEALTH_CHECK,
    HEALTH_CONFIG,
    OPT_OUT,
    PROLOG,
    PROLOG_DIR,
    health_conf_lines,
    health_files,
    wrapper_values,
)
from gpucluster.render.slurm.names import AGENT_LIB, AGENT_PACKAGE_PATH, AWS_HELPER, NODE_SETUP, SlurmContext
from tests.conftest import group, make_config, require_tool
from tests.render.slurm_check import SLURMCTLD, check_slurmctld, conf_files

pytestmark = pytest.mark.slow  # runs slurmctld on the rendered files

CATALOG = load_catalog()
P5 = group(name="p5", maxSize=4)
CPU = {"name": "cpu", "instanceType": "m7i.xlarge", "availabilityZones": ["us-east-1a"], "maxSize": 2}


def context(*groups, containers: bool = True, **health) -> SlurmContext:
    # the boot-time install path (`images.bake: false`): on a baked image the package and its install are in the
    # image's install part instead (tests/render/slurm/test_node_image.py, test_node_install_root.py)
    slurm: dict[str, object] = {"images": {"bake": False}, "containers": {"enabled": containers}}
    if health:
        slurm["health"] = health
    return SlurmContext.of(load_spec(make_config(*groups, slurm=slurm), stack="health").cluster)


def conf_keys(ctx: SlurmContext) -> dict[str, str]:
    return dict(line.split("=", 1) for line in health_conf_lines(ctx))


# --- slurm.conf ---------------------------------------------------------------------------------------------


def test_defaults_sweep_and_prolog_on_gpu_clusters():
    assert conf_keys(context(P5)) == {
        "HealthCheckProgram": HEALTH_CHECK,
        "HealthCheckInterval": "300",
        "HealthCheckNodeState": "ANY,CYCLE",
        "Prolog": f"{PROLOG_DIR}/*",  # the health prolog and the container prolog (prolog.d)
        "PrologFlags": "Alloc",
        "PrologEpilogTimeout": "90",  # the prolog's 60 s budget + 30: the wrapper ends first
        "SchedulerParameters": "nohold_on_prolog_fail",
    }
    assert "HealthCheckProgram=/etc/gpucluster/slurm/health-check\n" in slurm_conf(context(P5))


def test_knobs_reach_slurm_conf():
    keys = conf_keys(context(P5, intervalSeconds=900, nodeState="IDLE", cycle=False, prologTimeoutSeconds=20))
    assert keys["HealthCheckInterval"] == "900" and keys["HealthCheckNodeState"] == "IDLE"
    assert keys["PrologEpilogTimeout"] == "50"
    assert "Prolog" not in conf_keys(context(P5, prolog=False)) and "HealthCheckProgram" in conf_keys(context(P5, prolog=False))


def test_nothing_without_gpus_or_when_switched_off():
    assert conf_keys(context(CPU)) == {}
    assert conf_keys(context(P5, enabled=False)) == {}
    assert "HealthCheck" not in slurm_conf(context(P5, enabled=False))


HEALTH_VARIANTS = {
    "defaults": {},
    "idle-no-cycle": {"nodeState": "IDLE", "cycle": False, "intervalSeconds": 60},
    "alloc-no-prolog": {"nodeState": "ALLOC", "prolog": False},
    "long-prolog": {"prologTimeoutSeconds": 300, "nodeState": "MIXED"},
}


@pytest.mark.parametrize("health", HEALTH_VARIANTS.values(), ids=HEALTH_VARIANTS.keys())
def test_health_keys_accepted_by_slurmctld_22_05(health, tmp_path):
    require_tool(SLURMCTLD)
    ctx = context(P5, CPU, **health)
    files = conf_files(ctx)
    rc, problems = check_slurmctld(files, tmp_path)
    assert rc == 124 and problems == [], problems


def test_slurmctld_refuses_a_bad_health_key(tmp_path):
    """The check above can fail: slurmctld reports a node state it does not know (23.02's NONDRAINED_IDLE,
    which is why the model does not offer it)."""
    require_tool(SLURMCTLD)
    ctx = context(P5)
    conf = slurm_conf(ctx).replace("HealthCheckNodeState=ANY,CYCLE", "HealthCheckNodeState=NONDRAINED_IDLE")
    files = {"slurm.conf": conf, "gres.conf": gres_conf(ctx), "cgroup.conf": cgroup_conf(ctx)}
    files["topology.conf"] = topology_conf(ctx)
    _rc, problems = check_slurmctld(files, tmp_path)
    assert any("Invalid HealthCheckNodeState" in p for p in problems), problems


# --- the section's validators --------------------------------------------------------------------------------


def findings(*groups, **health):
    return load_spec(make_config(*groups, slurm={"health": health}), stack="health").findings


def test_node_states_22_05_does_not_know_are_refused():
    with pytest.raises(ConfigError) as exc:
        load_spec(make_config(P5, slurm={"health": {"nodeState": "NONDRAINED_IDLE"}}), stack="health")
    assert [f.path for f in exc.value.findings] == ["gpucluster:slurm.health.nodeState"]


def test_bounds_name_the_field():
    with pytest.raises(ConfigError) as exc:
        load_spec(make_config(P5, slurm={"health": {"sweepTimeoutSeconds": 60, "intervalSeconds": 30}}), stack="health")
    paths = {f.path for f in exc.value.findings}
    assert {"gpucluster:slurm.health.sweepTimeoutSeconds", "gpucluster:slurm.health.intervalSeconds"} <= paths, paths


def test_warnings_name_field_value_and_fix():
    (w,) = [f for f in findings(CPU, enabled=True) if f.code == "slurm-health-no-gpus"]
    assert w.path == "gpucluster:slurm.health.enabled" and "no Slurm node group has NVIDIA GPUs" in w.message and w.fix
    (w,) = [f for f in findings(P5, enabled=False, prolog=True) if f.code == "slurm-health-prolog-off"]
    assert w.path == "gpucluster:slurm.health.prolog"
    (w,) = [f for f in findings(P5, prologTimeoutSeconds=200) if f.code == "slurm-health-long-prolog"]
    assert w.value == 200 and "deep" in w.fix
    assert not [f for f in findings(P5) if f.code.startswith("slurm-health")]
    assert not [f for f in findings(CPU) if f.code.startswith("slurm-health")]  # the default says nothing


# --- compute nodes: files and the node package -----------------------------------------------------------------


def part_files(ctx: SlurmContext, name: str, metrics: bool = True) -> dict[str, str]:
    g = next(g for g in ctx.node_groups if g.name == name)
    return {f.path: f.text() for f in node_slurm_part(ctx, g, metrics=metrics).write_files}


def test_compute_nodes_get_the_wrappers_and_the_package_before_slurmd():
    ctx = context(P5, CPU)
    files = part_files(ctx, "p5")
    assert HEALTH_CHECK in files and PROLOG in files
    pointer = files[AGENT_PACKAGE_PATH]
    digest = sha256(agent_bundle())
    assert f'"key": "{package_key(digest)}"' in pointer and f'"sha256": "{digest}"' in pointer and AGENT_LIB in pointer
    assert ARTIFACT_BUCKET_STAND_IN in pointer and "real-bucket" in with_artifact_bucket(pointer, "real-bucket")
    setup = files[NODE_SETUP]
    assert setup.index("install-agent") < setup.index("systemctl enable --now slurmd")
    # a group without GPUs still gets both (slurm.conf names them for every node), as no-ops
    cpu = part_files(ctx, "cpu")
    assert "exit 0" in cpu[HEALTH_CHECK] and "gpucluster_agents.health" not in cpu[HEALTH_CHECK].split("exit 0")[1]
    assert "gpucluster_agents.health" not in cpu[PROLOG].replace("(python -m gpucluster_agents.health", "")


def test_no_health_no_package_on_compute_nodes():
    # no log shipper either, and no containers (their prolog and mount check are the package's)
    quiet = dataclasses.replace(context(P5, containers=False, enabled=False), monitoring=None)
    files = part_files(quiet, "p5", metrics=False)
    assert HEALTH_CHECK not in files and AGENT_PACKAGE_PATH not in files and "install-agent" not in files[NODE_SETUP]
    # the log shipper is in the package too: with the cluster's monitoring on (the default) the node installs it
    files = part_files(context(P5, enabled=False), "p5", metrics=False)
    assert AGENT_PACKAGE_PATH in files and "install-agent" in files[NODE_SETUP]
    # the metrics exporter is in the package too: with metrics on (the default) the node installs it
    files = part_files(context(P5, enabled=False), "p5")
    assert HEALTH_CHECK not in files and AGENT_PACKAGE_PATH in files and "install-agent" in files[NODE_SETUP]


# --- the wrappers, run -------------------------------------------------------------------------------------------


def wrapper(
    tmp_path: Path, template: str, budget: int, checks: bool = True, python: str | None = None, lib: str = AGENT_LIB
) -> Path:
    """The rendered wrapper, its paths pointed at ``tmp_path``: the interpreter (default: the fake below),
    the package directory, scontrol, the log, the config and the boot check's reason file."""
    values = wrapper_values(lib, python or str(tmp_path / "python"), str(tmp_path / "scontrol"))
    text = render(
        f"slurm/{template}.sh.j2",
        cluster="c",
        group="g",
        checks=checks,
        log_file=str(tmp_path / "health.log"),
        config=str(tmp_path / "health.json"),
        interval=300,
        budget=budget,
        slurm_timeout=budget + 30,
        opt_out=OPT_OUT,
        boot_fault=str(tmp_path / "health-boot.reason"),
        **values,
    )
    path = tmp_path / template
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fakes(tmp_path: Path, exit_code: int, sleep: float = 0) -> dict[str, str]:
    """A fake interpreter standing in for the health program (checks it is started isolated with the package
    directory, records the program's arguments, sleeps, exits) and a fake scontrol (records its call)."""
    program = tmp_path / "python"
    program.write_text(
        f'#!/bin/sh\n[ "$1 $2" = "-I -c" ] && [ "$4" = {AGENT_LIB} ] || {{ echo "not isolated: $*" >>{tmp_path}/program.calls; exit 99; }}\n'
        f'shift 4\necho "$@" >>{tmp_path}/program.calls\n' + (f"exec sleep {sleep}\n" if sleep else f"exit {exit_code}\n")
    )
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >>{tmp_path}/scontrol.calls\n')
    for p in (program, scontrol):
        p.chmod(0o755)
    return {"SLURMD_NODENAME": "p5-3", "SLURM_JOB_ID": "42"}


def run(path: Path, env: dict[str, str]) -> tuple[int, float]:
    import time

    start = time.monotonic()
    result = subprocess.run([str(path)], env={**env, "PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60)
    return result.returncode, time.monotonic() - start


def calls(tmp_path: Path, name: str) -> str:
    f = tmp_path / f"{name}.calls"
    return f.read_text() if f.exists() else ""


def test_wrappers_pass_shellcheck(tmp_path):
    shellcheck = require_tool("shellcheck")
    for template in ("health-check", "prolog"):
        for checks in (True, False):
            path = wrapper(tmp_path, template, 45, checks)
            done = subprocess.run([shellcheck, "-s", "bash", str(path)], capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken"
    broken.write_text(wrapper(tmp_path, "prolog", 5).read_text().replace('"${args[@]}"', "${args[@]}"))
    done = subprocess.run([shellcheck, "-s", "bash", str(broken)], capture_output=True, text=True, check=False)
    assert "SC2068" in done.stdout  # the check can fail


def test_node_wrappers_run_the_program_isolated_from_fixed_paths():
    """What a node gets: /usr/bin/python3 -I -c <code> /opt/gpucluster/lib, from /, and no variable that
    chooses a program, a config, a log, scontrol or the boot check's file."""
    files = part_files(context(P5), "p5")
    for path in (HEALTH_CHECK, PROLOG):
        text = files[path]
        assert "\ncd / || exit 0\n" in text
        assert "/usr/bin/python3 -I -c 'import sys; sys.path.insert(0, sys.argv.pop(1));" in text
        assert f'\' {AGENT_LIB} "${{args[@]}}"' in text
        assert not re.search(r"\$\{?(GPUCLUSTER_|PYTHON)", text) and "PYTHONPATH" not in text  # no variable read


@pytest.mark.parametrize(("template", "fault_rc"), [("health-check", 0), ("prolog", 1)])
def test_a_planted_package_and_environment_overrides_do_not_reach_the_program(tmp_path, template, fault_rc):
    """The rendered wrapper runs the real program (this interpreter, the package from a node-like agent
    directory, fake NVML readings through its binding) from slurmd's working directory, which holds an
    attacker's gpucluster_agents package and sitecustomize, with PYTHONPATH pointing there and every
    GPUCLUSTER_* variable the wrappers once honoured set to something that would change the outcome. None of
    it takes effect: the planted code never runs, the node's own config judges it, nothing is drained; and
    when its GPU goes bad the program (not the wrapper) drains it with the verdict's reason."""
    from gpucluster_agents.contract.health import to_json
    from tests.agents.health.fakes import agent_lib, node, p5_config, planted, scenario

    readings = node(tmp_path, scenario())
    lib = agent_lib(tmp_path / "lib", readings)
    (tmp_path / "health.json").write_text(to_json(p5_config(tmp_path, efa_count=0, slurm_bin_dir=str(tmp_path))))
    fakes(tmp_path, 0)  # scontrol (the program's, through its config, and the wrapper's) records its calls
    cwd = planted(tmp_path / "var-log-slurm", tmp_path / "planted")
    (tmp_path / "faulty.json").write_text(json.dumps(scenario(gpu_count=2)))
    (tmp_path / "evil-reason").write_text("gpucluster: planted (replace)\n")
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\necho evil $0 >>{tmp_path}/planted\n")
    evil.chmod(0o755)
    env = {
        "SLURMD_NODENAME": "p5-3",
        "SLURM_JOB_ID": "42",
        "PYTHONPATH": str(cwd),
        "GPUCLUSTER_HEALTH_PROGRAM": str(evil),
        "GPUCLUSTER_SCONTROL": str(evil),
        "GPUCLUSTER_HEALTH_CONFIG": str(tmp_path / "faulty.json"),
        "GPUCLUSTER_HEALTH_FAKE_NVML": str(tmp_path / "faulty.json"),
        "GPUCLUSTER_HEALTH_LOG": str(tmp_path / "evil.log"),
        "GPUCLUSTER_HEALTH_BOOT_FAULT": str(tmp_path / "evil-reason"),
        "PATH": os.environ["PATH"],
    }
    path = wrapper(tmp_path, template, 30, python=sys.executable, lib=str(lib))
    done = subprocess.run([str(path)], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (tmp_path / "health.log").read_text()
    assert not (tmp_path / "planted").exists() and not (tmp_path / "evil.log").exists()
    assert calls(tmp_path, "scontrol") == ""
    verdicts = [json.loads(line) for line in (tmp_path / "health.jsonl").read_text().splitlines()]
    assert [(v["node"], v["mode"], v["action"]) for v in verdicts] == [
        ("p5-3", template.replace("health-check", "sweep"), "none")
    ]
    # the same wrapper, the node's GPU gone bad: the real program judged it and drained through its config
    readings.write_text(json.dumps(scenario({2: {"remapped_rows": [0, 1, 1, 0]}})))
    done = subprocess.run([str(path)], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == fault_rc
    assert "reason=gpucluster: row_remap gpu2 row remap pending (reboot)" in calls(tmp_path, "scontrol").splitlines()
    assert not (tmp_path / "planted").exists()


def test_wrappers_parse(tmp_path):
    bash = require_tool("bash")
    for template in ("health-check", "prolog"):
        for checks in (True, False):
            path = wrapper(tmp_path, template, 5, checks)
            result = subprocess.run([bash, "-n", str(path)], capture_output=True, text=True, check=False)
            assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("program_exit", "prolog_exit"), [(0, 0), (1, 1), (2, 0), (3, 0)])
def test_prolog_passes_the_verdict_on(tmp_path, program_exit, prolog_exit):
    """0 healthy: the job starts; 1 a fault (the program drained the node): exit 1, Slurm requeues the
    job; 2 the program could not run and anything else: the job starts, logged."""
    env = fakes(tmp_path, program_exit)
    rc, _ = run(wrapper(tmp_path, "prolog", 5), env)
    assert rc == prolog_exit
    assert calls(tmp_path, "program").strip() == "prolog --node p5-3"
    assert calls(tmp_path, "scontrol") == ""  # the program drains on a fault, not the wrapper


def test_prolog_passes_the_config_when_the_node_has_one(tmp_path):
    (tmp_path / "health.json").write_text("{}")
    run(wrapper(tmp_path, "prolog", 5), fakes(tmp_path, 0))
    assert calls(tmp_path, "program").strip() == f"prolog --node p5-3 --config {tmp_path}/health.json"


def test_prolog_that_hangs_is_cut_at_its_budget_and_drains_the_node(tmp_path):
    rc, took = run(wrapper(tmp_path, "prolog", 1), fakes(tmp_path, 0, sleep=30))
    assert rc == 1 and took < 10
    assert calls(tmp_path, "scontrol").splitlines() == [
        "update",
        "NodeName=p5-3",
        "State=DRAIN",
        "Reason=gpucluster: health prolog timed out after 1 s (reboot)",
    ]
    assert "did not finish within 1 s" in (tmp_path / "health.log").read_text()


@pytest.mark.parametrize(
    ("comment", "extra", "skipped"),
    [
        (OPT_OUT, "", True),
        (f"nightly run,{OPT_OUT}", "", True),
        (f"ckpt=1 {OPT_OUT}", "", True),
        ("", OPT_OUT, True),  # --extra: what 23.11+ shows the prolog
        (f"x{OPT_OUT}", "", False),  # a word of its own, not a substring
        (f"{OPT_OUT}x", "", False),
        ("gpucluster-health=on", "", False),
        ("", "", False),
    ],
)
def test_a_job_opts_out_with_a_word_in_its_comment_or_extra(tmp_path, comment, extra, skipped):
    env = {**fakes(tmp_path, 1), "SLURM_JOB_COMMENT": comment, "SLURM_JOB_EXTRA": extra}
    rc, _ = run(wrapper(tmp_path, "prolog", 5), env)
    assert (rc, calls(tmp_path, "program") == "") == ((0, True) if skipped else (1, False))


@pytest.mark.parametrize("program_exit", [0, 1, 2, 7])
def test_sweep_always_exits_0_and_leaves_draining_to_the_program(tmp_path, program_exit):
    """slurmd ignores HealthCheckProgram's status: the node's state is what counts."""
    rc, _ = run(wrapper(tmp_path, "health-check", 5), fakes(tmp_path, program_exit))
    assert rc == 0 and calls(tmp_path, "program").strip() == "sweep --node p5-3" and calls(tmp_path, "scontrol") == ""


def test_sweep_that_hangs_drains_the_node_with_a_gpucluster_reason(tmp_path):
    rc, took = run(wrapper(tmp_path, "health-check", 1), fakes(tmp_path, 0, sleep=30))
    assert rc == 0 and took < 10
    assert "Reason=gpucluster: health sweep timed out after 1 s (reboot)" in calls(tmp_path, "scontrol").splitlines()


def test_wrappers_of_groups_without_gpus_run_nothing(tmp_path):
    env = fakes(tmp_path, 1)
    for template in ("health-check", "prolog"):
        rc, _ = run(wrapper(tmp_path, template, 5, checks=False), env)
        assert rc == 0
    assert calls(tmp_path, "program") == ""


def test_health_files_follow_the_switches():
    ctx = context(P5, prolog=False)
    g = ctx.node_groups[0]
    unit = f"/etc/systemd/system/{HEALTH_BOOT_UNIT}"
    assert [f.path for f in health_files(ctx, g)] == [HEALTH_CHECK, unit, HEALTH_CONFIG]


# --- the boot check: before slurmd, its fault drains the node -----------------------------------------------------


BOOT_REASON = "gpucluster: pcie_link gpu3 gen3 x16 < gen5 x16"


@pytest.mark.parametrize(("template", "rc"), [("health-check", 0), ("prolog", 1)])
def test_a_failed_boot_check_drains_the_node_with_its_reason(tmp_path, template, rc):
    """The boot check's reason file (this boot only): the HealthCheckProgram (at slurmd's start, before the
    node registers, and at every run after) and the prolog (the job slurmd was resumed for: back to the
    queue, even if it opted out) drain the node with it and run no check of their own."""
    (tmp_path / "health-boot.reason").write_text(BOOT_REASON + "\n")
    env = {**fakes(tmp_path, 0), "SLURM_JOB_COMMENT": OPT_OUT}
    assert run(wrapper(tmp_path, template, 5), env)[0] == rc
    assert calls(tmp_path, "program") == ""
    assert calls(tmp_path, "scontrol").splitlines() == ["update", "NodeName=p5-3", "State=DRAIN", f"Reason={BOOT_REASON}"]
    # a reason that is not the program's gets the gpucluster: mark (the agent acts on its own drains only)
    (tmp_path / "scontrol.calls").unlink()
    (tmp_path / "health-boot.reason").write_text("something else\n")
    run(wrapper(tmp_path, template, 5), env)
    assert "Reason=gpucluster: health boot check failed" in calls(tmp_path, "scontrol").splitlines()


@pytest.mark.parametrize("template", ["health-check", "prolog"])
def test_no_boot_fault_means_the_usual_check(tmp_path, template):
    (tmp_path / "health-boot.reason").write_text("")  # empty: no fault
    assert run(wrapper(tmp_path, template, 5), fakes(tmp_path, 0))[0] == 0
    assert calls(tmp_path, "program").split()[0] in ("sweep", "prolog") and calls(tmp_path, "scontrol") == ""


def test_gpu_nodes_run_the_boot_check_before_slurmd_and_others_do_not():
    ctx = context(P5, CPU)
    gpu, cpu = part_files(ctx, "p5"), part_files(ctx, "cpu")
    unit = f"/etc/systemd/system/{HEALTH_BOOT_UNIT}"
    drop_in = "/etc/systemd/system/slurmd.service.d/gpucluster.conf"
    assert "Before=slurmd.service" in gpu[unit] and f"ExecStart={AWS_HELPER} health" in gpu[unit]
    keys = dict(line.split("=", 1) for line in gpu[drop_in].splitlines() if "=" in line and not line.startswith("#"))
    assert keys["Wants"] == HEALTH_BOOT_UNIT and HEALTH_BOOT_UNIT in keys["After"].split()
    assert "Requires=" + HEALTH_BOOT_UNIT not in gpu[drop_in]  # a fault drains the node; slurmd still starts
    assert unit not in cpu and HEALTH_BOOT_UNIT not in cpu[drop_in]


def test_boot_unit_and_slurmd_drop_in_pass_systemd_analyze_verify(tmp_path):
    """systemd's own reader on the rendered unit and slurmd's drop-in (with a stand-in slurmd unit and
    helper in a root of their own)."""
    analyze = require_tool("systemd-analyze")
    files = part_files(context(P5), "p5")
    root = tmp_path / "root"
    system = root / "etc/systemd/system"
    (system / "slurmd.service.d").mkdir(parents=True)
    for path in (f"/etc/systemd/system/{HEALTH_BOOT_UNIT}", "/etc/systemd/system/slurmd.service.d/gpucluster.conf"):
        (root / path.lstrip("/")).write_text(files[path])
    (system / "slurmd.service").write_text("[Unit]\nDescription=slurmd\n[Service]\nExecStart=/usr/sbin/slurmd -D\n")
    (system / "gpucluster-imds-guard.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    for exe in (AWS_HELPER, "/usr/sbin/slurmd", "/bin/true", "/usr/bin/install"):  # install: the containers root
        (root / exe.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / exe.lstrip("/")).write_text("#!/bin/sh\n")
        (root / exe.lstrip("/")).chmod(0o755)
    # the machine's own units (sysinit.target, remote-fs.target, ...) that these order against
    shutil.copytree(Path("/usr/lib/systemd/system"), root / "usr/lib/systemd/system", symlinks=True)
    units = [str(system / HEALTH_BOOT_UNIT), str(system / "slurmd.service")]
    done = subprocess.run([analyze, "verify", f"--root={root}", *units], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr  # systemd warns on stderr
    broken = system / HEALTH_BOOT_UNIT
    broken.write_text(files[f"/etc/systemd/system/{HEALTH_BOOT_UNIT}"].replace("Type=oneshot", "Type=oneshoot"))
    done = subprocess.run([analyze, "verify", f"--root={root}", str(broken)], capture_output=True, text=True, timeout=120)
    assert "Failed to parse service type" in done.stderr  # the check can fail


# --- a hung check: the watchdog drains without waiting for it -------------------------------------------------------


def test_the_stand_in_for_a_hung_gpu_cannot_be_killed_or_reaped(tmp_path):
    """The stand-in the watchdog tests use for a check stuck in the GPU driver: a read from a FUSE file whose
    server never answers (tests/agents/health/dstate.py). Once killed, the reader sits in D state and cannot be
    reaped, as a process inside a hung NVML call; Python's subprocess.run(timeout=...), which the boot helper
    and the Kubernetes sweep used, kills it and then waits for it, past any limit. (GNU timeout(1), which the
    Slurm wrappers used, does return: at --kill-after it SIGKILLs its own process group, itself included.)"""
    from tests.agents.health.dstate import hung_file, state, wait_for_state

    with hung_file(tmp_path) as hang:
        reader = subprocess.Popen(["cat", str(hang)], stdout=subprocess.DEVNULL)
        try:
            assert hang.taken(reader.pid) and state(reader.pid) == "S"  # waiting for the answer, interruptibly
            reader.kill()
            assert wait_for_state(reader.pid, "D") == "D"
            with pytest.raises(subprocess.TimeoutExpired):
                reader.wait(timeout=1)
            assert state(reader.pid) == "D"  # killed, and still there
            waits = "import subprocess, sys; subprocess.run(['cat', sys.argv[1]], timeout=1)"
            with pytest.raises(subprocess.TimeoutExpired):  # its own 1 s limit, then kill, then wait...
                subprocess.run([sys.executable, "-c", waits, str(hang)], timeout=5, stdout=subprocess.DEVNULL)
        finally:
            reader.kill()
    reader.wait(timeout=10)  # the server is gone: the read ended and the reader died


@pytest.mark.parametrize(("template", "mode", "exit_code"), [("health-check", "sweep", 0), ("prolog", "prolog", 1)])
def test_a_check_in_uninterruptible_sleep_still_drains_the_node(tmp_path, template, mode, exit_code):
    """The program hangs in D state (the stand-in above): at the end of its budget the wrapper drains the node
    (reboot), exits within the budget, and leaves the unkillable check behind instead of waiting for it."""
    from tests.agents.health.dstate import hung_file, wait_for_state

    with hung_file(tmp_path) as hang:
        checker = tmp_path / "checker"
        checker.write_text(f"#!/bin/sh\necho $$ >{tmp_path}/checker.pid\nexec cat {hang}\n")
        checker.chmod(0o755)
        env = fakes(tmp_path, 0)
        rc, took = run(wrapper(tmp_path, template, 2, python=str(checker)), env)
        assert rc == exit_code and took < 2 + 1 + 2, took  # the budget, SECONDS' whole seconds, slack
        assert calls(tmp_path, "scontrol").splitlines() == [
            "update",
            "NodeName=p5-3",
            "State=DRAIN",
            f"Reason=gpucluster: health {mode} timed out after 2 s (reboot)",
        ]
        assert "did not finish within 2 s" in (tmp_path / "health.log").read_text()
        pid = int((tmp_path / "checker.pid").read_text())
        assert wait_for_state(pid, "D") == "D"  # killed, never reaped by the wrapper: it is still there


def test_a_hang_asks_the_agent_for_a_reboot_not_a_replacement():
    """What the agent's quarantine pass reads from each hang's drain reason: reboot. A hang does not say the
    hardware is broken (and a job might provoke one); a hang that comes back after the reboot is replaced."""
    from gpucluster_agents.repair.quarantine import drain_action

    for reason in (
        "gpucluster: health sweep timed out after 45 s (reboot)",
        "gpucluster: health prolog timed out after 60 s (reboot)",
        "gpucluster: health boot timed out after 300 s (reboot)",
    ):
        assert drain_action(reason) == "reboot", reason
    for template, mode in (("health-check", "sweep"), ("prolog", "prolog")):
        text = render(
            f"slurm/{template}.sh.j2",
            cluster="c",
            group="g",
            checks=True,
            log_file="/l",
            config="/c",
            interval=300,
            budget=45,
            slurm_timeout=75,
            opt_out=OPT_OUT,
            boot_fault="/b",
            **wrapper_values(),
        )
        assert f'drain "gpucluster: health {mode} timed out after ${{budget}} s (reboot)"' in text
