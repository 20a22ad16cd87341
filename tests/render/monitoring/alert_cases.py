"""Input series that make each alert fire, and near misses that must not: the fixtures of the rules' unit test.

Each case becomes one ``promtool test rules`` test group (its own series, sampled every minute). ``fires``
lists the alerts expected at ``at``, each as (labels beside severity/cluster, summary); an empty list is a case
where the alert must stay quiet. Series names are the ones the rules read (DCGM names; gpucluster's head-node
exporter; the node exporter).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    alert: str
    series: dict[str, str]
    at: str
    fires: list[tuple[dict[str, str], str]] = field(default_factory=list)


G0 = 'gpu="0",UUID="GPU-0",Hostname="n1"'
L0 = {"gpu": "0", "UUID": "GPU-0", "Hostname": "n1"}
HEAD = 'role="head",instance="head:9100"'
HEAD_L = {"role": "head", "instance": "head:9100"}


def _node_gpus(node: str, allocated: int, utils: list[str]) -> dict[str, str]:
    """A Slurm GPU node as the head node's collector sees it: the head exporter's allocated-GPU gauge for
    ``node`` and one utilisation series per GPU (values ``utils``), each carrying the ``node`` target label."""
    series = {f'gpucluster_slurm_node_gpus_allocated{{node="{node}",{HEAD}}}': f"{allocated}x40"}
    for i, values in enumerate(utils):
        series[f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="GPU-{node}-{i}",Hostname="ip-{node}",node="{node}"}}'] = values
    return series


CASES: list[Case] = [
    Case(
        "GpuTemperatureHigh",
        {f"DCGM_FI_DEV_GPU_TEMP{{{G0}}}": "82x10"},
        "7m",
        [(L0, "GPU 0 on n1 at 82 C (over 80 C for 5 min)")],
    ),
    Case("GpuTemperatureHigh", {f"DCGM_FI_DEV_GPU_TEMP{{{G0}}}": "82 82 82 70x10"}, "7m"),  # hot 3 min only
    Case("GpuTemperatureCritical", {f"DCGM_FI_DEV_GPU_TEMP{{{G0}}}": "90x10"}, "5m", [(L0, "GPU 0 on n1 at 90 C (over 85 C)")]),
    Case("GpuTemperatureCritical", {f"DCGM_FI_DEV_GPU_TEMP{{{G0}}}": "84x10"}, "5m"),
    Case(
        "GpuThermalThrottling",
        {f"DCGM_FI_DEV_THERMAL_VIOLATION{{{G0}}}": "0 0 0 0 1000 2000 3000"},
        "6m",
        [(L0, "GPU 0 on n1 was slowed down for temperature in the last 5 min")],
    ),
    Case("GpuThermalThrottling", {f"DCGM_FI_DEV_THERMAL_VIOLATION{{{G0}}}": "5000x10"}, "6m"),  # old, not rising
    # 40 s of every minute power-capped (the counter is in ns), then 20 s
    Case(
        "GpuPowerThrottling",
        {f"DCGM_FI_DEV_POWER_VIOLATION{{{G0}}}": "0+40000000000x40"},
        "35m",
        [(L0, "GPU 0 on n1 was power-capped more than 50% of the last 15 min")],
    ),
    Case("GpuPowerThrottling", {f"DCGM_FI_DEV_POWER_VIOLATION{{{G0}}}": "0+20000000000x40"}, "35m"),
    Case(
        "GpuHardwareSlowdown",
        {f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{G0}}}": "129x10"},
        "4m",  # power brake + idle
        [(L0, "GPU 0 on n1 reports a hardware slowdown (clock-event reasons 129)")],
    ),
    Case("GpuHardwareSlowdown", {f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{G0}}}": "36x10"}, "4m"),  # SW thermal + SW power cap
    Case(
        "GpuUncorrectableEccErrors",
        {f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{G0}}}": "0 0 2 2 2"},
        "3m",
        [(L0, "GPU 0 on n1 had 2 uncorrected ECC errors since its last reset")],
    ),
    Case("GpuUncorrectableEccErrors", {f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{G0}}}": "0x5"}, "3m"),
    Case(
        "GpuRowRemapPending",
        {f"DCGM_FI_DEV_ROW_REMAP_PENDING{{{G0}}}": "0 1 1 1"},
        "2m",
        [(L0, "GPU 0 on n1 has a row remap waiting for a GPU reset")],
    ),
    Case("GpuRowRemapPending", {f"DCGM_FI_DEV_ROW_REMAP_PENDING{{{G0}}}": "0x5"}, "2m"),
    Case(
        "GpuRowRemapFailed",
        {f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{G0}}}": "1x5"},
        "2m",
        [(L0, "GPU 0 on n1 could not remap a row: no spare rows left")],
    ),
    Case("GpuRowRemapFailed", {f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{G0}}}": "0x5"}, "2m"),
    Case(
        "GpuXidReplace",
        {f"DCGM_FI_DEV_XID_ERRORS{{{G0}}}": "79x5"},
        "2m",
        [(L0, "GPU 0 on n1 reported XID 79 (replace class: fallen off the bus, NVLink, GSP, unrecovered ECC)")],
    ),
    Case("GpuXidReplace", {f"DCGM_FI_DEV_XID_ERRORS{{{G0}}}": "48x5"}, "2m"),  # reboot class
    Case("GpuXidReplace", {f"DCGM_FI_DEV_XID_ERRORS{{{G0}}}": "13x5"}, "2m"),  # the application's fault
    Case(
        "GpuXidReboot",
        {f"DCGM_FI_DEV_XID_ERRORS{{{G0}}}": "48x5"},
        "2m",
        [(L0, "GPU 0 on n1 reported XID 48 (reboot class: ECC, row remap, engine timeout)")],
    ),
    Case("GpuXidReboot", {f"DCGM_FI_DEV_XID_ERRORS{{{G0}}}": "31x5"}, "2m"),
    Case(
        "NvlinkRecoveryErrors",
        {f"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL{{{G0}}}": "0 0 1 1 1"},
        "4m",
        [(L0, "GPU 0 on n1 had NVLink link recoveries in the last 15 min")],
    ),
    Case("NvlinkRecoveryErrors", {f"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL{{{G0}}}": "3x20"}, "16m"),
    Case(
        "NvlinkReplayErrors",
        {f"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{{{G0}}}": "0+5x20"},
        "16m",
        [(L0, "GPU 0 on n1 replayed NVLink packets more than 10 times in 15 min")],
    ),
    Case("NvlinkReplayErrors", {f"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{{{G0}}}": "0+0.5x20"}, "16m"),
    Case(
        "GpuAllocatedIdleKubernetes",
        {f'DCGM_FI_DEV_GPU_UTIL{{{G0},pod="train-0",namespace="team-a"}}': "0x40"},
        "35m",
        [({**L0, "pod": "train-0", "namespace": "team-a"}, "GPU 0 on n1 given to pod team-a/train-0 has been idle for 30 min")],
    ),
    Case("GpuAllocatedIdleKubernetes", {f"DCGM_FI_DEV_GPU_UTIL{{{G0}}}": "0x40"}, "35m"),  # nobody holds it
    Case(
        "GpuAllocatedIdleKubernetes",  # nobody holds it; the scrape named the exporter's own pod
        {f'DCGM_FI_DEV_GPU_UTIL{{{G0},pod="nvidia-dcgm-exporter-x7k2p"}}': "0x40"},
        "35m",
    ),
    Case(
        "GpuAllocatedIdleKubernetes",  # busy again after 20 idle minutes
        {f'DCGM_FI_DEV_GPU_UTIL{{{G0},pod="train-0",namespace="team-a"}}': "0x20 90x20"},
        "35m",
    ),
    Case(
        "GpuAllocatedIdleSlurm",  # node p5-1: Slurm allocated its 8 GPUs, all at 0 %; p5-2 beside it is busy
        {**_node_gpus("p5-1", 8, ["0x40"] * 8), **_node_gpus("p5-2", 8, ["95x40"] * 8)},
        "35m",
        [({"node": "p5-1"}, "Slurm node p5-1 has had at least 8 allocated GPUs under 2 % for 30 min")],
    ),
    Case(
        "GpuAllocatedIdleSlurm",  # nearly all: 7 of the 8 allocated GPUs idle, one busy
        _node_gpus("p5-1", 8, ["0x40"] * 7 + ["80x40"]),
        "35m",
        [({"node": "p5-1"}, "Slurm node p5-1 has had at least 7 allocated GPUs under 2 % for 30 min")],
    ),
    Case("GpuAllocatedIdleSlurm", _node_gpus("p5-1", 0, ["0x40"] * 8), "35m"),  # idle, but nothing is allocated
    Case("GpuAllocatedIdleSlurm", _node_gpus("p5-1", 8, ["95x40"] * 8), "35m"),  # allocated and busy
    Case("GpuAllocatedIdleSlurm", _node_gpus("p5-1", 8, ["0x40"] * 4 + ["90x40"] * 4), "35m"),  # half busy: not "nearly all"
    Case("GpuAllocatedIdleSlurm", _node_gpus("p5-1", 8, ["0x20 90x20"] * 8), "35m"),  # idle 20 min, then busy
    Case(
        "SlurmNodesDrainedByHealthCheck",
        {'gpucluster_slurm_unavailable_nodes{check="gpu_xid",action="replace"}': "2x5"},
        "2m",
        [
            (
                {"check": "gpu_xid", "action": "replace"},
                "2 Slurm nodes are drained by gpucluster's health check 'gpu_xid' (replace)",
            )
        ],
    ),
    Case(
        "SlurmNodesDrainedByHealthCheck",  # an operator's drain
        {'gpucluster_slurm_unavailable_nodes{check="other",action=""}': "2x5"},
        "2m",
    ),
    Case(
        "NodeLaunchFailuresRepeated",
        {'gpucluster_agent_boot_failures{group="gpu"}': "0 1 2 2"},
        "3m",
        [({"group": "gpu"}, "Node group gpu has 2 failed launches in a row (protected mode at the configured limit)")],
    ),
    Case("NodeLaunchFailuresRepeated", {'gpucluster_agent_boot_failures{group="gpu"}': "0 1 1 1"}, "3m"),
    Case(
        "NodeGroupProtectedMode",
        {'gpucluster_agent_protected{group="gpu"}': "0 1 1"},
        "2m",
        [({"group": "gpu"}, "Node group gpu is in protected mode: no more launches")],
    ),
    Case("NodeGroupProtectedMode", {'gpucluster_agent_protected{group="gpu"}': "0x3"}, "2m"),
    Case(
        "RepairBrakeTripped",
        {'gpucluster_agent_repair_brake_tripped{group="gpu"}': "1x3"},
        "2m",
        [({"group": "gpu"}, "Node group gpu's repair brake is on: automatic repairs stopped")],
    ),
    Case("RepairBrakeTripped", {'gpucluster_agent_repair_brake_tripped{group="gpu"}': "0x3"}, "2m"),
    Case(
        "HeadNodeDiskFull",
        {
            f'node_filesystem_avail_bytes{{{HEAD},mountpoint="/"}}': "5x10",
            f'node_filesystem_size_bytes{{{HEAD},mountpoint="/"}}': "100x10",
        },
        "7m",
        [({**HEAD_L, "mountpoint": "/"}, "The head node's root file system has less than 10% free")],
    ),
    Case(
        "HeadNodeDiskFull",  # a GPU node's full disk is not the head node's
        {
            'node_filesystem_avail_bytes{role="gpu",instance="n1:9100",mountpoint="/"}': "5x10",
            'node_filesystem_size_bytes{role="gpu",instance="n1:9100",mountpoint="/"}': "100x10",
        },
        "7m",
    ),
    Case(
        "HeadNodeMemoryLow",
        {f"node_memory_MemAvailable_bytes{{{HEAD}}}": "5x10", f"node_memory_MemTotal_bytes{{{HEAD}}}": "100x10"},
        "7m",
        [(HEAD_L, "The head node has less than 10% memory available")],
    ),
    Case(
        "HeadNodeMemoryLow",
        {f"node_memory_MemAvailable_bytes{{{HEAD}}}": "50x10", f"node_memory_MemTotal_bytes{{{HEAD}}}": "100x10"},
        "7m",
    ),
    Case(
        "SlurmctldDown",
        {'gpucluster_metrics_collector_success{collector="slurm",instance="head:9400"}': "1 0 0 0 0 0"},
        "5m",
        [
            (
                {"collector": "slurm", "instance": "head:9400"},
                "slurmctld does not answer on the head node (sinfo fails, or its unit is not active)",
            )
        ],
    ),
    Case(
        "SlurmctldDown",
        {f'node_systemd_unit_state{{{HEAD},name="slurmctld.service",state="active"}}': "0x5"},
        "4m",
        [
            (
                {**HEAD_L, "name": "slurmctld.service", "state": "active"},
                "slurmctld does not answer on the head node (sinfo fails, or its unit is not active)",
            )
        ],
    ),
    Case(
        "SlurmctldDown",  # one failed scrape is not an outage
        {'gpucluster_metrics_collector_success{collector="slurm",instance="head:9400"}': "1 0 1 1 1 1"},
        "5m",
    ),
    Case(
        "SlurmdbdDown",
        {f'node_systemd_unit_state{{{HEAD},name="slurmdbd.service",state="active"}}': "0x5"},
        "4m",
        [({**HEAD_L, "name": "slurmdbd.service", "state": "active"}, "slurmdbd is not running on the head node")],
    ),
    Case("SlurmdbdDown", {f'node_systemd_unit_state{{{HEAD},name="slurmdbd.service",state="active"}}': "1x5"}, "4m"),
    Case(
        "ScrapeTargetDown",
        {'up{job="gpu",instance="n1:9400"}': "0x15"},
        "11m",
        [({"job": "gpu", "instance": "n1:9400"}, "gpu target n1:9400 has not answered for 10 min")],
    ),
    Case("ScrapeTargetDown", {'up{job="gpu",instance="n1:9400"}': "0x5 1x10"}, "11m"),
]
