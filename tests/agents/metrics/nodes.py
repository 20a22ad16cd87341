"""Fake nodes for the metrics exporter: the fake-NVML scenarios (healthy, throttling, a pending row remap,
an XID, and all three at once), an EFA sysfs tree with a p5's hw_counters, a Lustre client's llite stats,
Slurm's sinfo/squeue and the agent's state files — each in the format the real source writes.

Other tests (the end-to-end Prometheus test) start the exporter on one of these with :func:`exporter_args`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tests.agents.health.fakes import kernel_log, make_sysfs, scenario

# NVML's clocks event reasons (nvml.h nvmlClocksEventReason*)
GPU_IDLE, SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x1, 0x4, 0x8, 0x20, 0x40, 0x80
SECOND_NS = 1_000_000_000

# GPU 3 runs hot and is slowed by the thermal limits, GPU 4 by the power brake; both counters keep rising.
THROTTLING: dict[int, dict[str, Any]] = {
    3: {
        "temperature": 89,
        "clock_events": HW_SLOWDOWN | SW_THERMAL | HW_THERMAL,
        "clock_sm": 1410,
        "utilization": [100, 62],
        "power_mw": 650_250,
        "violation_thermal_ns": 4 * SECOND_NS,
        "grow": {"violation_thermal_ns": 2 * SECOND_NS},
    },
    4: {
        "clock_events": SW_POWER_CAP | HW_POWER_BRAKE,
        "clock_sm": 1095,
        "utilization": [100, 58],
        "power_mw": 700_000,
        "violation_power_ns": 3 * SECOND_NS,
        "grow": {"violation_power_ns": 2 * SECOND_NS},
    },
}
# GPU 2: an uncorrectable error remapped a row; the remap waits for the next GPU reset.
ROW_REMAP: dict[int, dict[str, Any]] = {
    2: {"remapped_rows": [0, 1, 1, 0], "ecc_uncorrected_volatile": 1, "ecc": {"0,0": 12, "0,1": 40, "1,1": 1}},
}
XID_GPU, XID = 5, 79  # 0000:a8:00 fell off the bus; the kernel log also holds forged XID 79 text naming GPU 0

SCENARIOS: dict[str, tuple[dict[int, dict[str, Any]], tuple[int, ...]]] = {
    "healthy": ({}, ()),
    "throttling": (THROTTLING, ()),
    "row_remap": (ROW_REMAP, ()),
    "xid": ({}, (XID,)),
    "faulty": ({**THROTTLING, **ROW_REMAP}, (XID,)),
}

# A p5.48xlarge EFA device's hw_counters (efa driver 2.x; names as the driver publishes them).
EFA_COUNTERS = (
    "alloc_pd_err alloc_ucontext_err cmds_err completed_cmds create_ah_err create_cq_err create_qp_err "
    "impaired_remote_conn_events keep_alive_rcvd lifespan mmap_err no_completion_cmds rdma_read_bytes "
    "rdma_read_resp_bytes rdma_read_wr_err rdma_read_wrs rdma_write_bytes rdma_write_recv_bytes "
    "rdma_write_wr_err rdma_write_wrs recv_bytes recv_wrs reg_mr_err retrans_bytes retrans_pkts "
    "retrans_timeout_events rx_bytes rx_drops rx_pkts send_bytes send_wrs submitted_cmds tx_bytes tx_pkts "
    "unresponsive_remote_events"
).split()

# A Lustre 2.15 client's llite stats (FSx for Lustre): op, count, "samples", [unit], min, max, sum[, sumsq].
LLITE_STATS = """snapshot_time             1764190000.123456789 secs.nsecs
start_time                1764100000.000000000 secs.nsecs
elapsed_time              90000.123456789 secs.nsecs
read_bytes                20480 samples [bytes] 4096 4194304 68719476736 230584300921369395
write_bytes               5120 samples [bytes] 4096 4194304 10737418240 22517998136852480
read                      20480 samples [usecs] 3 91234 81920000 1677721600000
write                     5120 samples [usecs] 5 45000 30720000 368640000000
ioctl                     64 samples [reqs]
open                      1200 samples [usecs] 11 4210 96000 13000000
close                     1200 samples [usecs] 4 800 24000 900000
seek                      800 samples [usecs] 0 2 400 600
fsync                     12 samples [usecs] 900 21000 60000 600000000
readdir                   40 samples [usecs] 20 3000 12000 50000000
getattr                   9000 samples [usecs] 2 900 45000 8000000
statfs                    30 samples [usecs] 50 400 3000 400000
inode_permission          15000 samples [usecs] 0 5 15000 30000
opencount                 1200 samples [reqs] 1 3 1300 1500
"""

SINFO = """p5-1|allocated|none
p5-2|mixed|none
p5-3|idle~|none
p5-4|idle~|none
p5-5|drained|gpucluster: xid XID 79 GPU has fallen off the bus on PCI:0000:a8:00 (replace)
p5-6|draining|gpucluster: gpu_temperature 91 C > 85 C (reboot)
p5-7|down*|Not responding
p5-8|drained|maintenance by alice: "swap" \\ PSU
p5-1|allocated|none
"""
# sinfo -h -N -O NodeHost:|,GresUsed:| as Debian's Slurm 22.05 prints it (checked against a real slurmctld and
# slurmd with Gres=gpu:h100:4 and a job holding 3: "gpu-1|gpu:h100:3(IDX:0-2)|"): p5-1 twice (two partitions),
# p5-2 shares its GPUs between jobs (an index list with a comma), the login node has no GRES at all.
SINFO_GRES = """p5-1|gpu:h100:8(IDX:0-7)|
p5-2|gpu:h100:3(IDX:0,2-3)|
p5-3|gpu:h100:0|
p5-4|gpu:h100:0(IDX:N/A)|
p5-5|gpu:h100:0(IDX:N/A)|
p5-6|gpu:h100:2(IDX:0-1),gpu:a10g:1(IDX:2)|
login-1|(null)|
bad name|gpu:h100:8(IDX:0-7)|
p5-1|gpu:h100:8(IDX:0-7)|
"""
SQUEUE = """RUNNING|None
RUNNING|None
PENDING|Resources
PENDING|Priority
PENDING|Priority
PENDING|ReqNodeNotAvail, UnavailableNodes:p5-[5-8]
COMPLETING|None
"""


def write_scenario(tmp: Path, name: str) -> tuple[Path, Path]:
    """(scenario file for --fake-nvml, kernel log for --kernel-log) of a named scenario."""
    per_gpu, xids = SCENARIOS[name]
    tmp.mkdir(parents=True, exist_ok=True)
    nvml, klog = tmp / f"nvml-{name}.json", tmp / f"kernel-{name}.log"
    nvml.write_text(json.dumps(scenario(per_gpu), indent=1))
    klog.write_text(kernel_log(*xids))
    return nvml, klog


def write_sysfs(root: Path, efa: int = 32, gpus: int = 8) -> Path:
    """EFA devices with hw_counters, and the node's NVIDIA GPUs in the PCI device list."""
    make_sysfs(root, efa)
    for i, dev in enumerate(sorted((root / "class" / "infiniband").iterdir())):
        hw = dev / "ports" / "1" / "hw_counters"
        hw.mkdir(parents=True)
        for j, counter in enumerate(EFA_COUNTERS):
            value = 10 if counter == "lifespan" else (i + 1) * 1000 + j
            (hw / counter).write_text(f"{value}\n")
    for i in range(gpus):
        pci = root / "bus" / "pci" / "devices" / f"0000:{0x53 + 0x11 * i:02x}:00.0"
        pci.mkdir(parents=True)
        (pci / "vendor").write_text("0x10de\n")
        (pci / "class").write_text("0x030200\n")
    return root


def write_lustre(root: Path, fsname: str = "185de874") -> Path:
    stats = root / f"{fsname}-ffff9a1b2c3d4000" / "stats"
    stats.parent.mkdir(parents=True)
    stats.write_text(LLITE_STATS)
    return root


def write_slurm(bin_dir: Path, sinfo: str = SINFO, squeue: str = SQUEUE, gres: str = SINFO_GRES) -> Path:
    """sinfo and squeue that print fixed output (what Slurm prints for the arguments the exporter passes): sinfo
    asked for ``GresUsed`` prints ``gres`` (its arguments in ``sinfo-gres.args``), else ``sinfo``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "sinfo-gres.out").write_text(gres)
    for name, text in (("sinfo", sinfo), ("squeue", squeue)):
        (bin_dir / f"{name}.out").write_text(text)
        script = bin_dir / name
        gres_case = (
            f'case "$*" in *GresUsed*) echo "$@" > "{bin_dir}/sinfo-gres.args"; exec cat "{bin_dir}/sinfo-gres.out";; esac\n'
            if name == "sinfo"
            else ""
        )
        script.write_text(f'#!/bin/sh\n{gres_case}echo "$@" > "{bin_dir}/{name}.args"\nexec cat "{bin_dir}/{name}.out"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def write_agent_state(state: Path) -> Path:
    (state / "journal").mkdir(parents=True)
    (state / "journal" / "t1.json").write_text(json.dumps({"token": "t1", "group": "p5", "nodes": ["p5-3"]}))
    (state / "journal" / "t2.json").write_text(json.dumps({"token": "t2", "group": "p5", "nodes": ["p5-4"]}))
    holds = {
        "groups": {"p5": {"code": "InsufficientInstanceCapacity", "seconds": 600}, "g6": {"code": "ProtectedMode"}},
        "nodes": {"p5-9": {"code": "InvalidParameterValue"}, "p5-10": {"code": "InsufficientInstanceCapacity"}},
    }
    (state / "holds.json").write_text(json.dumps(holds))
    (state / "protect.json").write_text(
        json.dumps({"g6": {"failures": 12, "protected_since": 1764190000.0}, "p5": {"failures": 1, "protected_since": None}})
    )
    book = {
        "active": {"p5-5": {"action": "replace", "phase": "draining"}, "p5-6": {"action": "reboot", "phase": "rebooting"}},
        "history": [{"action": "reboot", "outcome": "healthy"}] * 3 + [{"action": "replace", "outcome": "replaced"}],
    }
    (state / "quarantine.json").write_text(json.dumps(book))
    (state / "brake.json").write_text(json.dumps({"tripped": {"g6": {"since": 1.0, "drained": 3, "of": 8}}, "released": {}}))
    return state


def exporter_args(tmp: Path, name: str, head: bool = False, efa: int = 4) -> list[str]:
    """The exporter's arguments for a fake GPU node in scenario ``name`` (files under ``tmp``, shared by the
    scenarios: the first call writes the sysfs tree with ``efa`` devices); ``head`` adds the head node's
    Slurm and agent sources."""
    nvml, klog = write_scenario(tmp, name)
    if not (tmp / "sys").exists():
        write_sysfs(tmp / "sys", efa=efa)
        write_lustre(tmp / "llite")
    args = ["--fake-nvml", str(nvml), "--kernel-log", str(klog), "--sysfs-root", str(tmp / "sys")]
    args += ["--lustre-root", str(tmp / "llite"), "--hostname", f"{name}-node"]
    if head:
        if not (tmp / "state").exists():
            write_slurm(tmp / "bin")
            write_agent_state(tmp / "state")
        args += ["--slurm-bin-dir", str(tmp / "bin"), "--agent-state", str(tmp / "state")]
    return args


def env() -> dict[str, str]:
    """The environment a subprocess exporter needs: this checkout's package importable."""
    from tests.conftest import ROOT

    return {**os.environ, "PYTHONPATH": str(ROOT)}
