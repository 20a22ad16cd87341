"""The head node's files through the artifact bucket (render/slurm/headfiles.py): the split between its user data and
its bundle, and the boot helper's ``apply-files`` / ``apply-user-data`` against a real S3 API (moto's server) and a
fake IMDS, run as the node runs it (the shipped source, in a subprocess)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import stat
import subprocess
from pathlib import Path

import boto3
import pytest
import yaml

from gpucluster.load import load_spec
from gpucluster.render.compute.node import LUSTRE_MOUNT_SCRIPT
from gpucluster.render.compute.user_data import head_stand_ins
from gpucluster.render.core import WriteFile, bundle_json, gzip_bytes, render_cloud_config
from gpucluster.render.slurm.accounts import ACCOUNTS_PATH
from gpucluster.render.slurm.agent import AgentBundle, agent_bundle, aws_helper, boot_config, package_key, sha256
from gpucluster.render.slurm.head import HeadUserData, head_files, head_user_data
from gpucluster.render.slurm.headfiles import HEAD_FIRST_BOOT, LIVE_KEY, LIVE_PATHS, bundle_ref, pointer_file
from gpucluster.render.slurm.identity import session_lockdown_runcmd
from gpucluster.render.slurm.names import HEAD_FILES_POINTER, HEAD_SETUP
from gpucluster.render.slurm.team_directories import TEAM_DIRECTORIES_LIST
from gpucluster.tools.plan.run.stackfile import read_stack_file
from tests.render.slurm.test_slurm_render import FakeImds, helper_env, run_helper

TOPOLOGY = "/var/lib/gpucluster/slurm/topology.conf"


def rendered(stack: str) -> HeadUserData:
    """``stack``'s head node, rendered with stand-ins of AWS's values; the agent package is this checkout's."""
    ctx, inputs = head_stand_ins(load_spec(read_stack_file(stack)["config"], stack=stack).cluster)
    digest = sha256(agent_bundle())
    inputs = dataclasses.replace(inputs, agent=AgentBundle(inputs.agent.bucket, package_key(digest), digest))
    return head_user_data(ctx, inputs)


@pytest.fixture(scope="module")
def p5() -> HeadUserData:
    return rendered("slurm-p5")


@pytest.mark.parametrize("stack", ["slurm-p5", "slurm-directory"])
def test_every_head_file_rides_once_in_the_user_data_or_the_bundle(stack):
    cluster = load_spec(read_stack_file(stack)["config"], stack=stack).cluster
    ctx, inputs = head_stand_ins(cluster)
    both = head_user_data(ctx, inputs)
    in_user_data = [f.path for f in both.config.write_files]
    bundle = json.loads(both.bundle)["files"]
    in_bundle = [f["path"] for f in bundle]
    live = [f["path"] for f in json.loads(both.live or '{"files": []}')["files"]]
    every = [f.path for f in head_files(ctx, inputs)]
    fetchers = {"/etc/systemd/system/gpucluster-head-live.service", "/etc/systemd/system/gpucluster-head-live.timer"}
    assert sorted(every) == sorted({*in_user_data, *in_bundle, *live} - {HEAD_FILES_POINTER, HEAD_FIRST_BOOT, *fetchers})
    assert not set(in_user_data) & set(in_bundle) and len(set(in_bundle)) == len(in_bundle)
    assert not set(live) & set(in_bundle) and set(live) <= set(LIVE_PATHS)
    # with teams, the accounts contract is live (and the bundle carries what fetches it); without, there is no live bundle
    assert (ACCOUNTS_PATH in live) == (both.live is not None) == fetchers.issubset(in_bundle)
    assert len(every) == len(set(every))
    # the user data keeps only what fetches the rest; the bundle is sorted and deterministic
    assert sorted(in_user_data) == sorted(
        [
            "/usr/local/sbin/gpucluster-aws",
            "/usr/local/sbin/gpucluster-aws.json",
            "/etc/systemd/system/gpucluster-head-config.service",
            HEAD_FILES_POINTER,
            HEAD_FIRST_BOOT,
        ]
    )
    assert in_bundle == sorted(in_bundle) and both.bundle == head_user_data(ctx, inputs).bundle
    texts = {f.path: f for f in head_files(ctx, inputs)}
    assert all(
        (e["content"], e["permissions"]) == (texts[e["path"]].text(), texts[e["path"]].permissions)
        for e in bundle
        if e["path"] not in fetchers
    )
    # lockdown, first boot, (Lustre,) setup: the last two are the bundle's, written by the first-boot script
    lustre = cluster.spec.storage is not None and cluster.spec.storage.lustre is not None
    runcmd = [session_lockdown_runcmd(), (HEAD_FIRST_BOOT,), *([(LUSTRE_MOUNT_SCRIPT,)] if lustre else []), (HEAD_SETUP,)]
    assert list(both.config.runcmd) == runcmd and HEAD_SETUP in in_bundle
    assert (LUSTRE_MOUNT_SCRIPT in in_bundle) == lustre


def test_the_pointer_names_the_bundle_by_its_hash(p5):
    pointer = json.loads(next(f.content for f in p5.config.write_files if f.path == HEAD_FILES_POINTER))
    digest = hashlib.sha256(p5.bundle.encode()).hexdigest()
    key = f"head/files-{digest[:16]}.json"
    assert pointer == {"bucket": p5.ref.bucket, "key": key, "sha256": digest, "live_key": "head/live.json"}
    first_boot = next(f.content for f in p5.config.write_files if f.path == HEAD_FIRST_BOOT)
    assert "install -y -q --no-install-recommends python3-boto3" in first_boot
    assert first_boot.rstrip().endswith("exec /usr/local/sbin/gpucluster-aws apply-files")


def test_the_live_program_and_the_renderer_allow_the_same_live_paths():
    """The node package's live program writes only its own list from the live bundle; the renderer puts only its list
    there: one list. It is the package's, not the boot helper's: every user data carries the helper (16 KB cap)."""
    from gpucluster_agents.boot import helper, live

    assert live.LIVE_PATHS == LIVE_PATHS == (ACCOUNTS_PATH, TEAM_DIRECTORIES_LIST) and not hasattr(helper, "apply_live")


# --- the boot helper, against S3 ------------------------------------------------------------------------------


@pytest.fixture
def head_helper(tmp_path):
    ctx, _ = head_stand_ins(load_spec(read_stack_file("slurm-p5")["config"], stack="slurm-p5").cluster)
    path = tmp_path / "gpucluster-aws"
    path.write_text(aws_helper())
    path.chmod(0o755)
    Path(f"{path}.json").write_text(boot_config(ctx, head=True).to_json())
    return path


def s3_with(moto: str, p5: HeadUserData, body: str | None = None):
    """A fresh S3 holding the agent package, ``body`` (default: the bundle) at the bundle's key and the live bundle."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto}/moto-api/reset", data=b"", method="POST"), timeout=10)
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto)
    s3.create_bucket(Bucket=p5.ref.bucket)
    s3.put_object(Bucket=p5.ref.bucket, Key=package_key(sha256(agent_bundle())), Body=agent_bundle())
    s3.put_object(Bucket=p5.ref.bucket, Key=p5.ref.key, Body=(p5.bundle if body is None else body).encode())
    s3.put_object(Bucket=p5.ref.bucket, Key=LIVE_KEY, Body=str(p5.live).encode())
    return s3


def write_pointer(root: Path, text: str) -> None:
    (root / "etc/gpucluster").mkdir(parents=True, exist_ok=True)
    (root / HEAD_FILES_POINTER.lstrip("/")).write_text(text)


def on(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def test_apply_files_writes_the_bundle_with_its_modes_and_the_agents_files_once(
    head_helper, moto_endpoint, tmp_path, p5, aws_env
):
    s3_with(moto_endpoint, p5)
    root = tmp_path / "root"
    write_pointer(root, pointer_file(p5.ref).content)
    first = run_helper(head_helper, moto_endpoint, tmp_path / "k", "apply-files", root=root)
    assert first.returncode == 0, first.stderr
    for entry in json.loads(p5.bundle)["files"]:
        assert on(root, entry["path"]).read_text() == entry["content"], entry["path"]
        assert stat.S_IMODE(on(root, entry["path"]).stat().st_mode) == int(entry["permissions"], 8), entry["path"]
    assert stat.S_IMODE(on(root, HEAD_SETUP).stat().st_mode) == 0o755
    assert stat.S_IMODE(on(root, "/etc/slurm/slurmdbd.conf").stat().st_mode) == 0o600
    # topology.conf is the agent's: written at the first boot only; the next apply leaves the agent's version
    on(root, TOPOLOGY).write_text("SwitchName=placed-by-the-agent Nodes=p5-1\n")
    again = run_helper(head_helper, moto_endpoint, tmp_path / "k", "apply-files", root=root)
    assert again.returncode == 0 and "did not change" in again.stdout, again.stdout + again.stderr
    assert on(root, TOPOLOGY).read_text() == "SwitchName=placed-by-the-agent Nodes=p5-1\n"


def test_a_tampered_bundle_is_refused_and_nothing_written(head_helper, moto_endpoint, tmp_path, p5, aws_env):
    tampered = p5.bundle.replace("SuspendTime=", "SuspendTime=1")
    s3_with(moto_endpoint, p5, tampered)
    root = tmp_path / "root"
    write_pointer(root, pointer_file(p5.ref).content)
    bad = run_helper(head_helper, moto_endpoint, tmp_path / "k", "apply-files", root=root)
    got = hashlib.sha256(tampered.encode()).hexdigest()
    assert bad.returncode != 0
    assert f"s3://{p5.ref.bucket}/{p5.ref.key} has sha256 {got}, expected {p5.ref.sha256}" in bad.stderr
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == ["etc/gpucluster/head-files.json"]


@pytest.mark.parametrize("path", ["/etc/../root/.ssh/authorized_keys", "etc/slurm/slurm.conf"])
def test_a_relative_or_dotdot_path_is_refused_and_nothing_written(head_helper, moto_endpoint, tmp_path, p5, aws_env, path):
    files = (WriteFile("/etc/slurm/slurm.conf", "ClusterName=x\n"), WriteFile(path, "ssh-ed25519 AAAA attacker\n"))
    body = bundle_json(files)
    ref = bundle_ref(p5.ref.bucket, body)
    s3 = s3_with(moto_endpoint, p5)
    s3.put_object(Bucket=ref.bucket, Key=ref.key, Body=body.encode())
    root = tmp_path / "root"
    write_pointer(root, pointer_file(ref).content)
    bad = run_helper(head_helper, moto_endpoint, tmp_path / "k", "apply-files", root=root)
    assert bad.returncode != 0 and f"refusing ['{path}']" in bad.stderr, bad.stderr
    assert not on(root, "/etc/slurm/slurm.conf").exists() and not (tmp_path / "root/root").exists()


def test_apply_user_data_rewrites_the_user_data_then_the_bundle_then_the_agent(head_helper, moto_endpoint, tmp_path, p5, aws_env):
    """Every boot after the first: the user data's files (a changed bundle is a new pointer there), then the bundle the
    pointer names, then the agent package."""
    s3 = s3_with(moto_endpoint, p5)
    root = tmp_path / "root"
    imds = FakeImds(gzip_bytes(render_cloud_config("head", p5.config, gzipped=True)))
    try:
        first = run_helper(head_helper, moto_endpoint, tmp_path / "k", "apply-user-data", root=root, imds=imds.url)
        assert first.returncode == 0, first.stderr
        assert json.loads(on(root, HEAD_FILES_POINTER).read_text())["key"] == p5.ref.key  # from the user data
        assert on(root, "/etc/slurm/slurm.conf").read_text() == _content(p5.bundle, "/etc/slurm/slurm.conf")
        assert on(root, "/opt/gpucluster/lib/.sha256").read_text().strip() == sha256(agent_bundle())
        # a changed slurm.conf: a new bundle under a new key, a new pointer in a new user data; only those change
        files = json.loads(p5.bundle)["files"]
        changed = [dict(e, content=e["content"] + "# changed\n") if e["path"] == "/etc/slurm/slurm.conf" else e for e in files]
        body = json.dumps({"files": changed}, sort_keys=True, separators=(",", ":")) + "\n"
        ref = bundle_ref(p5.ref.bucket, body)
        s3.put_object(Bucket=ref.bucket, Key=ref.key, Body=body.encode())
        kept = [pointer_file(ref) if f.path == HEAD_FILES_POINTER else f for f in p5.config.write_files]
        imds.user_data = gzip_bytes(
            render_cloud_config("head", dataclasses.replace(p5.config, write_files=tuple(kept)), gzipped=True)
        )
        second = run_helper(head_helper, moto_endpoint, tmp_path / "k", "apply-user-data", root=root, imds=imds.url)
        assert second.returncode == 0, second.stderr
        lines = [line.split("gpucluster-aws: ", 1)[1] for line in second.stdout.splitlines()]
        assert lines == [
            f"rewrote {HEAD_FILES_POINTER}",
            "rewrote /etc/slurm/slurm.conf",
            f"node agent {sha256(agent_bundle())[:12]} already installed",
        ]
        assert on(root, "/etc/slurm/slurm.conf").read_text().endswith("# changed\n")
    finally:
        imds.server.shutdown()


def test_apply_live_writes_the_teams_accounts_without_a_new_user_data(head_helper, moto_endpoint, tmp_path, p5, aws_env):
    """A quota change: the stack rewrites head/live.json in place; the helper (its timer) writes the new accounts file,
    and a second run leaves it (the path unit fires only on a change)."""
    s3 = s3_with(moto_endpoint, p5)
    root = tmp_path / "root"
    write_pointer(root, pointer_file(p5.ref, live=True).content)
    first = run_live(head_helper, moto_endpoint, root)
    assert first.returncode == 0, first.stderr
    assert on(root, ACCOUNTS_PATH).read_text() == _content(str(p5.live), ACCOUNTS_PATH)
    assert stat.S_IMODE(on(root, ACCOUNTS_PATH).stat().st_mode) == 0o644
    changed = _content(str(p5.live), ACCOUNTS_PATH).replace('"gres/gpu:h100": 85', '"gres/gpu:h100": 80')
    assert changed != _content(str(p5.live), ACCOUNTS_PATH)
    s3.put_object(Bucket=p5.ref.bucket, Key=LIVE_KEY, Body=bundle_json((WriteFile(ACCOUNTS_PATH, changed),)).encode())
    second = run_live(head_helper, moto_endpoint, root)
    assert second.returncode == 0 and f"rewrote {ACCOUNTS_PATH}" in second.stdout, second.stdout + second.stderr
    assert on(root, ACCOUNTS_PATH).read_text() == changed
    third = run_live(head_helper, moto_endpoint, root)
    assert third.returncode == 0 and "did not change" in third.stdout


@pytest.mark.parametrize(
    ("path", "mode"),
    [("/usr/local/sbin/gpucluster-users", "0755"), ("/etc/slurm/slurm.conf", "0644"), (ACCOUNTS_PATH, "0755")],
)
def test_apply_live_writes_nothing_but_its_data_files(head_helper, moto_endpoint, tmp_path, p5, aws_env, path, mode):
    """The live bundle is not pinned by the user data, so it may carry no program and no other file: a bundle with one
    is refused whole (the accounts file beside it stays unwritten)."""
    s3 = s3_with(moto_endpoint, p5)
    body = bundle_json((WriteFile(ACCOUNTS_PATH, "{}\n"), WriteFile(path, "#!/bin/sh\nid\n", mode)))
    s3.put_object(Bucket=p5.ref.bucket, Key=LIVE_KEY, Body=body.encode())
    root = tmp_path / "root"
    write_pointer(root, pointer_file(p5.ref, live=True).content)
    bad = run_live(head_helper, moto_endpoint, root)
    assert bad.returncode != 0 and f"refusing ['{path}']" in bad.stderr, bad.stderr
    assert not on(root, ACCOUNTS_PATH).exists() and not on(root, path).exists()


def run_live(helper: Path, moto: str, root: Path) -> subprocess.CompletedProcess[str]:
    """The live program as its unit runs it (``python3 -I -c LIVE_MAIN <package dir> <helper config>``), from this
    checkout's package, against moto's S3 and ``root`` (without ``-I``, which would drop the test's environment)."""
    import sys

    from gpucluster.render.slurm.headfiles import LIVE_MAIN
    from tests.conftest import ROOT

    env = helper_env(moto, root / "munge.key", root)
    argv = [sys.executable, "-c", LIVE_MAIN, str(ROOT), f"{helper}.json"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False, cwd="/")


def _content(bundle: str, path: str) -> str:
    return next(e["content"] for e in json.loads(bundle)["files"] if e["path"] == path)


def test_the_head_user_data_is_small_and_valid_yaml(p5):
    text = render_cloud_config("head", p5.config, gzipped=True)
    assert len(gzip_bytes(text)) < 8192  # the helper is most of it; nothing grows with the cluster
    assert yaml.safe_load(text)["bootcmd"]


@pytest.mark.parametrize(("failures", "installed"), [(2, True), (5, False)])
def test_the_first_boot_script_retries_apt_then_hands_over_to_the_helper(tmp_path, failures, installed):
    """The first-boot script under bash with apt-get, sleep and the helper faked on a PATH of the test's own: a failing
    apt is retried (an update that fails fails the attempt), and the helper's apply-files runs only once boto3 is in."""
    from gpucluster.render.slurm.headfiles import first_boot_script
    from tests.conftest import require_tool

    bash = require_tool("bash")
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    fakes = {
        "apt-get": f'echo "apt-get $*" >>{log}\nn=$(grep -c " update" {log})\n'
        f'case "$*" in *update*) [ "$n" -gt {failures} ] || exit 100;; esac\n',
        "sleep": f'echo "sleep $*" >>{log}\n',
        "helper": f'echo "helper $*" >>{log}\n',
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    script = tmp_path / "first-boot"
    script.write_text(first_boot_script().replace("/usr/local/sbin/gpucluster-aws", str(bin_dir / "helper")))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    run = subprocess.run([bash, str(script)], env=env, capture_output=True, text=True, timeout=30, check=False)
    calls = log.read_text().splitlines()
    updates = [c for c in calls if " update" in c]
    if installed:
        assert run.returncode == 0, run.stderr
        assert len(updates) == failures + 1 and calls[-1] == "helper apply-files"
        assert [c for c in calls if c.startswith("sleep")] == ["sleep 15", "sleep 30"]
        assert "install -y -q --no-install-recommends python3-boto3" in calls[-2]
    else:
        assert run.returncode == 1 and "python3-boto3 not installed after 5 attempts" in run.stderr
        assert len(updates) == 5 and not any(
            c.startswith(("helper", "apt-get -o DPkg::Lock::Timeout=600 install")) for c in calls
        )


def test_systemd_reads_the_live_units(tmp_path):
    """The live program's service and timer as systemd reads them (``systemd-analyze verify``), the python the unit
    names replaced by this one so the executable exists here."""
    import sys

    from gpucluster.render.slurm.headfiles import live_units
    from tests.conftest import require_tool

    analyze = require_tool("systemd-analyze")
    paths = []
    for unit in live_units():
        path = tmp_path / unit.path.rsplit("/", 1)[1]
        path.write_text(unit.text().replace("/usr/bin/python3 ", f"{sys.executable} "))
        paths.append(str(path))
    done = subprocess.run([analyze, "verify", "--man=no", *paths], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    assert 'ExecStart=/usr/bin/python3 -I -c "import sys;' in live_units()[0].text()
