"""A fake node for the health program: NVML scenarios seeded from a real H100's readings (FACTS.md),
altered one fault at a time; a sysfs tree with EFA devices; a kernel log in /dev/kmsg's format with the
driver's XID records and the forgeries any user can add; a /proc/mounts; and the config that points the
program at them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpucluster_agents.contract.health import HealthConfig
from gpucluster_agents.health.fake_nvml import H100_HEALTHY
from tests.conftest import ROOT

# --- the kernel log -----------------------------------------------------------------------------------------------
# Fixtures in the formats the program reads: /dev/kmsg records ("<prio>,<seq>,<usec>,<flags>;<message>", prio =
# facility * 8 + level, facility 0 = kern; dictionary lines start with a space) and `journalctl -o json` lines.
# The dmesg text form is here only to show the program refuses it. PCI addresses are p5's GPUs (scenario()).

# The driver's XID messages (NVIDIA's own wording), by XID.
XID_MESSAGES = {
    13: "NVRM: Xid (PCI:0000:53:00): 13, pid=48211, name=python, Graphics Exception: ESR 0x514648=0x1000000b",
    31: "NVRM: Xid (PCI:0000:64:00): 31, pid=51234, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    48: "NVRM: Xid (PCI:0000:75:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
    63: "NVRM: Xid (PCI:0000:75:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000000001f3a00) was marked for remapping, reset gpu to activate",
    64: "NVRM: Xid (PCI:0000:75:00): 64, pid='<unknown>', name=<unknown>, Row Remapper Error: (0x00000000001f3a00) - All reserved rows for bank are remapped",
    79: "NVRM: Xid (PCI:0000:a8:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    94: "NVRM: Xid (PCI:0000:b9:00): 94, pid=60001, name=python, Contained: SM (0x1). RST: No, D-RST: No",
    95: "NVRM: Xid (PCI:0000:b9:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "NVRM: Xid (PCI:0000:ca:00): 119, pid=1999, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
}

# The crafted file (docs/health.md, "XID evidence"): any user compiles `int main(){*(int*)0=1;}` under this name and runs it.
FORGED_FILE = "NVRM: Xid (PCI:0000:53:00): 79, pwned"


def kernel_escape(text: str) -> str:
    """How /dev/kmsg prints a message: bytes below 0x20 (a newline too), 0x7f and up, and the backslash as \\xNN."""
    return "".join(f"\\x{b:02x}" if b < 0x20 or b >= 0x7F or b == 0x5C else chr(b) for b in text.encode())


def segfault_message(file_name: str, pid: int = 4711) -> str:
    """A segfault report exactly as the kernel composes it (arch/x86/mm/fault.c show_signal_msg and
    print_vma_addr; checked against a real 6.18 kernel with a harmless file name): the task's name (the
    file's first 15 characters, TASK_COMM_LEN - 1), its pid, the fault, then the mapping's file name whole."""
    comm = file_name[:15]
    return (
        f"{comm}[{pid}]: segfault at 0 ip 000055d60c018132 sp 00007ffcc0c22ae0 error 6 in "
        f"{file_name}[1132,55d60c018000+1000] likely on CPU 3 (core 3, socket 0)"
    )


# What the kernel log of a node holds besides XIDs: boot lines, a device record with its dictionary, and
# three forgeries any user can make. (message, facility, level); facility 1 = user.
BASE_RECORDS: list[tuple[str, int, int]] = [
    ("Linux version 6.8.0-1021-aws (buildd@lcy02-amd64-051) #23-Ubuntu SMP", 0, 5),
    ("nvidia: loading out-of-tree module taints kernel.", 0, 4),
    ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04", 0, 6),
    ("efa 0000:10:00.0: Setup irq:0x5 name:efa-mgmnt@pci:0000:10:00.0", 0, 6),
    # 1. the crafted program's segfault report: a kernel record whose message starts with "NVRM: Xid (PCI:"
    (segfault_message(FORGED_FILE), 0, 6),
    # 2. the same with a newline in the file name (dmesg would print the rest as a line of its own)
    (segfault_message("x\n" + FORGED_FILE, 4712), 0, 6),
    # 3. root's `echo '<3>NVRM: Xid …' > /dev/kmsg`: the kernel stores it with facility user (1), whatever was asked
    ("NVRM: Xid (PCI:0000:a8:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", 1, 3),
]
FORGED_RECORDS = 3  # of BASE_RECORDS: each carries XID text and must be refused


def kmsg_record(seq: int, message: str, facility: int = 0, level: int = 4, dictionary: tuple[str, ...] = ()) -> str:
    usec = 8_000_000_000 + seq * 1_000
    return f"{facility * 8 + level},{seq},{usec},-;{kernel_escape(message)}\n" + "".join(f" {d}\n" for d in dictionary)


def kernel_log(*xids: int) -> str:
    """/dev/kmsg records: the base (forgeries included), then the driver's records of ``xids``."""
    out = [kmsg_record(i, m, f, lvl) for i, (m, f, lvl) in enumerate(BASE_RECORDS)]
    out[3] = kmsg_record(3, BASE_RECORDS[3][0], 0, 6, ("SUBSYSTEM=pci", "DEVICE=+pci:0000:10:00.0"))
    out += [kmsg_record(100 + i, XID_MESSAGES[x]) for i, x in enumerate(xids)]
    return "".join(out)


def journal_entry(message: str, transport: str = "kernel", facility: int | None = 0, identifier: str = "kernel") -> str:
    """One `journalctl -o json` line. journald 240+ writes SYSLOG_FACILITY for kernel records; older ones
    (facility=None here) only for records that came from userspace."""
    doc = {"_TRANSPORT": transport, "SYSLOG_IDENTIFIER": identifier, "PRIORITY": "4", "MESSAGE": message, "_BOOT_ID": "b0"}
    if facility is not None:
        doc["SYSLOG_FACILITY"] = str(facility)
    return json.dumps(doc) + "\n"


def journal_log(*xids: int, old_journald: bool = False) -> str:
    """`journalctl -k -b -o json`: the base records as journald stores them, plus a `logger -t kernel` line."""
    out = []
    for message, facility, _ in BASE_RECORDS:
        kernel = facility == 0
        out.append(
            journal_entry(
                message, facility=None if kernel and old_journald else facility, identifier="kernel" if kernel else "root"
            )
        )
    out.append(journal_entry(XID_MESSAGES[79], transport="syslog", facility=1))  # logger -t kernel 'NVRM: Xid …'
    out += [journal_entry(XID_MESSAGES[x], facility=None if old_journald else 0) for x in xids]
    return "".join(out)


def dmesg_text(*xids: int) -> str:
    """What plain `dmesg` prints: no facility, and a newline inside a record un-escaped onto a line of its own."""
    lines = []
    for i, (message, _, _) in enumerate([*BASE_RECORDS, *((XID_MESSAGES[x], 0, 4) for x in xids)]):
        first, *rest = message.split("\n")
        lines.append(f"[{8000 + i:5d}.000000] {first}")
        lines += ["               " + r for r in rest]
    return "\n".join(lines) + "\n"


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
    """Write a fake node under ``tmp``; returns the scenario file (for --fake-nvml)."""
    make_sysfs(tmp / "sys", efa)
    (tmp / "mounts").write_text(mounts)
    (tmp / "kernel.log").write_text(kernel_log(*xids))
    path = tmp / "scenario.json"
    path.write_text(json.dumps(nvml, indent=1))
    return path


def agent_lib(lib: Path, scenario_file: Path | None = None) -> Path:
    """What install-agent unpacks into a node's agent directory: the package (this checkout's, linked) and,
    for a fake GPU node, a ``pynvml`` module answering from ``scenario_file``: the program imports NVIDIA's
    binding by that name, so the readings reach a program started exactly as root starts it (isolated, no
    option of its own) without any switch in the program."""
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "gpucluster_agents").symlink_to(ROOT / "gpucluster_agents")
    if scenario_file is not None:
        (lib / "pynvml.py").write_text(
            "import sys\n"
            "from gpucluster_agents.health.fake_nvml import FakeNvml\n"
            f"sys.modules[__name__] = FakeNvml.from_file({str(scenario_file)!r})\n"
        )
    return lib


def planted(where: Path, marker: Path) -> Path:
    """An attacker's ``gpucluster_agents`` package (and ``sitecustomize``) in ``where``: importing either
    writes ``marker``. slurmd's working directory (/var/log/slurm) is the slurm user's."""
    code = f"open({str(marker)!r}, 'a').write(__name__ + ' imported\\n')\n"
    (where / "gpucluster_agents" / "health").mkdir(parents=True)
    for f in ("gpucluster_agents/__init__.py", "gpucluster_agents/health/__init__.py", "sitecustomize.py"):
        (where / f).write_text(code)
    (where / "gpucluster_agents" / "health" / "__main__.py").write_text(code)
    (where / "gpucluster_agents" / "health" / "cli.py").write_text(code + "def main():\n    return 0\n")
    return where
