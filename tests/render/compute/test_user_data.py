"""Rendered user data: pinned by golden files and accepted by cloud-init's own schema check."""

from __future__ import annotations

import email
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.render.core import CloudConfig, WriteFile, render_cloud_config
from gpucluster.tools.plan.run.engine import run_plan
from gpucluster.tools.plan.run.stackfile import stack_names
from tests.conftest import GOLDEN, check_golden, require_tool
from tests.plans import shipped_plan

# Top-level keys our user data may use. cloud-init ignores unknown top-level keys silently (its schema
# check passes them), so a misspelt key would be dropped on the node without a word: check them here.
KNOWN_TOP_LEVEL = {"write_files", "runcmd", "bootcmd", "packages", "package_update", "mounts", "users", "disk_setup", "fs_setup"}


def all_user_data() -> list[tuple[str, str, str]]:
    out = []
    for stack in stack_names():
        plan = shipped_plan(stack)
        for path, text in sorted(plan.files.items()):
            if path.endswith("/user-data"):
                out.append((stack, path.split("/")[0], text))
    # A program of your own: a GpuNodeGroup used alone boots as a GpuCluster's node and mounts its LustreStorage.
    own = run_plan("test", Path(__file__).parents[2] / "tools" / "plan" / "own_program")
    out += [("own-program", p.split("/")[0], t) for p, t in sorted(own.files.items()) if p.endswith("/user-data")]
    return out


USER_DATA = all_user_data()


def cloud_config_part(text: str) -> str:
    """The cloud-config of user data: the text itself, or the ``text/cloud-config`` part of the MIME
    multi-part user data of EKS nodes (whose ``application/node.eks.aws`` part tests/components/kubernetes checks)."""
    if not text.startswith("MIME-Version:"):
        return text
    message = email.message_from_string(text)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    parts = [p for p in message.get_payload() if p.get_content_type() == "text/cloud-config"]
    assert len(parts) == 1, [p.get_content_type() for p in message.get_payload()]
    return parts[0].get_payload()


def test_every_stack_renders_user_data():
    assert {s for s, _, _ in USER_DATA} == {*stack_names(), "own-program"}


@pytest.mark.parametrize(("stack", "resource", "text"), USER_DATA, ids=[f"{s}:{r}" for s, r, _ in USER_DATA])
def test_user_data_golden_and_cloud_init_schema(stack, resource, text, tmp_path, update_golden):
    check_golden(GOLDEN / "user-data" / stack / f"{resource}.yaml", text, update_golden)
    text = cloud_config_part(text)
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert set(doc) <= KNOWN_TOP_LEVEL, f"unknown top-level keys: {set(doc) - KNOWN_TOP_LEVEL}"
    cloud_init = require_tool("cloud-init")
    path = tmp_path / "user-data.yaml"
    path.write_text(text)
    result = subprocess.run([cloud_init, "schema", "-c", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Valid schema" in result.stdout or "Valid cloud-config" in result.stdout


def test_cloud_init_schema_rejects_a_broken_document(tmp_path):
    """The check above can fail: cloud-init refuses a write_files entry without a path."""
    cloud_init = require_tool("cloud-init")
    path = tmp_path / "bad.yaml"
    path.write_text("#cloud-config\nwrite_files:\n- content: x\n  permissions: 644\n")
    result = subprocess.run([cloud_init, "schema", "-c", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0


def _file(text: str, path: str) -> str:
    for entry in yaml.safe_load(text)["write_files"]:
        if entry["path"] == path:
            return entry["content"]
    raise KeyError(path)


def _profile_env(tmp_path: Path, uid: int) -> dict[str, str]:
    """The environment a login shell of ``uid`` has after sourcing p5-training's profile.d script (an ``id``
    stub first on PATH answers ``uid``, so the test does not depend on who runs it)."""
    text = next(t for s, r, t in USER_DATA if (s, r) == ("p5-training", "p5-training-p5-lt"))
    script = tmp_path / "nccl.sh"
    script.write_text(_file(text, "/etc/profile.d/gpucluster-nccl.sh"))
    stub = tmp_path / f"bin-{uid}"
    stub.mkdir()
    (stub / "id").write_text(f'#!/bin/sh\n[ "$1" = -u ] && echo {uid}\n')
    (stub / "id").chmod(0o755)
    out = subprocess.run(
        [require_tool("bash"), "-c", f". {script} && env"],
        capture_output=True,
        text=True,
        env={"PATH": f"{stub}:{os.environ['PATH']}", "LD_LIBRARY_PATH": "/usr/lib/x"},
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_nccl_profile_sets_the_environment(tmp_path):
    env = _profile_env(tmp_path, 1000)
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth"
    assert env["LD_LIBRARY_PATH"].startswith("/opt/amazon/efa/lib:") and env["LD_LIBRARY_PATH"].endswith(":/usr/lib/x")


def test_nccl_profile_leaves_root_alone(tmp_path):
    """Root's login shells take nothing derived from the stack's config: no fabric variable, no library path."""
    env = _profile_env(tmp_path, 0)
    assert not [k for k in env if k.startswith(("NCCL_", "FI_"))], env
    assert env["LD_LIBRARY_PATH"] == "/usr/lib/x"


@pytest.mark.parametrize(
    ("devices", "status"), [(32, "ok efa_devices=32 expected=32"), (30, "degraded efa_devices=30 expected=32")]
)
def test_efa_check_reports_missing_devices(tmp_path, devices, status):
    text = next(t for s, r, t in USER_DATA if (s, r) == ("p5-training", "p5-training-p5-lt"))
    script = tmp_path / "efa-check"
    script.write_text(_file(text, "/usr/local/sbin/gpucluster-efa-check"))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "fi_info").write_text("#!/bin/sh\n" + "".join(f"echo '    domain: rdmap{i}-rdm'\n" for i in range(devices)))
    (fake / "fi_info").chmod(0o755)
    env = {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "GPUCLUSTER_ETC": str(tmp_path / "etc"),
        "GPUCLUSTER_LOG": str(tmp_path / "log"),
    }
    subprocess.run([require_tool("bash"), str(script)], env=env, check=True, timeout=30)
    assert (tmp_path / "etc" / "efa-status").read_text().strip() == status


def test_parts_that_write_the_same_file_are_refused():
    a = CloudConfig(write_files=(WriteFile("/etc/x", "1"),))
    with pytest.raises(ValueError, match="/etc/x"):
        _ = a + a


def test_user_data_over_the_ec2_limit_is_refused():
    big = CloudConfig(write_files=(WriteFile("/etc/big", "x" * 17000),))
    with pytest.raises(ValueError, match="EC2 allows 16384"):
        render_cloud_config("t", big)


def test_golden_dir_has_no_stale_files():
    expected = {GOLDEN / "user-data" / s / f"{r}.yaml" for s, r, _ in USER_DATA}
    present = set(Path(GOLDEN / "user-data").rglob("*.yaml"))
    assert present <= expected, f"stale golden files: {present - expected}"


def test_compute_user_data_goes_gzipped_and_cloud_init_unpacks_it():
    """A realistic Slurm p5 group (EFA Lustre with GDS, NVMe scratch, 20 ncclEnv variables) renders more
    than EC2's 16 KB of text: the launch template carries it gzipped (as the head node's), within the
    limit, and cloud-init's own user-data reader (``cloudinit.user_data.convert_string``, which the
    node runs at boot) gives back exactly the plan's cloud-config."""
    import base64

    from gpucluster.render.core import USER_DATA_LIMIT
    from tests.conftest import group, make_config, plan_config

    nccl = {f"NCCL_TUNE_{i:02d}": f"value-{i}-" + "x" * 30 for i in range(20)}
    config = make_config(
        group(name="p5", maxSize=4, ncclEnv=nccl),
        storage={
            "lustre": {
                "storageCapacityGib": 4800,
                "throughputPerUnitStorage": 1000,
                "deploymentType": "PERSISTENT_2",
                "enableEfa": True,
                "enableGpudirectStorage": True,
                "metadataIops": 1500,
            },
            "nvmeScratch": {"mountPoint": "/scratch"},
        },
        slurm={"nodeGroups": [{"name": "p5"}]},
    )
    plan = plan_config(config, "gz")
    assert plan.ok, plan.error
    [template] = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    raw = base64.b64decode(template.inputs["userData"])
    text = plan.files[f"{template.name}/user-data"]
    assert len(text.encode()) > USER_DATA_LIMIT >= len(raw) and raw[:2] == b"\x1f\x8b"
    python = Path("/usr/bin/python3")
    require_tool("cloud-init")
    reader = (
        "import sys; from cloudinit.user_data import convert_string; "
        "sys.stdout.write(convert_string(sys.stdin.buffer.read()).get_payload(decode=True).decode())"
    )
    result = subprocess.run([str(python), "-c", reader], input=raw, capture_output=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == text


# What a booting node of a baked image (slurm.images) must not run: a package install or a download.
INSTALLS = re.compile(
    r"\bapt-get\b|\bapt install\b|\bdpkg -i\b|\bdnf\b|\byum\b|\bsnap install\b|\bpip3? install\b|\bpython3? -m pip\b"
    r"|\bcurl\b|\bwget\b|\baws s3 (cp|sync)\b|\binstall-agent\b|\blustre-client"
)


def _shell_texts(text: str) -> list[tuple[str, str]]:
    """The shell a node runs from its user data: every script it writes and its boot and run commands."""
    doc = yaml.safe_load(cloud_config_part(text))
    out = [(f["path"], f["content"]) for f in doc.get("write_files", []) if f["content"].startswith(("#!/bin/bash", "#!/bin/sh"))]
    for key in ("bootcmd", "runcmd"):
        out += [(key, c if isinstance(c, str) else " ".join(c)) for c in doc.get(key, [])]
    return out


def test_baked_slurm_nodes_install_and_download_nothing():
    """Every shipped stack's Slurm compute nodes on a baked image: no package install, no download in what they run."""
    baked = []
    for stack, resource, text in USER_DATA:
        scripts = dict(_shell_texts(text))
        setup = scripts.get("/usr/local/sbin/gpucluster-slurm-node")
        if setup is None or "1. Packages: none" not in setup:
            continue
        baked.append(f"{stack}:{resource}")
        found = {path: INSTALLS.findall(body) for path, body in scripts.items()}
        assert not any(found.values()), f"{stack}:{resource} installs or downloads: {found}"
    assert {"slurm-p5:slurm-p5-slurm-p5-lt", "slurm-p5:slurm-p5-slurm-dev-lt"} <= set(baked)
    assert any(b.startswith("slurm-directory:") for b in baked)


def test_the_install_check_finds_an_install():
    """The check above can fail: an unbaked node's setup matches it."""
    assert INSTALLS.search("apt-get -o DPkg::Lock::Timeout=600 install -y -q slurmd")
    assert INSTALLS.search('curl -fsSL --proto "=https" -o "$key" https://example')
    assert not INSTALLS.search("/usr/local/sbin/gpucluster-aws node-name")


def test_an_inline_hook_in_user_data_over_the_limit_is_named_with_the_way_out():
    """A group's inline hook counts in its user data: past EC2's 16 KB the error names the hook's own field and says to
    give the script from S3 (a script of hashes gzip cannot shrink)."""
    import base64
    import hashlib

    from gpucluster.load import load_spec
    from gpucluster.render.compute.user_data import user_data_findings
    from tests.conftest import group, make_config

    def script(seed: str) -> str:  # under the 8 KB an inline hook may be, and nearly as large gzipped
        return "true " + "".join(base64.b64encode(hashlib.sha256(f"{seed}{i}".encode()).digest()).decode() for i in range(170))

    hooks = {"onNodeStart": {"inline": script("a")}, "onNodeConfigured": {"inline": script("b")}}
    slurm = {"nodeGroups": [{"name": "p5", "hooks": hooks}]}
    cluster = load_spec(make_config(group(name="p5", maxSize=2), slurm=slurm), stack="hooks").cluster
    found = {f.path: f for f in user_data_findings(cluster)}
    for key in ("onNodeStart", "onNodeConfigured"):
        hook = found[f"gpucluster:slurm.nodeGroups[0].hooks.{key}.inline"]
        assert hook.code == "user-data-too-large" and "s3Uri" in hook.fix and "'p5'" in hook.message
    assert "gpucluster:nodeGroups[0]" in found
