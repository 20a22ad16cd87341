"""A fake node for the health program: NVML scenarios seeded from a real H100's readings (FACTS.md),
altered one fault at a time; a sysfs tree with EFA devices; kernel log text with real XID lines; a
/proc/mounts; and the config that points the program at them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpucluster_agents.health.config import HealthConfig
from gpucluster_agents.health.fake_nvml import H100_HEALTHY

# Kernel log lines as the NVIDIA driver writes them (dmesg format); the PCI addresses are p5's.
KERNEL_LOG_BASE = """\
[    0.000000] Linux version 6.8.0-1021-aws (buildd@lcy02-amd64-051) #23-Ubuntu SMP
[   12.345678] nvidia: loading out-of-tree module taints kernel.
[   13.001122] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04
[   14.500000] efa 0000:10:00.0: Setup irq:0x5 name:efa-mgmnt@pci:0000:10:00.0
"""
XID_LINES = {
    13: "[ 8812.220145] NVRM: Xid (PCI:0000:53:00): 13, pid=48211, name=python, Graphics Exception: ESR 0x514648=0x1000000b",
    31: "[ 9001.004411] NVRM: Xid (PCI:0000:64:00): 31, pid=51234, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    48: "[10023.118002] NVRM: Xid (PCI:0000:75:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
    63: "[10023.201990] NVRM: Xid (PCI:0000:75:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000000001f3a00) was marked for remapping, reset gpu to activate",
    64: "[10023.202010] NVRM: Xid (PCI:0000:75:00): 64, pid='<unknown>', name=<unknown>, Row Remapper Error: (0x00000000001f3a00) - All reserved rows for bank are remapped",
    79: "[12007.553100] NVRM: Xid (PCI:0000:a8:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    94: "[13001.000100] NVRM: Xid (PCI:0000:b9:00): 94, pid=60001, name=python, Contained: SM (0x1). RST: No, D-RST: No",
    95: "[13002.000200] NVRM: Xid (PCI:0000:b9:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "[14000.777000] NVRM: Xid (PCI:0000:ca:00): 119, pid=1999, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
}


def kernel_log(*xids: int) -> str:
    return KERNEL_LOG_BASE + "".join(XID_LINES[x] + "\n" for x in xids)


def scenario(per_gpu: dict[int, dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """Eight healthy H100s as a real one reads, with ``per_gpu`` readings replaced and top-level keys set."""
    doc: dict[str, Any] = {
        "driver_version": "580.159.04",
        "gpu_count": 8,
        "gpu": copy.deepcopy(H100_HEALTHY),
        "per_gpu": {str(i): {"pci_bus_id": f"00000000:{0x53 + 0x11 * i:02x}:00.0"} for i in range(8)},
        "bench": {"hbm_copy_gbps": 3015.0, "gemm_tflops": 760.0},
    }
    for i, readings in (per_gpu or {}).items():
        doc["per_gpu"][str(i)].update(readings)
    doc.update(top)
    return doc


def make_sysfs(root: Path, efa: int, other: int = 0) -> Path:
    """``root/class/infiniband/<dev>/device/driver`` links to a driver directory named efa (or mlx5_core)."""
    for name in ("efa", "mlx5_core"):
        (root / "bus" / "pci" / "drivers" / name).mkdir(parents=True, exist_ok=True)
    for i in range(efa + other):
        driver = "efa" if i < efa else "mlx5_core"
        dev = root / "class" / "infiniband" / (f"rdmap{16 + i}s27" if i < efa else f"mlx5_{i}") / "device"
        dev.mkdir(parents=True)
        (dev / "driver").symlink_to(root / "bus" / "pci" / "drivers" / driver)
    return root


MOUNTS_LUSTRE = (
    "/dev/root / ext4 rw,relatime,discard 0 0\n"
    "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
    "10.0.1.23@tcp:/185de874 /fsx lustre rw,noatime,flock,lazystatfs 0 0\n"
)
MOUNTS_NONE = "/dev/root / ext4 rw,relatime,discard 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"


def p5_config(tmp: Path, **changes: Any) -> HealthConfig:
    """p5.48xlarge's rendered thresholds, pointed at the fakes under ``tmp`` (write them with :func:`node`)."""
    base = {
        "instance_type": "p5.48xlarge",
        "gpu_count": 8,
        "gpu_model": "H100",
        "pcie_generation": 5,
        "pcie_width": 16,
        "nvlink_links": 18,
        "efa_count": 32,
        "hbm_copy_gbps": 3020.0,
        "gemm_tflops": 748.0,
        "shared_fs_mount": "/fsx",
        "log_file": str(tmp / "health.jsonl"),
        "slurm_bin_dir": str(tmp / "bin"),
        "sysfs_root": str(tmp / "sys"),
        "mounts_file": str(tmp / "mounts"),
        "kernel_log_file": str(tmp / "kernel.log"),
    }
    base.update(changes)
    return HealthConfig(**base)


def node(tmp: Path, nvml: dict[str, Any], xids: tuple[int, ...] = (), efa: int = 32, mounts: str = MOUNTS_LUSTRE) -> Path:
    """Write a fake node under ``tmp``; returns the scenario file (for $GPUCLUSTER_HEALTH_FAKE_NVML)."""
    make_sysfs(tmp / "sys", efa)
    (tmp / "mounts").write_text(mounts)
    (tmp / "kernel.log").write_text(kernel_log(*xids))
    path = tmp / "scenario.json"
    path.write_text(json.dumps(nvml, indent=1))
    return path
