"""The install part a Slurm group's image bakes and the site's hooks the configure part runs: the Image
Builder component document, its script (bash -n, shellcheck), the hooks' checks and their runner, run for real."""

from __future__ import annotations

import subprocess
from typing import Any

import yaml

from gpucluster.config.checks.images import bash_syntax_error
from gpucluster.load import load_spec
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.image import (
    AGENT_ZIP,
    COMPONENT_DATA_LIMIT,
    component_document,
    node_install_script,
    semantic_version,
)
from gpucluster.render.slurm.names import NODE_SETUP, SlurmContext
from tests.conftest import group, make_config, require_tool

PACKAGE_URI = "s3://bucket-1/agent/gpucluster_agents-0123456789abcdef.zip"
SHA = "ab" * 32


def _cluster(
    hooks: dict[str, Any] | None = None, images: dict[str, Any] | None = None, lustre: bool = True, containers: bool = True
) -> Any:
    slurm: dict[str, Any] = {"nodeGroups": [{"name": "p5", **({"hooks": hooks} if hooks else {})}]}
    slurm["containers"] = {"enabled": containers}
    if images is not None:
        slurm["images"] = images
    keys: dict[str, Any] = {"slurm": slurm}
    if lustre:
        keys["storage"] = {"lustre": {"storageCapacityGib": 1200, "throughputPerUnitStorage": 250}}
    return load_spec(make_config(group(name="p5"), **keys), stack="img").cluster


CLUSTER = _cluster()
CTX = SlurmContext.of(CLUSTER)
GROUP = CLUSTER.slurm.node_groups[0]


def _shellcheck(script: str, tmp_path: Any, name: str) -> None:
    shellcheck = require_tool("shellcheck")
    path = tmp_path / name
    path.write_text(script)
    done = subprocess.run([shellcheck, "-s", "bash", "-S", "warning", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_slurm_groups_bake_by_default_and_the_opt_out_installs_at_boot() -> None:
    assert GROUP.baked
    unbaked = _cluster(images={"bake": False}).slurm.node_groups[0]
    assert not unbaked.baked
    script = next(
        f.content
        for f in node_slurm_part(SlurmContext.of(_cluster(images={"bake": False})), unbaked).write_files
        if f.path == NODE_SETUP
    )
    assert "apt-get -o DPkg::Lock::Timeout=600 install" in script


def test_the_component_document_runs_the_install_part_and_checks_it(tmp_path: Any) -> None:
    text = component_document(CTX, GROUP, package_uri=PACKAGE_URI, agent_sha256=SHA)
    assert len(text) <= COMPONENT_DATA_LIMIT
    doc = yaml.safe_load(text)
    assert doc["schemaVersion"] == 1.0 and [p["name"] for p in doc["phases"]] == ["build", "validate"]
    build = doc["phases"][0]["steps"]
    assert [(s["name"], s["action"]) for s in build] == [("DownloadNodePackage", "S3Download"), ("InstallNode", "ExecuteBash")]
    assert build[0]["inputs"] == [{"source": PACKAGE_URI, "destination": AGENT_ZIP, "overwrite": True}]
    (script,) = build[1]["inputs"]["commands"]
    assert script == node_install_script(CTX, GROUP, agent_sha256=SHA, component="img-p5-node")
    for needle in (
        "apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends slurmd slurm-client munge",
        "install_client",
        "sha256sum --check",
        "systemctl disable munge.service slurmd.service",
    ):
        assert needle in script, needle
    assert bash_syntax_error(script) is None
    _shellcheck(script, tmp_path, "install.sh")
    validate = doc["phases"][1]["steps"][0]["inputs"]["commands"]
    assert f"grep -qx {SHA} /opt/gpucluster/lib/.sha256" in validate
    assert any("mount.lustre" in c for c in validate)


def test_without_lustre_package_or_containers_the_image_has_none() -> None:
    cluster = _cluster(lustre=False, containers=False)
    text = component_document(SlurmContext.of(cluster), cluster.slurm.node_groups[0], package_uri=None, agent_sha256=None)
    assert "lustre" not in text.lower() and "S3Download" not in text and "sha256sum" not in text
    assert "pyxis" not in text and "enroot" not in text


def test_a_new_install_part_is_a_new_version() -> None:
    one = component_document(CTX, GROUP, package_uri=PACKAGE_URI, agent_sha256=SHA)
    two = component_document(CTX, GROUP, package_uri=PACKAGE_URI, agent_sha256="cd" * 32)
    assert semantic_version(one) == semantic_version(one) != semantic_version(two)
    major, minor, patch = semantic_version(one).split(".")
    assert major == "1" and 0 <= int(minor) < 2**20 and 0 <= int(patch) < 2**20


# --- hooks ----------------------------------------------------------------------------------------------------------


def _setup_with_hooks(hooks: dict[str, Any]) -> tuple[str, Any]:
    cluster = _cluster(hooks=hooks)
    part = node_slurm_part(SlurmContext.of(cluster), cluster.slurm.node_groups[0])
    return next(f.content for f in part.write_files if f.path == NODE_SETUP), part


def test_hooks_run_before_the_setup_and_before_slurmd(tmp_path: Any) -> None:
    script, part = _setup_with_hooks(
        {"onNodeStart": {"inline": "echo start"}, "onNodeConfigured": {"s3Uri": "s3://site-hooks/ready.sh", "sha256": SHA}}
    )
    files = {f.path: f for f in part.write_files}
    assert files["/etc/gpucluster/hooks/onNodeStart.sh"].content == "echo start\n"
    assert files["/etc/gpucluster/hooks/onNodeStart.sh"].permissions == "0700"
    start, name, configured, slurmd = (
        script.index("run_hook onNodeStart"),
        script.index("node=$("),
        script.index("fetch_hook s3://site-hooks/ready.sh " + SHA),
        script.index("systemctl enable --now slurmd"),
    )
    assert start < name < configured < slurmd
    assert "State=DRAIN" in script[slurmd:]
    assert bash_syntax_error(script) is None
    _shellcheck(script, tmp_path, "node-setup.sh")


def _runner(script: str) -> str:
    """The hook runner of the rendered setup script, from ``hook_fault=`` to the end of ``run_hook``."""
    start = script.index("hook_fault=")
    end = script.index("\n}\n", script.index("run_hook() {")) + 3
    return script[start:end]


def test_the_hook_runner_records_a_failure_and_a_timeout(tmp_path: Any) -> None:
    script, _ = _setup_with_hooks({"onNodeStart": {"inline": "true"}, "timeoutSeconds": 10})
    # the configured 10 s, made 1 s to keep the test short
    runner = (
        _runner(script).replace("timeout --kill-after=10 10 ", "timeout --kill-after=1 1 ").replace("after 10 s", "after 1 s")
    )
    (tmp_path / "fails.sh").write_text("echo broken >&2; exit 3\n")
    (tmp_path / "hangs.sh").write_text("sleep 30\n")
    (tmp_path / "works.sh").write_text("echo fine\n")
    program = f"""set -euo pipefail
log_dir={tmp_path}/log; mkdir -p "$log_dir"
log() {{ echo "$*" >>"$log_dir/setup.log"; }}
{runner}
run_hook works {tmp_path}/works.sh
[ ! -e "$hook_fault" ]
run_hook hangs {tmp_path}/hangs.sh
run_hook fails {tmp_path}/fails.sh
cat "$hook_fault"
"""
    done = subprocess.run(
        ["bash", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        env={"GPUCLUSTER_RUN": str(tmp_path / "run"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    # the first failure is the reason the node is drained with
    assert done.stdout.strip() == "gpucluster: hook hangs failed (timed out after 1 s)"
    assert "broken" in (tmp_path / "log" / "hook-fails.log").read_text()
    assert "hook fails failed (3)" in (tmp_path / "log" / "setup.log").read_text()
