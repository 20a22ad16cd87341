"""The site bundle (``gpucluster.render.hybrid.bundle``): pinned by goldens, read by the real programs (slurmctld
22.05 and 24.11 with the bundle included in a site's slurm.conf, bash -n, the agent's own config parser, Python's
configparser for the AWS profile, systemd unit syntax by key), and AWS values either filled from the stack output
or left as placeholders that nothing can run with."""

from __future__ import annotations

import configparser
import io
import json
import re
import shlex
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from gpucluster.render.hybrid.bundle import PLACEHOLDER_RE, AwsValues
from gpucluster.render.hybrid.bundle_slurm import BundleError
from gpucluster.render.slurm.agent import agent_bundle, sha256
from gpucluster_agents import contract
from tests.conftest import check_golden, require_tool
from tests.render.hybrid.bundle_site import files_of, site_files, site_for, stack_config, text
from tests.render.slurm_check import SLURMCTLD, check_slurmctld
from tests.render.slurm_versions import TRIXIE_VERSION, trixie_root  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # runs slurmctld, also in the trixie root (chroot)

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "hybrid" / "bundle"
LT = "lt-0123456789abcdef0"
SUBNET = "subnet-0aaaabbbbccccdddd"
ARNS = {
    "trustAnchorArn": "arn:aws:rolesanywhere:us-east-1:123456789012:trust-anchor/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "profileArn": "arn:aws:rolesanywhere:us-east-1:123456789012:profile/1f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "roleArn": "arn:aws:iam::123456789012:role/hybrid-slurm-site-agent",
}
# the parts of the stack's `hybrid` output the bundle reads
OUTPUT = {
    "slurm": {"burstNodeGroups": {"p5": {"launchTemplateId": LT, "subnetIds": [SUBNET]}}},
    "credentials": ARNS,
}
DEFUNCT = ("defunct", "unrecognized", "Unrecognized", "specified more than once")


def fresh(run_dir: Path) -> Path:
    """A run directory of its own: slurmctld appends to a log it finds."""
    shutil.rmtree(run_dir, ignore_errors=True)
    return run_dir


@pytest.fixture(scope="module")
def config() -> dict:
    return stack_config()


def test_bundle_golden(config: dict, update_golden: bool):
    files = files_of(site_for(config))
    for path, f in files.items():
        if path.endswith(".zip"):
            continue
        if path.endswith(".sha256"):  # changes with every edit of the agent: checked against the zip below
            continue
        check_golden(GOLDEN / "hybrid-slurm" / path, f.content.decode(), update_golden)
    pinned = {p.relative_to(GOLDEN / "hybrid-slurm").as_posix() for p in (GOLDEN / "hybrid-slurm").rglob("*") if p.is_file()}
    assert pinned == {p for p in files if not p.endswith((".zip", ".sha256"))}


def test_the_agent_package_is_the_projects_and_its_hash_matches(config: dict):
    files = files_of(site_for(config))
    package = files["gpucluster_agents.zip"].content
    assert package == agent_bundle()
    assert text(files, "gpucluster_agents.zip.sha256") == f"{sha256(package)}  gpucluster_agents.zip\n"
    names = zipfile.ZipFile(io.BytesIO(package)).namelist()
    assert "gpucluster_agents/contract/site.py" in names and "gpucluster_agents/__main__.py" in names


def test_offline_bundle_holds_placeholders_the_agent_refuses(config: dict, tmp_path: Path):
    files = files_of(site_for(config))
    doc = json.loads(text(files, "agent.json"))
    with pytest.raises(contract.ConfigError) as err:
        contract.parse(doc)
    assert "launch_template_id" in str(err.value) and "subnet_ids[0]" in str(err.value)
    assert set(PLACEHOLDER_RE.findall(text(files, "aws-config"))) == {"@@trustAnchorArn@@", "@@profileArn@@", "@@roleArn@@"}
    assert "Not installable yet" in text(files, "INSTALL.md")


def test_filled_bundle_runs_on_the_site_controller(config: dict):
    site = site_for(config, resumeProgram="/usr/local/sbin/site-resume", suspendProgram="/usr/local/sbin/site-suspend")
    files = files_of(site, AwsValues.from_output(OUTPUT))
    cfg = contract.parse(json.loads(text(files, "agent.json")))
    (group,) = cfg.node_groups
    assert (group.launch_template_id, group.subnet_ids, group.max_nodes) == (LT, (SUBNET,), 16)
    assert cfg.topology_conf is None  # the site's topology.conf is the site's
    assert cfg.site.aws_profile == "gpucluster-hybrid-slurm" and cfg.site.aws_config_file == "/opt/gpucluster/etc/aws-config"
    assert (cfg.site.resume_program, cfg.site.suspend_program) == ("/usr/local/sbin/site-resume", "/usr/local/sbin/site-suspend")
    assert not PLACEHOLDER_RE.search(text(files, "aws-config")) and "Not installable yet" not in text(files, "INSTALL.md")
    parser = configparser.ConfigParser()
    parser.read_string(text(files, "aws-config"))
    command = shlex.split(parser["profile gpucluster-hybrid-slurm"]["credential_process"])
    assert command[:2] == ["/usr/local/bin/aws_signing_helper", "credential-process"]
    args = dict(zip(command[2::2], command[3::2], strict=True))
    assert args["--trust-anchor-arn"] == ARNS["trustAnchorArn"] and args["--role-arn"] == ARNS["roleArn"]
    assert args["--certificate"] == "/etc/gpucluster/pki/slurmctld.crt"
    assert not re.search(r"aws_access_key_id|aws_secret_access_key|AKIA", text(files, "aws-config"), re.I)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (
            {"slurm": {"burstNodeGroups": {"p5": {"launchTemplateId": "lt-0; rm -rf /", "subnetIds": [SUBNET]}}}},
            "launchTemplateId",
        ),
        ({"slurm": {"burstNodeGroups": {"p5": {"launchTemplateId": LT, "subnetIds": []}}}}, "subnetIds"),
        (
            {"slurm": {"burstNodeGroups": {}}, "credentials": {"roleArn": "arn:aws:iam::123456789012:role/x --region evil"}},
            "roleArn",
        ),
        ({"link": {}}, "burstNodeGroups"),
    ],
)
def test_stack_output_values_are_checked(output: dict, message: str):
    with pytest.raises(ValueError, match=message):
        AwsValues.from_output(output)


def test_cloud_partitions_own_their_timers_and_are_never_the_default(config: dict):
    files = files_of(site_for(config))
    cloud = text(files, "cloud.conf")
    assert not re.search(r"^SuspendTime=", cloud, re.M)  # the global SuspendTime stays the site's
    (partition,) = [line for line in cloud.splitlines() if line.startswith("PartitionName=")]
    assert "Default=NO" in partition and "SuspendTime=600" in partition and "ResumeTimeout=1800" in partition
    assert re.search(r"^NodeName=p5-\[1-16\] State=CLOUD CPUs=192 .*Gres=gpu:h100:8", cloud, re.M)


def test_scripts_parse_with_bash(config: dict):
    require_tool("/bin/bash")
    files = files_of(site_for(config))
    for path, f in files.items():
        if f.mode & 0o111:
            proc = subprocess.run(["bash", "-n"], input=f.content, capture_output=True, check=False)
            assert proc.returncode == 0, (path, proc.stderr)


def test_a_stack_without_a_controller_is_refused_with_the_fix():
    with pytest.raises(BundleError, match=r"add hybrid\.controller"):
        from gpucluster.load import load_spec
        from gpucluster.render.hybrid.bundle_slurm import site_of

        site_of(load_spec(stack_config("hybrid-eks"), stack="hybrid-eks").cluster)


def test_slurm_22_05_reads_the_site_conf_with_the_bundle_included(config: dict, tmp_path: Path):
    """22.05 stops at an unknown key and logs a repeated one: the site's file with the bundle merged is read clean."""
    require_tool(SLURMCTLD)
    files = files_of(site_for(config, slurmVersion="22.05"))
    rc, problems = check_slurmctld(site_files(files, str(tmp_path / "program")), tmp_path)
    assert rc == 124 and problems == [], problems
    log = (tmp_path / "slurmctld.log").read_text()
    assert not [line for line in log.splitlines() if any(d in line for d in DEFUNCT)], log


@pytest.mark.parametrize("version", ["23.11", TRIXIE_VERSION])
def test_slurm_24_11_reads_the_site_conf_with_the_bundle_included(config: dict, version: str, trixie_root: Path):  # noqa: F811
    run_dir = fresh(trixie_root / "tmp" / f"gpucluster-bundle-{version}")
    files = files_of(site_for(config, slurmVersion=version))
    rc, problems = check_slurmctld(site_files(files, f"/tmp/gpucluster-bundle-{version}/program"), run_dir, root=trixie_root)
    assert rc == 124 and problems == [], problems
    log = (run_dir / "slurmctld.log").read_text()
    assert not [line for line in log.splitlines() if any(d in line for d in DEFUNCT)], log


def test_slurm_24_11_flags_a_22_05_bundle_so_the_check_can_fail(config: dict, trixie_root: Path):  # noqa: F811
    run_dir = fresh(trixie_root / "tmp" / "gpucluster-bundle-old")
    files = files_of(site_for(config, slurmVersion="22.05"))
    rc, problems = check_slurmctld(site_files(files, "/tmp/gpucluster-bundle-old/program"), run_dir, root=trixie_root)
    assert rc == 124  # defunct keys are errors in the log, not fatal: the check must read the log
    assert any("cloud_reg_addrs" in p and "defunct" in p for p in problems), problems


def write_bundle(files: dict, out: Path) -> Path:
    for path, f in files.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(f.content)
        (out / path).chmod(f.mode)
    return out / "install.sh"


def test_install_refuses_a_bundle_with_placeholders_before_touching_anything(config: dict, tmp_path: Path):
    require_tool("/bin/bash")
    install_dir = tmp_path / "opt" / "gpucluster"
    files = files_of(site_for(config, installDir=str(install_dir), confDir=str(tmp_path / "etc")))
    proc = subprocess.run([str(write_bundle(files, tmp_path / "b"))], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "@@placeholders@@" in proc.stderr and "agent.json" in proc.stderr, proc.stderr
    assert not install_dir.exists() and not (tmp_path / "etc").exists()


def test_install_checks_the_package_hash_and_the_signing_helper_first(config: dict, tmp_path: Path):
    require_tool("/bin/bash")
    install_dir = tmp_path / "opt" / "gpucluster"
    (tmp_path / "etc").mkdir()
    helper = tmp_path / "no" / "aws_signing_helper"
    site = site_for(
        config,
        installDir=str(install_dir),
        confDir=str(tmp_path / "etc"),
        slurmUser="root",
        credentials={"signingHelperPath": str(helper)},
    )
    script = write_bundle(files_of(site, AwsValues.from_output(OUTPUT)), tmp_path / "b")
    proc = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and f"no aws_signing_helper at {helper}" in proc.stderr, proc.stderr
    (tmp_path / "b" / "gpucluster_agents.zip").write_bytes(b"tampered")
    proc = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "does not match its sha256" in proc.stderr, proc.stderr
    assert not install_dir.exists()
