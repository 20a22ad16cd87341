"""The control plane's side: the health config each node group's instances get, from the catalog."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
from pathlib import Path

import yaml

from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.gpu_health import GPU_HEALTH_FILE, gpu_health_facts
from gpucluster.load import load_spec
from gpucluster.render.compute.node import LUSTRE_MOUNT_SCRIPT
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.health import HEALTH_CONFIG
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.compute.health import health_config
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, resolve_node_group
from gpucluster.resolve.storage import SharedFs
from gpucluster_agents.contract.health import HealthConfig, parse, to_json
from gpucluster_agents.health.host_checks import check_shared_fs
from tests.conftest import MIXED_STORAGE, MIXED_STORAGE_GROUPS, make_config
from tests.plans import shipped_plan


def resolved(itype: str, efa: bool) -> ResolvedNodeGroup:
    """A node group of ``itype`` resolved as the stack resolves one (its launch template's interface layout)."""
    spec = NodeGroupSpec(name="g", instance_type=itype, availability_zones=("us-east-1a",), max_size=1, enable_efa_support=efa)
    return resolve_node_group(spec, load_catalog())


def config_of(itype: str, efa: bool = True, **fs: str) -> HealthConfig:
    """The health config of a resolved group of ``itype``: the EFA devices its launch template gives a node."""
    g = resolved(itype, efa)
    return health_config(g.facts, efa_count=g.efa_interfaces, **fs)


def test_p5_48xlarge_carries_its_hardware():
    cfg = config_of("p5.48xlarge", shared_fs_mount="/fsx")
    assert (cfg.gpu_count, cfg.gpu_model) == (8, "H100")
    assert (cfg.pcie_generation, cfg.pcie_width, cfg.nvlink_links, cfg.efa_count) == (5, 16, 18, 32)
    assert (cfg.hbm_copy_gbps, cfg.gemm_tflops, cfg.shared_fs_mount) == (3020, 748, "/fsx")
    assert parse(json.loads(to_json(cfg))) == cfg  # what the node reads back is what was rendered


def test_efa_count_is_what_the_launch_template_attaches():
    assert config_of("p5en.48xlarge").efa_count == 16
    assert config_of("p5.48xlarge", efa=False).efa_count == 0
    assert config_of("p6-b300.48xlarge").efa_count == 16  # card 0 is ENA-only


def test_one_gpu_expects_no_nvlink_and_unknown_models_compare_with_nvml_only():
    single = config_of("p5.4xlarge")
    assert (single.gpu_count, single.nvlink_links, single.hbm_copy_gbps) == (1, 0, 3020)
    b200 = config_of("p6-b200.48xlarge")
    assert (b200.pcie_generation, b200.nvlink_links, b200.hbm_copy_gbps) == (0, 18, None)
    l40s = config_of("g6e.48xlarge")
    assert (l40s.pcie_generation, l40s.pcie_idle_downshift, l40s.nvlink_links, l40s.efa_count) == (4, True, 0, 4)
    assert config_of("p5.48xlarge").pcie_idle_downshift is False
    cpu = config_of("m7i.xlarge", efa=False)
    assert (cpu.gpu_count, cpu.gpu_model, cpu.efa_count) == (0, "", 0)


def test_every_catalog_gpu_model_has_health_facts_with_sources():
    doc = json.loads(GPU_HEALTH_FILE.read_text())
    models = {a.model for t in load_catalog() for a in load_catalog()[t].gpus}
    assert models <= set(doc["GpuModels"]), models - set(doc["GpuModels"])
    keys = set(next(iter(doc["GpuModels"].values())))
    assert keys - {"PcieWidth"} <= set(doc["_sources"])
    assert gpu_health_facts(None) is None and gpu_health_facts("Z9") is None


# --- the shared file system reaches the Slurm nodes' health.json ------------------------------------------------


def _health_json(user_data: str) -> HealthConfig:
    """The ``/etc/gpucluster/health.json`` a node's rendered user data writes, as the node reads it."""
    doc = yaml.safe_load(user_data)
    [entry] = [f for f in doc["write_files"] if f["path"] == HEALTH_CONFIG]
    assert entry["encoding"] == "gz+b64"
    return parse(json.loads(gzip.decompress(base64.b64decode(entry["content"]))))


def test_slurm_p5_sweep_checks_the_lustre_mount_its_user_data_mounts(tmp_path: Path):
    """slurm-p5 mounts FSx for Lustre at /fsx on its node groups: the health config names it, sweep and boot
    run the check, and the check judges a node by it (mounted as lustre: pass; missing: a fault)."""
    plan = shipped_plan("slurm-p5")
    for resource in ("slurm-p5-slurm-p5-lt", "slurm-p5-slurm-dev-lt"):
        user_data = plan.files[f"{resource}/user-data"]
        assert LUSTRE_MOUNT_SCRIPT in user_data  # the same user data mounts it
        cfg = _health_json(user_data)
        assert (cfg.shared_fs_mount, cfg.shared_fs_type) == ("/fsx", "lustre"), resource
        assert "shared_fs" in cfg.mode("sweep").checks and "shared_fs" in cfg.mode("boot").checks
    mounts = tmp_path / "mounts"
    cfg = dataclasses.replace(_health_json(plan.files["slurm-p5-slurm-p5-lt/user-data"]), mounts_file=str(mounts))
    mounts.write_text("fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcdef /fsx lustre rw,noatime,flock 0 0\n")
    assert check_shared_fs(cfg).ok
    mounts.write_text("/dev/root / ext4 rw 0 0\n")
    check = check_shared_fs(cfg)
    assert (check.ok, check.action, check.detail) == (False, "reboot", "/fsx not mounted")


def test_slurm_groups_without_lustre_check_their_nvme_raid_or_nothing():
    """Lustre on one group only; NVMe scratch (ext4) on the others: each group's health.json names what its
    own user data mounts; a group with neither has no shared_fs check configured."""
    config = make_config(
        *MIXED_STORAGE_GROUPS,
        storage=MIXED_STORAGE,
        slurm={"nodeGroups": [{"name": "p5"}, {"name": "p4d"}, {"name": "cpu"}]},
    )
    cluster = load_spec(config, stack="fs").cluster
    want = {"p5": SharedFs("/lustre", "lustre"), "p4d": SharedFs("/scratch", "ext4"), "cpu": None}
    assert {g.name: g.shared_fs for g in cluster.node_groups} == want
    ctx = SlurmContext.of(cluster)
    for g in ctx.node_groups[:2]:
        files = {f.path: f for f in node_slurm_part(ctx, g).write_files}
        cfg = parse(json.loads(files[HEALTH_CONFIG].text()))
        fs = want[g.name]
        assert fs is not None and (cfg.shared_fs_mount, cfg.shared_fs_type) == (fs.mount_point, fs.fstype)
