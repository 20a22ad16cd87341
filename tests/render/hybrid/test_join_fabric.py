"""The two fabrics of a hybrid cluster: the site's RoCE / InfiniBand NCCL environment, the cloud nodes' EFA one, and
the TaskProlog both sides run, which refuses a job with nodes on both sides (run under dash, as /bin/sh on Ubuntu)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpucluster.render.compute.node import NCCL_ENV_PATH
from gpucluster.render.core import env_file
from gpucluster.render.hybrid.fabric import (
    cloud_node_patterns,
    hybrid_task_prolog,
    onprem_nccl_environment,
)
from tests.conftest import require_tool
from tests.render.hybrid.join_cases import hybrid_spec, p5


def test_onprem_environment_per_fabric():
    roce = onprem_nccl_environment("roce")
    assert roce["NCCL_IB_GID_INDEX"] == "3" and roce["NCCL_IB_ROCE_VERSION_NUM"] == "2"
    assert roce["NCCL_NET"] == "IB" and roce["NCCL_IB_HCA"] == "mlx5" and roce["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth"
    ib = onprem_nccl_environment("infiniband")
    assert "NCCL_IB_GID_INDEX" not in ib and "NCCL_IB_ROCE_VERSION_NUM" not in ib and ib["NCCL_NET"] == "IB"
    assert not any(k.startswith("FI_") for k in {**roce, **ib})  # nothing of EFA's on the site
    with pytest.raises(ValueError, match="unknown site fabric"):
        onprem_nccl_environment("efa")


def test_cloud_environment_is_efa():
    spec = hybrid_spec()
    env = dict(p5(spec).nccl_env)
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1" and "NCCL_NET" not in env


def test_burst_groups_and_names():
    spec = hybrid_spec()
    assert [g.name for g in spec.burst_groups] == ["p5"]
    assert cloud_node_patterns(spec.burst_groups) == ["p5-"]
    assert [g.name for g in hybrid_spec(burstNodeGroups=None).burst_groups] == ["p5"]  # default: every Slurm group


class Prolog:
    """The rendered TaskProlog with ``scontrol show hostnames`` answered from ``FAKE_HOSTS``."""

    def __init__(self, tmp: Path, fabric: str = "roce"):
        spec = hybrid_spec(fabric=fabric)
        self.script = tmp / "task-prolog"
        self.script.write_text(hybrid_task_prolog(spec))
        self.bin = tmp / "bin"
        self.bin.mkdir()
        scontrol = self.bin / "scontrol"
        scontrol.write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] || exit 1\nfor h in $FAKE_HOSTS; do echo "$h"; done\n')
        scontrol.chmod(0o755)
        self.env_file = tmp / "nccl.env"
        self.env_file.write_text(env_file(dict(p5(spec).nccl_env)))

    def run(self, node: str, hosts: str, **env: str) -> subprocess.CompletedProcess[str]:
        full = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "SLURMD_NODENAME": node,
            "SLURM_JOB_NODELIST": "list",
            "SLURM_JOB_ID": "42",
            "FAKE_HOSTS": hosts,
            "GPUCLUSTER_NCCL_ENV": str(self.env_file),
            **env,
        }
        return subprocess.run([require_tool("dash"), str(self.script)], env=full, capture_output=True, text=True, timeout=30)


def exports(out: str) -> dict[str, str]:
    pairs = (line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export "))
    return dict(pairs)


def test_cloud_job_gets_efa(tmp_path):
    result = Prolog(tmp_path).run("p5-2", "p5-1 p5-2", LD_LIBRARY_PATH="/usr/lib/x")
    assert result.returncode == 0, result.stderr
    env = exports(result.stdout)
    assert env["FI_PROVIDER"] == "efa" and "NCCL_IB_GID_INDEX" not in env and "NCCL_NET" not in env
    assert env["LD_LIBRARY_PATH"].startswith("/opt/amazon/efa/lib:") and env["LD_LIBRARY_PATH"].endswith(":/usr/lib/x")


def test_site_job_gets_roce(tmp_path):
    result = Prolog(tmp_path).run("gpu017", "gpu016 gpu017")
    assert result.returncode == 0, result.stderr
    env = exports(result.stdout)
    assert env == onprem_nccl_environment("roce")
    assert "FI_PROVIDER" not in env and "LD_LIBRARY_PATH" not in env


def test_infiniband_site(tmp_path):
    env = exports(Prolog(tmp_path, "infiniband").run("gpu017", "gpu017").stdout)
    assert env == onprem_nccl_environment("infiniband")


def test_job_settings_win(tmp_path):
    env = exports(Prolog(tmp_path).run("gpu017", "gpu017", NCCL_IB_GID_INDEX="5", NCCL_DEBUG="INFO").stdout)
    assert "NCCL_IB_GID_INDEX" not in env and "NCCL_DEBUG" not in env and env["NCCL_NET"] == "IB"


@pytest.mark.parametrize("node", ["p5-1", "gpu016"])
def test_job_on_both_sides_is_refused_on_every_node(tmp_path, node):
    result = Prolog(tmp_path).run(node, "gpu016 p5-1")
    assert result.returncode == 1
    assert "print gpucluster: job 42 has nodes on onprem and in AWS" in result.stdout
    assert "export " not in result.stdout


@pytest.mark.parametrize("name", ["p5-", "p5-x", "p5-1a", "xp5-1", "p5"])
def test_names_that_only_look_like_cloud_nodes_are_site_nodes(tmp_path, name):
    """Only <group>-<digits> is a cloud node: a site node named like that prefix is still the site's."""
    prolog = Prolog(tmp_path)
    assert prolog.run(name, f"{name} gpu016").returncode == 0  # both on the site
    assert prolog.run("p5-1", f"{name} p5-1").returncode == 1  # one each side


def test_unexpandable_list_falls_back_to_the_partitions(tmp_path):
    prolog = Prolog(tmp_path)
    (prolog.bin / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    result = prolog.run("p5-1", "p5-1")
    assert result.returncode == 0 and "cannot expand" in result.stderr
    assert exports(result.stdout)["FI_PROVIDER"] == "efa"


def test_cloud_node_without_env_file(tmp_path):
    result = Prolog(tmp_path).run("p5-1", "p5-1", GPUCLUSTER_NCCL_ENV=str(tmp_path / "missing"))
    assert result.returncode == 0 and result.stdout == ""


def test_default_env_path_is_the_one_the_node_writes():
    assert f"env_file=${{GPUCLUSTER_NCCL_ENV:-{NCCL_ENV_PATH}}}" in hybrid_task_prolog(hybrid_spec())


def test_burst_groups_one_rule_for_checks_renderers_and_components():
    """``burst_group_names`` is the one definition: the named groups that Slurm runs, in burstNodeGroups' order;
    a name of no Slurm group is left to the checks (a finding), never raised from a renderer."""
    from gpucluster.config.effective import burst_group_names

    cluster = hybrid_spec()
    hybrid = cluster.spec.hybrid
    assert hybrid is not None
    unchecked = cluster.spec.model_copy(update={"hybrid": hybrid.model_copy(update={"burst_node_groups": ("nope", "p5")})})
    assert burst_group_names(unchecked) == ("p5",)  # the loader refuses 'nope' with a finding first
    assert [g.name for g in cluster.burst_groups] == ["p5"]
    assert burst_group_names(hybrid_spec(burstNodeGroups=None).spec) == ("p5",)
