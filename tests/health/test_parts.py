"""The parts of the health program one at a time: XID lines and classes, EFA devices in sysfs and
through fi_info, /proc/mounts, the config schema, and the fake NVML against the real binding."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from gpucluster_agents.health import config as hc
from gpucluster_agents.health import host_checks, xid
from gpucluster_agents.health.fake_nvml import FakeNvml
from gpucluster_agents.health.verdict import Check, reason
from tests.health.fakes import XID_LINES, kernel_log, make_sysfs, p5_config

# --- XID -------------------------------------------------------------------------------------------------------


def test_every_real_xid_line_parses_with_its_gpu_and_class():
    events = xid.parse(kernel_log(*XID_LINES))
    assert [(e.xid, e.cls) for e in events] == [
        (13, "ignore"), (31, "ignore"), (48, "reboot"), (63, "reboot"), (64, "reboot"),
        (79, "replace"), (94, "reboot"), (95, "reboot"), (119, "replace"),
    ]  # fmt: skip
    assert events[5].pci == "0000:a8:00" and events[5].text.startswith("pid='<unknown>'")


def test_xid_lines_from_kmsg_and_journalctl_formats():
    kmsg = "4,1234,8812220145,-;NVRM: Xid (PCI:0000:53:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    journal = "Nov 25 10:00:01 ip-10-0-1-5 kernel: NVRM: Xid (PCI:0000:53:00): 48, pid=1, name=x, DBE"
    assert [e.xid for e in xid.parse(kmsg + "\n" + journal)] == [79, 48]
    assert xid.parse("NVRM: Xid looks like this but is not (PCI:zz): x") == []


def test_an_unknown_xid_is_reported_but_not_a_fault(tmp_path: Path):
    (tmp_path / "k.log").write_text("[1.0] NVRM: Xid (PCI:0000:53:00): 999, pid=1, something new\n")
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "k.log")))
    assert c.ok and c.value == [{"xid": 999, "pci": "0000:53:00", "class": "ignore", "count": 1}]


def test_repeated_xids_are_counted_not_listed(tmp_path: Path):
    (tmp_path / "k.log").write_text((XID_LINES[13] + "\n") * 5000)
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "k.log")))
    assert c.ok and c.value == [{"xid": 13, "pci": "0000:53:00", "class": "ignore", "count": 5000}]


def test_an_unreadable_kernel_log_skips_the_check(tmp_path: Path):
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "missing.log")))
    assert c.ok and c.detail.startswith("skipped: ") and "missing.log" in c.detail


def test_the_real_kernel_log_of_this_machine_is_read_without_error(tmp_path: Path):
    """No file configured: /dev/kmsg, journalctl or dmesg; whatever this machine allows, never a fault."""
    text, source = xid.kernel_log(p5_config(tmp_path, kernel_log_file=None), timeout=10)
    assert source in ("/dev/kmsg", "journalctl -k", "dmesg") or text is None
    assert xid.check_xid(p5_config(tmp_path, kernel_log_file=None)).ok


# --- EFA and the shared file system ---------------------------------------------------------------------------


def _fi_info(bin_dir: Path, devices: int, exit_code: int = 0) -> None:
    """A stand-in fi_info printing what libfabric's does for EFA: an rdm and a dgrm entry per device."""
    entries = "".join(
        f"provider: efa\n    fabric: efa\n    domain: rdmap{16 + i}s27-{kind}\n    version: 122.0\n    type: FI_EP_{kind.upper()}\n"
        for i in range(devices)
        for kind in ("rdm", "dgrm")
    )
    script = bin_dir / "fi_info"
    script.write_text(f"#!/bin/sh\n[ \"$1 $2\" = '-p efa' ] || exit 3\n/bin/cat <<'EOF'\n{entries}EOF\nexit {exit_code}\n")
    script.chmod(0o755)


@pytest.fixture
def path_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "bin"


def test_efa_counts_only_devices_bound_to_the_efa_driver(tmp_path: Path, path_bin: Path):
    make_sysfs(tmp_path / "sys", efa=32, other=2)
    assert len(host_checks.efa_devices(str(tmp_path / "sys"))) == 32
    c = host_checks.check_efa(p5_config(tmp_path))
    assert c.ok and c.value == {"sysfs": 32} and c.detail == "fi_info not installed: sysfs only"


def test_efa_missing_devices_in_sysfs_or_in_libfabric(tmp_path: Path, path_bin: Path):
    make_sysfs(tmp_path / "sys", efa=32)
    _fi_info(path_bin, 32)
    assert host_checks.check_efa(p5_config(tmp_path)).value == {"sysfs": 32, "fi_info": 32}
    _fi_info(path_bin, 31)
    c = host_checks.check_efa(p5_config(tmp_path))
    assert not c.ok and c.action == "reboot" and c.detail == "31 of 32 EFA devices in fi_info -p efa"
    _fi_info(path_bin, 0, exit_code=1)
    assert not host_checks.check_efa(p5_config(tmp_path)).ok
    c = host_checks.check_efa(p5_config(tmp_path, efa_count=33))
    assert not c.ok and c.detail == "32 of 33 EFA devices in sysfs"


def test_no_efa_expected_is_a_skip(tmp_path: Path):
    assert host_checks.check_efa(p5_config(tmp_path, efa_count=0)).detail.startswith("skipped")


@pytest.mark.parametrize(
    ("mounts", "ok", "detail"),
    [
        ("fs@tcp:/abc /fsx lustre rw 0 0\n", True, ""),
        ("fs@tcp:/abc /fsx/ lustre rw 0 0\n", False, "/fsx not mounted"),
        ("/dev/nvme1n1 /fsx ext4 rw 0 0\n", False, "/fsx is ext4, not lustre"),
        ("/dev/nvme1n1 /fsx ext4 rw 0 0\nfs@tcp:/abc /fsx lustre rw 0 0\n", True, ""),
        ("systemd-1 /fsx autofs rw 0 0\n", False, "/fsx is autofs, not lustre"),  # automount not triggered yet
    ],
)
def test_shared_fs_mount(tmp_path: Path, mounts: str, ok: bool, detail: str):
    (tmp_path / "mounts").write_text(mounts)
    c = host_checks.check_shared_fs(p5_config(tmp_path))
    assert (c.ok, c.detail) == (ok, detail)


def test_an_automount_not_yet_triggered_is_mounted_by_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """After a reboot fstab's x-systemd.automount leaves only autofs at /fsx until someone reads it: the check
    reads it once (here the kernel's answer is simulated: the listing adds the lustre mount) and passes;
    an automount that mounts nothing stays a fault (the parametrized case above)."""
    mounts = tmp_path / "mounts"
    mounts.write_text("systemd-1 /fsx autofs rw 0 0\n")
    touched: list[str] = []

    def listdir(path: str) -> list[str]:
        touched.append(path)
        with open(mounts, "a", encoding="utf-8") as fh:
            fh.write("fs@tcp:/abc /fsx lustre rw 0 0\n")
        return []

    monkeypatch.setattr(host_checks.os, "listdir", listdir)
    c = host_checks.check_shared_fs(p5_config(tmp_path))
    assert (c.ok, c.value, touched) == (True, "lustre fs@tcp:/abc", ["/fsx"])


def test_mount_points_with_escaped_blanks(tmp_path: Path):
    (tmp_path / "mounts").write_text("fs@tcp:/abc /data\\040set lustre rw 0 0\n")
    assert host_checks.check_shared_fs(p5_config(tmp_path, shared_fs_mount="/data set")).ok


# --- config ----------------------------------------------------------------------------------------------------


def test_config_round_trips_and_is_strict(tmp_path: Path):
    cfg = p5_config(tmp_path)
    assert hc.parse(json.loads(hc.to_json(cfg))) == cfg
    bad = {**hc.to_dict(cfg), "gpu_cout": 8, "efa_count": -1, "log_file": "relative.log", "min_fraction": 1.5}
    bad["modes"] = {"sweep": {"checks": ["gpu_count", "gpu_temp"]}, "nightly": {}}
    with pytest.raises(hc.HealthConfigError) as err:
        hc.parse(bad, "/etc/gpucluster/health.json")
    assert err.value.errors == [
        "gpu_cout: unknown key (allowed: " + ", ".join(sorted(hc.TOP_KEYS)) + ")",
        "efa_count: must be between 0 and 64, got -1",
        "min_fraction: must be a number in (0, 1], got 1.5",
        "log_file: must be an absolute path, got 'relative.log'",
        "modes.sweep.checks: unknown check 'gpu_temp' (known: " + ", ".join(hc.CHECKS) + ")",
        "modes.nightly: unknown mode (allowed: boot, prolog, sweep, deep)",
    ]
    assert str(err.value).startswith("/etc/gpucluster/health.json: gpu_cout")


def test_mode_checks_always_run_cheap_first():
    cfg = hc.parse({"instance_type": "p5.48xlarge", "gpu_count": 8, "modes": {"prolog": {"checks": ["xid", "gpu_count"]}}})
    assert cfg.mode("prolog").checks == ("gpu_count", "xid")
    assert cfg.mode("sweep") == hc.ModeConfig(*hc.DEFAULT_MODES["sweep"])


def test_budgets_stay_under_slurms_limits():
    """HealthCheckProgram is killed at 60 s; the prolog delays every job start."""
    assert hc.DEFAULT_MODES["sweep"][1] < 60
    assert hc.DEFAULT_MODES["prolog"][1] <= 10
    assert "hbm_copy" not in hc.DEFAULT_MODES["prolog"][0] and "dcgm_diag" not in hc.DEFAULT_MODES["sweep"][0]


def test_missing_config_file(tmp_path: Path):
    with pytest.raises(hc.HealthConfigError, match="file not found"):
        hc.load(str(tmp_path / "none.json"))


# --- verdict reason --------------------------------------------------------------------------------------------


def test_reason_is_one_short_printable_line():
    long = Check("xid", False, None, None, "replace", 'x "quoted"\n' * 100)
    text = reason([long, Check("efa", False, None, None, "reboot", "y")])
    # the worst action last, in parentheses: what the agent's repair pass reads (gpucluster_agents/quarantine.py)
    assert len(text) == 256 and text.startswith("gpucluster: xid x 'quoted' x") and text.endswith("... (+1 more) (replace)")
    assert "\n" not in text and '"' not in text


# --- the fake NVML is the real binding's shape -----------------------------------------------------------------


def test_fake_nvml_functions_and_constants_exist_in_nvidia_ml_py():
    pynvml = pytest.importorskip("pynvml")  # requirements-dev.txt pins nvidia-ml-py
    for name, fn in inspect.getmembers(FakeNvml, inspect.isfunction):
        if name.startswith("nvml"):
            real = getattr(pynvml, name)
            fake_params = list(inspect.signature(fn).parameters)[1:]
            assert len(inspect.signature(real).parameters) == len(fake_params), name
    for name in dir(FakeNvml):
        if name.startswith("NVML_"):
            assert getattr(pynvml, name) == getattr(FakeNvml, name), name
    assert pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown == 0x80 and pynvml.nvmlClocksEventReasonSwPowerCap == 0x4


# --- what runs on the node -------------------------------------------------------------------------------------

HEALTH_DIR = Path(hc.__file__).parent


@pytest.mark.parametrize("path", sorted(HEALTH_DIR.glob("*.py")), ids=lambda p: p.name)
def test_health_modules_are_python_3_9_stdlib_and_load_nvml_lazily(path: Path):
    """GPU images carry a system Python (3.9 on Amazon Linux 2023) without boto3 or PyTorch: the program
    needs the standard library, and nvidia-ml-py only inside the function that reads NVML."""
    import ast
    import sys

    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    if path.name != "__init__.py":  # annotations stay strings: `float | None` is never evaluated on 3.9
        assert "from __future__ import annotations" in source
    for node in tree.body:  # module level: what importing the package needs
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        for name in names:
            assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, f"{path.name} imports {name}"
    lazy = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} - {
        a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names
    }
    assert lazy <= {"pynvml"}, lazy


def test_a_pcie_card_idling_at_a_lower_generation_is_not_a_fault(tmp_path: Path):
    """L4/L40S/A10G drop the link generation while idle; the width, and the generation under load, still count."""
    from gpucluster_agents.health.gpu_checks import check_pcie_link
    from gpucluster_agents.health.nvml import snapshot
    from tests.health.fakes import scenario

    cfg = p5_config(tmp_path, gpu_model="L40S", pcie_generation=4, pcie_idle_downshift=True)

    def judge(**readings: object) -> Check:
        nvml = scenario(gpu={**scenario()["gpu"], "pcie_max_gen": 4, **readings})
        return check_pcie_link(cfg, snapshot(FakeNvml(nvml)))

    idle = judge(pcie_gen=1, clock_events=0x1)
    assert idle.ok and idle.value["gpu0"] == "gen1 x16 (idle)"
    busy = judge(pcie_gen=1, clock_events=0x4)
    assert not busy.ok and busy.detail.startswith("gpu0 gen1 x16 < gen4 x16")
    narrow = judge(pcie_gen=1, pcie_width=8, clock_events=0x1)
    assert not narrow.ok and narrow.detail.startswith("gpu0 gen1 x8 (idle) < gen1 x16")
    # an SXM module (no downshift) idling at gen3 is a fault
    assert not check_pcie_link(p5_config(tmp_path), snapshot(FakeNvml(scenario({0: {"pcie_gen": 3}})))).ok


# --- deep: DCGM, nccl-tests and the CUDA benchmarks when their tools are absent ----------------------------------


def _tool(bin_dir: Path, name: str, out: str, code: int = 0) -> None:
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\n/bin/cat <<'EOF'\n{out}EOF\nexit {code}\n")
    script.chmod(0o755)


DCGM_PASS = "| Diagnostic                | Result                                         |\n| Memory                    | Pass                                           |\n"
DCGM_FAIL = DCGM_PASS + "| Memory Bandwidth          | Fail - GPU 3                                   |\n"
NCCL_OUT = "#  Out of bounds values : 0 OK\n# Avg bus bandwidth    : 312.5 \n#\n"


def test_dcgm_diag_passes_fails_and_skips_when_absent(tmp_path: Path, path_bin: Path):
    from gpucluster_agents.health.deep_checks import check_dcgm_diag

    cfg = p5_config(tmp_path)
    assert check_dcgm_diag(cfg, 10).detail == "skipped: dcgmi not installed"
    _tool(path_bin, "dcgmi", DCGM_PASS)
    assert check_dcgm_diag(cfg, 10).ok
    _tool(path_bin, "dcgmi", DCGM_FAIL, code=226)
    c = check_dcgm_diag(cfg, 10)
    assert (c.ok, c.action, c.detail) == (False, "replace", "Memory Bandwidth Fail - GPU 3")


def test_nccl_all_reduce_against_the_fleet_floor(tmp_path: Path, path_bin: Path):
    from gpucluster_agents.health.deep_checks import check_nccl_pair

    assert check_nccl_pair(p5_config(tmp_path), 10).detail.startswith("skipped: all_reduce_perf")
    _tool(path_bin, "all_reduce_perf", NCCL_OUT)
    report = check_nccl_pair(p5_config(tmp_path), 10)
    assert report.ok and report.value == 312.5 and report.threshold == "report only"
    low = check_nccl_pair(p5_config(tmp_path, nccl_busbw_gbps=400.0), 10)
    assert not low.ok and low.detail == "bus bandwidth 312.5 < 400 GB/s"
    _tool(path_bin, "all_reduce_perf", "NCCL failure common.cu:1000 'unhandled system error'\n", code=1)
    assert check_nccl_pair(p5_config(tmp_path), 10).detail == "all_reduce_perf failed"


@pytest.mark.skipif(bool(__import__("ctypes.util").util.find_library("cuda")), reason="this machine has libcuda")
def test_benchmarks_skip_without_libcuda(tmp_path: Path):
    from gpucluster_agents.health.deep_checks import check_gemm, check_hbm_copy

    hbm = check_hbm_copy(p5_config(tmp_path), None)
    assert hbm.ok and hbm.detail == "skipped: libcuda.so.1 not found" and hbm.threshold == ">= 2718.0 GB/s (90% of 3020)"
    assert check_gemm(p5_config(tmp_path), None).detail == "skipped: libcuda.so.1 not found"
    assert check_hbm_copy(p5_config(tmp_path, hbm_copy_gbps=None), None).detail == "skipped: no baseline for this instance type"
