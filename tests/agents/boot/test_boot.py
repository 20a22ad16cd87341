"""The boot helper (gpucluster_agents/boot/helper.py): its config is parsed strictly, and it imports nothing
of the package it installs (it runs before the agent package exists on the node)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import pytest

from gpucluster_agents.boot import helper as boot
from gpucluster_agents.boot.helper import BootConfig, BootConfigError, parse_config

SOURCE = Path(boot.__file__)
GOOD = BootConfig(
    "demo",
    "eu-west-1",
    "gpucluster/demo/munge-key",
    "/etc/gpucluster/agent-package.json",
    ("/var/t.conf",),
    "s3://demo-art/node-maps/",
    "/etc/gpucluster/head-files.json",
)
# Outside the standard library, the node has exactly these: Ubuntu's python3-boto3 (with botocore) and
# cloud-init's PyYAML.
THIRD_PARTY = {"boto3", "botocore", "yaml"}


def doc(**changes: object) -> dict[str, object]:
    d = json.loads(GOOD.to_json())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not ...}


def test_the_config_round_trips_and_names_every_field():
    d = json.loads(GOOD.to_json())
    assert set(d) == {f.name for f in fields(BootConfig)}
    assert parse_config(d) == GOOD


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (doc(region=...), "region: required key is missing"),
        (doc(agent_owned=...), "agent_owned: required key is missing"),
        (
            doc(secret=""),
            "secret: unknown key (allowed: agent_owned, cluster, head_files, node_maps, package_file, region, secret_name)",
        ),
        (doc(cluster=""), "cluster: must be a non-empty string, got ''"),
        (doc(secret_name=7), "secret_name: must be a non-empty string, got 7"),
        (doc(package_file="etc/pkg.json"), "package_file: must be an absolute path"),
        (doc(head_files="etc/head-files.json"), "head_files: must be an absolute path, got 'etc/head-files.json'"),
        (doc(head_files=["/etc/x.json"]), "head_files: must be an absolute path, got ['/etc/x.json']"),
        (doc(agent_owned="/var/t.conf"), "agent_owned: must be a list of absolute paths"),
        (doc(agent_owned=["t.conf"]), "agent_owned: must be a list of absolute paths"),
    ],
)
def test_a_bad_config_is_refused_with_the_key_named(bad: dict[str, object], message: str):
    with pytest.raises(BootConfigError) as exc:
        parse_config(bad)
    assert message in str(exc.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(BootConfigError) as exc:
        parse_config(doc(region=..., cluster=3, extra=1))
    text = str(exc.value)
    assert "region: required" in text and "cluster: must be" in text and "extra: unknown key" in text


def test_a_config_that_is_not_an_object_is_refused():
    with pytest.raises(BootConfigError, match="must be a JSON object, got list"):
        parse_config([])


def test_the_helper_stops_with_the_file_named_when_its_config_is_missing_or_bad(tmp_path: Path):
    helper = tmp_path / "gpucluster-aws"
    helper.write_text(SOURCE.read_text())
    run = [sys.executable, str(helper), "install-agent"]
    missing = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 1 and f"bad config {helper}.json" in missing.stderr
    Path(f"{helper}.json").write_text(json.dumps(doc(region=...)))
    bad = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 1 and "region: required key is missing" in bad.stderr


def _imported_modules(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def test_the_helper_imports_only_the_standard_library_and_boto3():
    """It is what installs gpucluster_agents, so it cannot import it (nor anything relative)."""
    imported = _imported_modules(SOURCE.read_text())
    tops = {name.split(".")[0] for name in imported}
    assert not any(name.startswith(".") for name in imported), imported
    assert "gpucluster_agents" not in tops and "gpucluster" not in tops
    assert tops - THIRD_PARTY <= set(sys.stdlib_module_names), tops - THIRD_PARTY - set(sys.stdlib_module_names)
    assert {"boto3", "yaml"} <= tops  # the rule reads real imports: the lazy ones inside functions count too


def test_the_import_reader_sees_package_imports():
    """The rule above could not pass by reading nothing: it catches each way of importing the package."""
    for line in ("import gpucluster_agents.contract", "from gpucluster_agents import contract", "from . import contract"):
        imported = _imported_modules(f"def f():\n    {line}\n")
        assert any(n.startswith((".", "gpucluster_agents")) for n in imported), line


def test_the_helper_parses_as_python_3_9():
    """Ubuntu's and Amazon Linux's node Pythons: no syntax newer than 3.9 (annotations stay strings)."""
    source = SOURCE.read_text()
    ast.parse(source, feature_version=(3, 9))
    assert "from __future__ import annotations" in source  # so `bytes | None` and `tuple[str, ...]` are never evaluated


def boot_root(tmp_path: Path, scenario_file: Path | None = None) -> tuple[Path, Path]:
    """A node's root under ``tmp_path``: the helper and its config, the package file, the installed package
    (with a fake NVML binding answering from ``scenario_file``)."""
    from tests.agents.health.fakes import agent_lib

    root = tmp_path / "root"
    helper = root / "usr/local/sbin/gpucluster-aws"
    helper.parent.mkdir(parents=True)
    helper.write_text(SOURCE.read_text())
    agent_lib(root / "opt/gpucluster/lib", scenario_file)
    (root / "agent-package.json").write_text(
        json.dumps({"bucket": "b", "key": "k", "sha256": "0", "dest": "/opt/gpucluster/lib"})
    )
    Path(f"{helper}.json").write_text(BootConfig("demo", "eu-west-1", "s", "/agent-package.json", ()).to_json())
    (root / "etc/gpucluster").mkdir(parents=True)
    return root, helper


def test_health_runs_the_installed_health_programs_boot_mode_and_passes_its_exit_status(tmp_path: Path):
    """``gpucluster-aws health`` gates slurmd: the installed package's ``health boot`` with the node's config,
    exit status unchanged. The kernel log is a fixture (the crafted segfault report among its records)."""
    from tests.agents.health.fakes import kernel_log

    root, helper = boot_root(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "GPUCLUSTER_ROOT": str(root)}
    missing = subprocess.run([sys.executable, str(helper), "health"], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "etc/gpucluster/health.json: file not found" in missing.stderr
    (tmp_path / "kernel.log").write_text(kernel_log())
    config = {
        "instance_type": "m7i.xlarge",
        "gpu_count": 0,
        "log_file": str(tmp_path / "h.jsonl"),
        "kernel_log_file": str(tmp_path / "kernel.log"),
        "sysfs_root": str(tmp_path / "sys"),
        "mounts_file": str(tmp_path / "mounts"),
    }
    (root / "etc/gpucluster/health.json").write_text(json.dumps(config))
    ok = subprocess.run([sys.executable, str(helper), "health"], env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    verdict = json.loads((tmp_path / "h.jsonl").read_text())
    assert verdict["mode"] == "boot" and "refused" in next(c for c in verdict["checks"] if c["name"] == "xid")["detail"]


def test_health_leaves_the_reason_of_a_failed_boot_check_for_slurmd_and_clears_it_when_healthy(tmp_path: Path):
    """A fault: exit 1 and the verdict's reason in /run/gpucluster/health-boot.reason (the file the
    HealthCheckProgram and the prolog drain the node by); a later healthy check (after a reboot /run is
    empty anyway) removes it. Fake NVML readings of a p5 with one GPU's link trained at gen 3. The helper runs
    from a directory holding an attacker's package, with variables that would swap the readings and the
    config: the program it starts (isolated, from /) sees none of them."""
    from gpucluster_agents.boot.helper import HEALTH_BOOT_FAULT
    from gpucluster_agents.contract.health import to_json
    from tests.agents.health.fakes import node, p5_config, planted, scenario

    fakes = tmp_path / "node"
    fakes.mkdir()
    readings = node(fakes, scenario({3: {"pcie_gen": 3}}))
    root, helper = boot_root(tmp_path, readings)
    (root / "etc/gpucluster/health.json").write_text(to_json(p5_config(fakes)))
    (tmp_path / "healthy.json").write_text(json.dumps(scenario()))
    (tmp_path / "cpu.json").write_text(json.dumps({"instance_type": "m7i.xlarge", "gpu_count": 0}))
    evil = tmp_path / "evil"
    evil.mkdir()
    planted(evil, tmp_path / "planted")
    env = {
        "PATH": "/usr/bin:/bin",
        "GPUCLUSTER_ROOT": str(root),
        "GPUCLUSTER_HEALTH_CONFIG": str(tmp_path / "cpu.json"),  # would judge a CPU node: healthy
        "GPUCLUSTER_HEALTH_FAKE_NVML": str(tmp_path / "healthy.json"),  # would hide the bad link
        "PYTHONPATH": str(evil),
    }
    fault = root / HEALTH_BOOT_FAULT.lstrip("/")
    assert SOURCE.read_text().startswith("#!/usr/bin/python3 -I\n")  # the helper itself is isolated too
    argv = [sys.executable, "-I", str(helper), "health"]  # as its first line runs it
    bad = subprocess.run(argv, env=env, cwd=evil, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stderr
    reason = fault.read_text()
    assert reason.startswith("gpucluster: pcie_link gpu3 gen3") and reason.endswith("\n") and reason.count("\n") == 1
    assert not (tmp_path / "planted").exists()
    readings.write_text(json.dumps(scenario()))
    good = subprocess.run(argv, env=env, cwd=evil, capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stdout + good.stderr
    assert not fault.exists() and not (tmp_path / "planted").exists()


def test_a_boot_check_in_uninterruptible_sleep_leaves_its_reason_without_waiting(tmp_path: Path, monkeypatch):
    """The installed program hangs in D state (a read from a FUSE file that never answers: the stand-in for
    an NVML call on a GPU that fell off the bus, tests/agents/health/dstate.py). At the deadline the helper writes
    the hang's reason (reboot) for slurmd's wrappers, returns 1 at once, and leaves the unkillable check."""
    from gpucluster_agents.boot.helper import HEALTH_BOOT_FAULT
    from tests.agents.health.dstate import hung_file, wait_for_state

    with hung_file(tmp_path) as hang:
        root = tmp_path / "root"
        health = root / "opt/gpucluster/lib/gpucluster_agents/health"
        health.mkdir(parents=True)
        for f in ("__init__.py", "health/__init__.py"):
            (health.parent / f).write_text("")
        pid_file = tmp_path / "check.pid"
        (health / "cli.py").write_text(
            f"import os\ndef main():\n    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    open({str(hang)!r}).read()\n"
        )
        (root / "agent-package.json").write_text(json.dumps({"dest": "/opt/gpucluster/lib"}))
        monkeypatch.setattr(boot, "ROOT", str(root))
        start = time.monotonic()
        code = boot.boot_health(BootConfig("demo", "eu-west-1", "s", "/agent-package.json", ()), timeout=2)
        assert code == 1 and time.monotonic() - start < 5
        fault = root / HEALTH_BOOT_FAULT.lstrip("/")
        assert fault.read_text() == "gpucluster: health boot timed out after 2 s (reboot)\n"
        assert wait_for_state(int(pid_file.read_text()), "D") == "D"  # killed, never waited for
