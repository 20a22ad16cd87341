"""Every check against a fake node: NVML readings of a real H100 (FACTS.md) altered one fault at a time,
EFA devices in a sysfs tree, real XID lines in the kernel log, /proc/mounts. Each scenario's verdict is
a golden file (tests/golden/health/<scenario>.json), and its action and failing checks are asserted
here too, so a golden rewritten by mistake cannot hide a wrong judgement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster_agents.health.fake_nvml import FakeNvml
from gpucluster_agents.health.run import run
from tests.agents.health.fakes import MOUNTS_NONE, XID_MESSAGES, journal_log, kernel_log, kmsg_record, node, p5_config, scenario
from tests.conftest import GOLDEN, check_golden

NOW = "2026-11-01T00:00:00Z"

# name -> (NVML scenario, node overrides, mode, expected action, the checks that fail)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any], str, str, set[str]]] = {
    "healthy": (scenario(), {}, "boot", "none", set()),
    "under-load-sw-power-cap": (scenario({i: {"clock_events": 0x4} for i in range(8)}), {}, "sweep", "none", set()),
    "app-xids-only": (scenario(), {"xids": (13, 31)}, "sweep", "none", set()),
    "row-remap-pending": (scenario({2: {"remapped_rows": [0, 1, 1, 0]}}), {}, "sweep", "reboot", {"row_remap"}),
    "row-remap-failure": (scenario({5: {"remapped_rows": [3, 12, 0, 1]}}), {}, "sweep", "replace", {"row_remap"}),
    "pcie-gen3": (scenario({3: {"pcie_gen": 3}}), {}, "sweep", "reboot", {"pcie_link"}),
    "pcie-x8": (scenario({6: {"pcie_width": 8}}), {}, "sweep", "reboot", {"pcie_link"}),
    "thermal-slowdown": (
        scenario({1: {"clock_events": 0x40 | 0x20, "temperature": 92}}),
        {},
        "sweep",
        "replace",
        {"clock_events", "temperature"},
    ),
    "power-brake": (scenario({4: {"clock_events": 0x80 | 0x4}}), {}, "prolog", "replace", {"clock_events"}),
    "hw-slowdown": (scenario({0: {"clock_events": 0x8}}), {}, "sweep", "replace", {"clock_events"}),
    "ecc-off": (scenario({7: {"ecc_mode": [0, 0]}}), {}, "sweep", "replace", {"ecc"}),
    "ecc-off-pending-on": (scenario({7: {"ecc_mode": [0, 1]}}), {}, "sweep", "reboot", {"ecc"}),
    "ecc-uncorrected": (scenario({2: {"ecc_uncorrected_volatile": 2}}), {}, "prolog", "reboot", {"ecc"}),
    "gpu-missing": (scenario(gpu_count=7), {}, "sweep", "reboot", {"gpu_count"}),
    "gpu-lost": (scenario({5: {"temperature": {"error": "GPU_IS_LOST"}}}), {}, "sweep", "reboot", {"temperature"}),
    "nvlink-down": (scenario({3: {"nvlink": [1] * 16 + [0, 0]}}), {}, "sweep", "replace", {"nvlink"}),
    "no-driver": (scenario(init_error="DRIVER_NOT_LOADED"), {}, "sweep", "reboot", {"driver"}),
    "no-nvml-library": (scenario(init_error="LIBRARY_NOT_FOUND"), {}, "prolog", "reboot", {"driver"}),
    "xid-79-fallen-off-bus": (scenario(), {"xids": (13, 79)}, "sweep", "replace", {"xid"}),
    "xid-48-dbe": (scenario(), {"xids": (48, 63)}, "prolog", "reboot", {"xid"}),
    "xid-64-94-95": (scenario(), {"xids": (64, 94, 95)}, "sweep", "reboot", {"xid"}),
    "xid-119-gsp": (scenario(), {"xids": (119,)}, "sweep", "replace", {"xid"}),
    "efa-missing": (scenario(), {"efa": 30}, "sweep", "reboot", {"efa"}),
    "lustre-unmounted": (scenario(), {"mounts": MOUNTS_NONE}, "sweep", "reboot", {"shared_fs"}),
    "slow-hbm": (
        scenario(bench={"hbm_copy_gbps": {"default": 3010, "6": 2400}, "gemm_tflops": 755}),
        {},
        "boot",
        "replace",
        {"hbm_copy"},
    ),
    "slow-gemm": (
        scenario(bench={"hbm_copy_gbps": 3010, "gemm_tflops": {"default": 760, "1": 600}}),
        {},
        "boot",
        "replace",
        {"gemm"},
    ),
}


def verdict_for(tmp_path: Path, name: str) -> dict[str, Any]:
    nvml, overrides, mode, _, _ = SCENARIOS[name]
    node(tmp_path, nvml, **overrides)
    cfg = p5_config(tmp_path)
    v = run(cfg, mode, "p5-1", binding=FakeNvml(nvml), now=NOW, clock=lambda: 0.0)
    doc = v.to_dict()
    return json.loads(json.dumps(doc).replace(str(tmp_path), "<tmp>"))


@pytest.fixture(autouse=True)
def no_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No fi_info, dcgmi or nccl-tests on this fake node: only what a test puts in tmp/bin."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_verdict(name: str, tmp_path: Path, update_golden: bool) -> None:
    doc = verdict_for(tmp_path, name)
    _, _, mode, action, failing = SCENARIOS[name]
    assert doc["mode"] == mode
    assert doc["action"] == action, doc["reason"]
    assert {c["name"] for c in doc["checks"] if not c["ok"]} == failing
    assert doc["reason"].startswith("gpucluster: ") and len(doc["reason"]) <= 256
    if failing:
        assert doc["reason"].split()[1] in failing  # the reason names a failing check
    check_golden(GOLDEN / "health" / f"{name}.json", json.dumps(doc, indent=2) + "\n", update_golden)


def test_the_healthy_card_reads_like_the_real_h100(tmp_path: Path) -> None:
    """What FACTS.md's H100 showed is judged healthy: retired pages NotSupported is a skip, idle 0x1 is fine."""
    doc = verdict_for(tmp_path, "healthy")
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["retired_pages"]["detail"].startswith("skipped: NotSupported")
    assert checks["clock_events"]["value"]["gpu0"] == "0x1 GpuIdle"
    assert checks["pcie_link"]["value"]["gpu7"] == "gen5 x16"
    assert checks["efa"]["value"] == {"sysfs": 32}
    assert checks["hbm_copy"]["ok"] and checks["gemm"]["ok"]


def test_reason_names_the_gpu_and_the_reading(tmp_path: Path) -> None:
    assert verdict_for(tmp_path, "pcie-gen3")["reason"] == "gpucluster: pcie_link gpu3 gen3 x16 < gen5 x16 (reboot)"
    assert verdict_for(tmp_path / "b", "row-remap-failure")["reason"] == "gpucluster: row_remap gpu5 row remap failure (replace)"


def test_replace_wins_over_reboot_and_the_reason_says_how_many_more(tmp_path: Path) -> None:
    nvml = scenario({2: {"remapped_rows": [0, 1, 1, 0]}, 4: {"clock_events": 0x80}})
    node(tmp_path, nvml, xids=(79,))
    v = run(p5_config(tmp_path), "sweep", "p5-1", binding=FakeNvml(nvml), now=NOW, clock=lambda: 0.0)
    assert v.action == "replace"
    assert v.reason.startswith("gpucluster: clock_events gpu4 HwPowerBrakeSlowdown") and v.reason.endswith("(+2 more) (replace)")


def test_single_pcie_card_without_nvlink_is_healthy(tmp_path: Path) -> None:
    """A one-GPU VM (FACTS.md) answers NotSupported for NVLink: with no links expected, nothing fails."""
    nvml = scenario(gpu_count=1, gpu={**scenario()["gpu"], "nvlink": "NotSupported"})
    node(tmp_path, nvml, efa=1)
    cfg = p5_config(tmp_path, instance_type="p5.4xlarge", gpu_count=1, nvlink_links=0, efa_count=1)
    v = run(cfg, "sweep", "p5s-1", binding=FakeNvml(nvml), now=NOW, clock=lambda: 0.0)
    assert v.healthy, v.reason
    # ...and where links are expected but NVML cannot say, the check skips rather than fails
    cfg = p5_config(tmp_path, gpu_count=1, efa_count=1)
    nvlink = next(c for c in run(cfg, "sweep", "x", binding=FakeNvml(nvml), now=NOW).checks if c.name == "nvlink")
    assert nvlink.ok and nvlink.detail == "skipped: NotSupported on every GPU"


def test_a_spent_budget_skips_the_remaining_checks(tmp_path: Path) -> None:
    nvml = scenario()
    node(tmp_path, nvml)
    ticks = iter([0.0, 0.0, 1.0] + [100.0] * 40)
    v = run(p5_config(tmp_path), "sweep", "p5-1", binding=FakeNvml(nvml), now=NOW, clock=lambda: next(ticks))
    assert v.checks[0].ok and not v.checks[0].detail
    assert all(c.detail == "skipped: the sweep budget of 45 s was spent" for c in v.checks[2:])
    assert v.healthy


def test_a_cpu_node_runs_no_gpu_check(tmp_path: Path) -> None:
    node(tmp_path, scenario(), efa=0)
    cfg = p5_config(tmp_path, instance_type="m7i.xlarge", gpu_count=0, gpu_model="", efa_count=0, nvlink_links=0)
    v = run(cfg, "boot", "cpu-1", binding=None, now=NOW)  # binding None: NVML must not even be loaded
    assert v.healthy
    assert all(c.detail.startswith("skipped") for c in v.checks if c.name not in ("xid", "shared_fs"))


# --- forged XIDs: the sweep, prolog and boot modes judge the same evidence ------------------------------


@pytest.mark.parametrize("mode", ["sweep", "prolog", "boot"])
@pytest.mark.parametrize("log", ["kmsg", "journal"])
def test_a_log_full_of_forged_xids_passes_every_mode(tmp_path: Path, mode: str, log: str) -> None:
    """The crafted segfault report (with and without a newline in its file name) and a userspace /dev/kmsg
    record, each carrying "NVRM: Xid (PCI:0000:…): 79": no mode finds a fault, and the xid check says how
    many records it refused."""
    nvml = scenario()
    node(tmp_path, nvml)
    if log == "journal":
        (tmp_path / "kernel.log").write_text(journal_log())
    v = run(p5_config(tmp_path), mode, "p5-1", binding=FakeNvml(nvml), now=NOW, clock=lambda: 0.0)
    assert v.healthy, v.reason
    check = next(c for c in v.checks if c.name == "xid")
    assert check.value == [] and "refused" in check.detail


def test_a_genuine_xid_79_on_a_gpu_nvml_does_not_list_does_not_drain(tmp_path: Path) -> None:
    """The same record on this node's GPU asks for a replacement (xid-79-fallen-off-bus); on an address that
    is none of the node's GPUs it is reported as ignored and the sweep passes."""
    nvml = scenario()
    node(tmp_path, nvml)
    other = XID_MESSAGES[79].replace("0000:a8:00", "0000:e1:00")
    (tmp_path / "kernel.log").write_text(kernel_log() + kmsg_record(900, other))
    v = run(p5_config(tmp_path), "sweep", "p5-1", binding=FakeNvml(nvml), now=NOW, clock=lambda: 0.0)
    assert v.healthy, v.reason
    check = next(c for c in v.checks if c.name == "xid")
    assert check.value[0]["ignored"] == "not a GPU of this node"
