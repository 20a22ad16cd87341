"""User data of a burst node that joins the site's slurmctld: pinned by goldens, accepted by cloud-init's schema check
and the shells, the slurmd chosen by the controller's window (25.05 refused), no secret in it, the munge key read by ARN."""

from __future__ import annotations

import dataclasses
import gzip
import os
import re
import stat
import subprocess
import sys
from typing import Any

import pytest
import yaml

from gpucluster.config.errors import ConfigError
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.core import USER_DATA_LIMIT
from gpucluster.render.hybrid.compute import (
    CHRONY_SOURCES,
    JOIN_SETUP,
    HybridJoinError,
    cloud_slurm,
    render_hybrid_compute_user_data,
)
from gpucluster.render.hybrid.fabric import HYBRID_TASK_PROLOG, site_controller
from gpucluster.render.slurm.names import AWS_HELPER, AWS_HELPER_CONFIG
from gpucluster.resolve.cluster import ResolvedCluster, resolve
from tests.conftest import GOLDEN, check_golden, require_tool
from tests.render.hybrid.join_cases import SECRET_ARN, files, hybrid_spec, p5

GOLDEN_DIR = GOLDEN / "hybrid" / "join"
# controller release -> the Ubuntu LTS of the cloud image and the slurmd its archive ships
SCENARIOS = {"22.05": ("22.04", "21.08"), "24.11": ("24.04", "23.11")}


def user_data(version: str, **changes) -> str:
    spec = hybrid_spec(controller={"slurmVersion": version}, **changes)
    return render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN)


@pytest.mark.parametrize("version", sorted(SCENARIOS))
def test_golden_and_cloud_init_schema(version, tmp_path, update_golden):
    text = user_data(version)
    check_golden(GOLDEN_DIR / f"controller-{version}.yaml", text, update_golden)
    # the two scripts, decoded, so a review reads what the node runs
    written = files(text)
    check_golden(GOLDEN_DIR / f"controller-{version}.join.sh", written[JOIN_SETUP].text(), update_golden)
    assert text.startswith("#cloud-config\n")
    assert set(yaml.safe_load(text)) == {"write_files", "bootcmd", "runcmd"}
    assert len(gzip.compress(text.encode())) <= USER_DATA_LIMIT
    path = tmp_path / "user-data.yaml"
    path.write_text(text)
    result = subprocess.run([require_tool("cloud-init"), "schema", "-c", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_task_prolog_golden(update_golden):
    check_golden(GOLDEN_DIR / "task-prolog.sh", files(user_data("22.05"))[HYBRID_TASK_PROLOG].text(), update_golden)


@pytest.mark.parametrize("version", sorted(SCENARIOS))
def test_scripts_parse(version, tmp_path):
    written = files(user_data(version))
    for path, shell in ((JOIN_SETUP, "bash"), (HYBRID_TASK_PROLOG, "dash"), (HYBRID_TASK_PROLOG, "bash")):
        script = tmp_path / "script"
        script.write_text(written[path].text())
        result = subprocess.run([require_tool(shell), "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, f"{path}: {shell} -n: {result.stderr}"
    assert written[JOIN_SETUP].text().startswith("#!/bin/bash\n")
    assert written[HYBRID_TASK_PROLOG].text().startswith("#!/bin/sh\n")


@pytest.mark.parametrize("version", sorted(SCENARIOS))
def test_controller_release_picks_ubuntu_and_slurmd(version):
    ubuntu, slurmd = SCENARIOS[version]
    spec = hybrid_spec(controller={"slurmVersion": version})
    assert cloud_slurm(site_controller(spec.spec), p5(spec).spec).ubuntu == ubuntu
    script = files(user_data(version))[JOIN_SETUP].text()
    assert f"slurmd {slurmd} from Ubuntu {ubuntu}'s archive" in script
    install = next(line for line in script.splitlines() if line.startswith("apt-get") and " install " in line)
    from gpucluster.render.slurm.container_build import container_packages  # containers: on by default on a GPU group

    assert install.endswith("chrony python3-boto3 iptables slurmd slurm-client munge " + " ".join(container_packages()))
    # the boot-time check accepts exactly the controller's window
    case = re.search(r"^  ([0-9. |]+)\) log \"slurmd \$version\"", script, re.M)
    assert case is not None
    window = case.group(1).split(" | ")
    assert slurmd in window and version in window and len(window) == 3


def unchecked(controller: dict[str, Any], groups: dict[str, Any] | None = None) -> ResolvedCluster:
    """The hybrid-slurm spec with ``controller``/p5 fields changed after loading: what the load checks refuse, so
    the renderer's own refusal (its defence when called from another program) is what answers."""
    spec = hybrid_spec().spec
    assert spec.hybrid is not None and spec.hybrid.controller is not None
    ctl = spec.hybrid.controller.model_copy(update=controller)
    groups_ = tuple(g.model_copy(update=groups or {}) if g.name == "p5" else g for g in spec.node_groups)
    changed = spec.model_copy(update={"hybrid": spec.hybrid.model_copy(update={"controller": ctl}), "node_groups": groups_})
    return resolve(changed, load_catalog())


def test_slurm_25_05_controller_is_refused():
    with pytest.raises(ConfigError) as loaded:  # at load, before any resource
        hybrid_spec(controller={"slurmVersion": "25.05"})
    assert "gpucluster:hybrid.controller.slurmVersion: no cloud image gpucluster knows has a slurmd" in str(loaded.value)
    spec = unchecked({"slurm_version": "25.05"})
    with pytest.raises(HybridJoinError) as err:
        render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN)
    message = str(err.value)
    assert "no Ubuntu LTS ships a slurmd that the site's slurmctld 25.05 accepts" in message
    assert "24.05, 24.11, 25.05" in message and "Ubuntu 24.04: 23.11" in message
    assert "cloudSlurmVersion" in message and "imageId" in message


def test_own_image_with_its_slurmd():
    # containers off: gpucluster has no pyxis build for a site image's own slurmd (checks/slurm/containers.py)
    spec = hybrid_spec(
        controller={"slurmVersion": "25.05", "cloudSlurmVersion": "24.11"},
        groups={"imageId": "ami-0123456789abcdef0"},
        slurm={"containers": {"enabled": False}},
    )
    assert cloud_slurm(site_controller(spec.spec), p5(spec).spec).ubuntu is None
    script = files(render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN))[JOIN_SETUP].text()
    assert "slurmd 24.11 from the node group's own image" in script
    assert "install -y -q --no-install-recommends chrony python3-boto3 iptables\n" in script  # no slurmd from Ubuntu


@pytest.mark.parametrize(
    ("controller", "groups", "fragment"),
    [
        ({"slurmVersion": "25.05", "cloudSlurmVersion": "23.11"}, {"imageId": "ami-0123456789abcdef0"}, "cannot register"),
        ({"slurmVersion": "24.11", "cloudSlurmVersion": "24.11"}, {}, "names no imageId"),
    ],
)
def test_own_image_refusals(controller, groups, fragment):
    try:
        spec = hybrid_spec(controller=controller, groups=groups)
    except ConfigError as loaded:  # the load checks refuse it first: the renderer must refuse it on its own too
        assert "gpucluster:hybrid.controller.cloudSlurmVersion" in str(loaded)
        snake = {"slurmVersion": "slurm_version", "cloudSlurmVersion": "cloud_slurm_version", "imageId": "image_id"}
        spec = unchecked({snake[k]: v for k, v in controller.items()}, {snake[k]: v for k, v in groups.items()})
    with pytest.raises(HybridJoinError, match=fragment):
        render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN)


@pytest.mark.parametrize(
    ("arn", "fragment"),
    [
        ("gpucluster/hybrid-slurm/munge-key", "is not a Secrets Manager secret ARN"),
        ("arn:aws:secretsmanager:us-west-2:123456789012:secret:munge-AbCdEf", "is in us-west-2, the cluster in us-east-1"),
        ('arn:aws:secretsmanager:us-east-1:123456789012:secret:x"; rm -rf /', "is not a Secrets Manager secret ARN"),
    ],
)
def test_bad_secret_arn_is_refused(arn, fragment):
    spec = hybrid_spec()
    with pytest.raises(HybridJoinError, match=fragment):
        render_hybrid_compute_user_data(spec, p5(spec), arn)


def test_group_outside_burst_node_groups_is_refused():
    spec = hybrid_spec(burstNodeGroups=["p5"])
    other = dataclasses.replace(p5(spec), spec=p5(spec).spec.model_copy(update={"name": "cpu"}))
    with pytest.raises(HybridJoinError, match="not one the site bursts into"):
        render_hybrid_compute_user_data(spec, other, SECRET_ARN)


def test_no_secret_in_user_data():
    text = user_data("22.05")
    written = files(text)
    decoded = "\n".join(f.text() for f in written.values())
    # the key is read at boot, by ARN, by the boot helper; nothing secret-shaped travels in the user data
    assert "munge.key" not in text  # not even a key file written by cloud-init
    assert not any(p.startswith("/etc/munge") for p in written)
    for pattern in (r"AKIA[0-9A-Z]{16}", r"ASIA[0-9A-Z]{16}", r"-----BEGIN", r"SecretString", r"aws_secret_access_key"):
        assert not re.search(pattern, text + decoded), pattern
    config = yaml.safe_load(written[AWS_HELPER_CONFIG].text())
    assert config["secret_name"] == SECRET_ARN and config["region"] == "us-east-1"


def test_chrony_uses_amazon_time_sync_before_munge():
    written = files(user_data("24.11"))
    assert written[CHRONY_SOURCES].text().splitlines()[-1] == "server 169.254.169.123 prefer iburst minpoll 4 maxpoll 4"
    script = written[JOIN_SETUP].text()
    assert script.index("chronyc waitsync") < script.index('"$aws_helper" munge-key') < script.index("enable --now munge")


def test_controller_name_resolution():
    # slurmctl01 is not under the Resolver's domain (hpc.example.internal): /etc/hosts names it
    script = files(user_data("22.05"))[JOIN_SETUP].text()
    assert "printf '%s %s\\n' 10.20.0.10 slurmctl01 >>\"$root/etc/hosts\"" in script
    assert 'SLURMD_OPTIONS=\\"--conf-server 10.20.0.10:6817 -N $node\\"' in script
    # a name the Resolver rule forwards needs no entry
    spec = hybrid_spec(controller={"host": "slurmctl01.hpc.example.internal", "port": 6900})
    script = files(render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN))[JOIN_SETUP].text()
    assert '>>"$root/etc/hosts"' not in script
    assert "forwards hpc.example.internal" in script and "--conf-server 10.20.0.10:6900 -N" in script


def test_nss_slurm_only_when_enabled():
    assert "nsswitch" in files(user_data("22.05"))[JOIN_SETUP].text()
    assert "nsswitch" not in files(user_data("22.05", enableNssSlurm=False))[JOIN_SETUP].text()


def test_boot_helper_reads_the_site_key_by_arn(moto_endpoint, aws_env, tmp_path):
    """The rendered helper and its config, run as the node runs them, against Secrets Manager (moto): the key the
    site wrote lands in the key file, mode 0400."""
    import boto3

    sm = boto3.client("secretsmanager", region_name="us-east-1", endpoint_url=moto_endpoint)
    key = os.urandom(1024)
    arn = sm.create_secret(Name=f"gpucluster/join-{tmp_path.name}/munge-key", SecretBinary=key)["ARN"]
    spec = hybrid_spec()
    written = files(render_hybrid_compute_user_data(spec, p5(spec), arn))
    helper = tmp_path / "gpucluster-aws"
    helper.write_text(written[AWS_HELPER].text())
    (tmp_path / "gpucluster-aws.json").write_text(written[AWS_HELPER_CONFIG].text())
    key_file = tmp_path / "munge.key"
    env = {**os.environ, "GPUCLUSTER_SM_ENDPOINT": moto_endpoint, "GPUCLUSTER_MUNGE_KEY": str(key_file)}
    subprocess.run([sys.executable, str(helper), "munge-key"], env=env, check=True, timeout=60, capture_output=True)
    assert key_file.read_bytes() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o400


def test_burst_nodes_build_pyxis_against_the_archives_slurmd(tmp_path):
    """Containers on (the default on a GPU group): the join installs the build packages with slurmd and builds pyxis
    and enroot once the slurmd is known to be in the controller's window, before munge and slurmd start."""
    from gpucluster.render.slurm.container_build import container_packages

    spec = hybrid_spec()
    script = files(render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN))[JOIN_SETUP].text()
    assert all(p in script for p in container_packages())
    window, build = script.index("outside Slurm 22.05's window"), script.index("fetch pyxis v0.24.0")
    assert window < build < script.index('"$aws_helper" munge-key') < script.index("--now slurmd")
    path = tmp_path / "join.sh"
    path.write_text(script)
    check = subprocess.run([require_tool("shellcheck"), "-s", "bash", "-S", "warning", str(path)],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout
    off = hybrid_spec(slurm={"containers": {"enabled": False}})
    assert "pyxis" not in files(render_hybrid_compute_user_data(off, p5(off), SECRET_ARN))[JOIN_SETUP].text()
