"""The control plane's side: the health config each node group's instances get, from the catalog."""

from __future__ import annotations

import json

from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.gpu_health import GPU_HEALTH_FILE, gpu_health_facts
from gpucluster.render.health import health_config
from gpucluster_agents.health.config import parse, to_json


def test_p5_48xlarge_carries_its_hardware():
    cfg = health_config(load_catalog()["p5.48xlarge"], efa_enabled=True, shared_fs_mount="/fsx")
    assert (cfg.gpu_count, cfg.gpu_model) == (8, "H100")
    assert (cfg.pcie_generation, cfg.pcie_width, cfg.nvlink_links, cfg.efa_count) == (5, 16, 18, 32)
    assert (cfg.hbm_copy_gbps, cfg.gemm_tflops, cfg.shared_fs_mount) == (3020, 748, "/fsx")
    assert parse(json.loads(to_json(cfg))) == cfg  # what the node reads back is what was rendered


def test_efa_count_is_what_the_launch_template_attaches():
    catalog = load_catalog()
    assert health_config(catalog["p5en.48xlarge"], efa_enabled=True).efa_count == 16
    assert health_config(catalog["p5.48xlarge"], efa_enabled=False).efa_count == 0
    assert health_config(catalog["p6-b300.48xlarge"], efa_enabled=True).efa_count == 16  # card 0 is ENA-only


def test_one_gpu_expects_no_nvlink_and_unknown_models_compare_with_nvml_only():
    catalog = load_catalog()
    single = health_config(catalog["p5.4xlarge"], efa_enabled=True)
    assert (single.gpu_count, single.nvlink_links, single.hbm_copy_gbps) == (1, 0, 3020)
    b200 = health_config(catalog["p6-b200.48xlarge"], efa_enabled=True)
    assert (b200.pcie_generation, b200.nvlink_links, b200.hbm_copy_gbps) == (0, 18, None)
    l40s = health_config(catalog["g6e.48xlarge"], efa_enabled=True)
    assert (l40s.pcie_generation, l40s.pcie_idle_downshift, l40s.nvlink_links, l40s.efa_count) == (4, True, 0, 4)
    assert health_config(catalog["p5.48xlarge"], efa_enabled=True).pcie_idle_downshift is False
    cpu = health_config(catalog["m7i.xlarge"], efa_enabled=False)
    assert (cpu.gpu_count, cpu.gpu_model, cpu.efa_count) == (0, "", 0)


def test_every_catalog_gpu_model_has_health_facts_with_sources():
    doc = json.loads(GPU_HEALTH_FILE.read_text())
    models = {a.model for t in load_catalog() for a in load_catalog()[t].gpus}
    assert models <= set(doc["GpuModels"]), models - set(doc["GpuModels"])
    keys = set(next(iter(doc["GpuModels"].values())))
    assert keys - {"PcieWidth"} <= set(doc["_sources"])
    assert gpu_health_facts(None) is None and gpu_health_facts("Z9") is None
