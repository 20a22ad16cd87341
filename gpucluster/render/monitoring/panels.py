"""What each dashboard shows: panels of PromQL over the series of :mod:`.series`.

Queries use fixed windows (``[5m]``), not Grafana's ``$__rate_interval``, so each one is also a query Prometheus
itself answers: the tests run every one against a real Prometheus (the ``$team`` variable set to all). Figures only
CloudWatch has (FSx for Lustre) get a text panel saying where they are.
"""

from __future__ import annotations

from gpucluster.render.monitoring import series as s
from gpucluster.render.monitoring.grafana import Dashboard, Panel, Variable

GPU = "{{Hostname}} GPU {{gpu}}"
NODE = "{{instance}}"
GPU_HOURS_STEP_MIN = 5  # subquery step of the GPU-hour panels: usage sampled every 5 min
GPU_RESOURCE = 'resource="nvidia.com/gpu"'


def _rate(metric: str, by: str = "instance", window: str = "5m") -> str:
    return f"sum by ({by}) (rate({metric}[{window}]))"


def gpu_hours(window: str) -> str:
    """GPU-hours per Kueue cluster queue over ``window``: the usage gauge summed every 5 minutes."""
    usage = f"kueue_cluster_queue_resource_usage{{{GPU_RESOURCE}}}"
    return f"sum by (cluster_queue) (sum_over_time({usage}[{window}:{GPU_HOURS_STEP_MIN}m])) * {GPU_HOURS_STEP_MIN} / 60"


OVERVIEW = Dashboard(
    "gpucluster-overview",
    "gpucluster: cluster overview",
    "The fleet at a glance: GPUs reporting, how busy they are, power, firing alerts and the schedulers' queues.",
    (
        Panel("GPUs reporting", ((f"count({s.GPU_TEMP})", "GPUs"),), kind="stat", width=6, height=4),
        Panel("Mean GPU utilisation", ((f"avg({s.GPU_UTIL})", "utilisation"),), unit="percent", kind="stat", width=6, height=4),
        Panel("GPU power", ((f"sum({s.GPU_POWER})", "W"),), unit="watt", kind="stat", width=6, height=4),
        Panel(
            "Firing alerts",
            (('count by (severity) (ALERTS{alertstate="firing"})', "{{severity}}"),),
            kind="stat",
            width=6,
            height=4,
        ),
        Panel("GPU utilisation per node", ((f"avg by (Hostname) ({s.GPU_UTIL})", "{{Hostname}}"),), unit="percent"),
        Panel(
            "Busy or waiting (tensor / DRAM activity, DCGM only)",
            (
                (f"avg({s.TENSOR_ACTIVE})", "tensor pipes"),
                (f"avg({s.DRAM_ACTIVE})", "DRAM"),
                (f"avg({s.GR_ENGINE_ACTIVE})", "graphics engine"),
            ),
            unit="percentunit",
            description="Profiling activities come from DCGM (EKS); NVML has none, so Slurm nodes without DCGM leave this empty.",
        ),
        Panel("Slurm nodes by state", ((f"sum by (state) ({s.SLURM_NODES})", "{{state}}"),)),
        Panel("Kueue pending workloads", ((f"sum by (cluster_queue) ({s.KUEUE_PENDING})", "{{cluster_queue}}"),)),
    ),
)

GPU_HEALTH = Dashboard(
    "gpucluster-gpu-health",
    "gpucluster: GPU health",
    "Temperature, throttling, memory errors, XIDs and NVLink per GPU (the figures the alert rules watch).",
    (
        Panel("Temperature", ((s.GPU_TEMP, GPU),), unit="celsius"),
        Panel("Power", ((s.GPU_POWER, GPU),), unit="watt"),
        Panel("SM clock", ((s.SM_CLOCK, GPU),), description="MHz"),
        Panel(
            "Time throttled (share of each second)",
            (
                (f"rate({s.THERMAL_VIOLATION}[5m]) / 1e9", f"thermal {GPU}"),
                (f"rate({s.POWER_VIOLATION}[5m]) / 1e9", f"power {GPU}"),
            ),
            unit="percentunit",
        ),
        Panel(
            "Clock-event reasons (bitmask)",
            ((f"{s.CLOCK_EVENTS} > 1", GPU),),
            description="1 idle, 4 software power cap, 8 hardware slowdown, 32 software thermal, 64 hardware thermal, 128 power brake.",
        ),
        Panel("Uncorrected ECC errors since reset", ((f"{s.ECC_DBE_VOL} > 0", GPU),)),
        Panel("Corrected ECC errors (rate)", ((f"rate({s.ECC_SBE_VOL}[5m]) > 0", GPU),)),
        Panel(
            "Row remaps pending / failed",
            ((f"{s.ROW_REMAP_PENDING} > 0", f"pending {GPU}"), (f"{s.ROW_REMAP_FAILURE} > 0", f"failed {GPU}")),
        ),
        Panel(
            "Last XID per GPU",
            ((f"{s.XID} > 0", GPU),),
            kind="stat",
            description="Classes: docs/health.md (reboot: 48, 63, 64, 94, 95 …; replace: 54, 74, 79, 119, 120, 140).",
        ),
        Panel(
            "NVLink errors (15 min)",
            (
                (f"increase({s.NVLINK_REPLAY}[15m]) > 0", f"replay {GPU}"),
                (f"increase({s.NVLINK_RECOVERY}[15m]) > 0", f"recovery {GPU}"),
                (f"increase({s.NVLINK_CRC_FLIT}[15m]) > 0", f"CRC {GPU}"),
            ),
        ),
        Panel("Frame buffer used", ((f"{s.FB_USED} / ({s.FB_USED} + {s.FB_FREE})", GPU),), unit="percentunit"),
        Panel("Utilisation", ((s.GPU_UTIL, GPU),), unit="percent"),
    ),
)

FABRIC = Dashboard(
    "gpucluster-fabric",
    "gpucluster: fabric (EFA)",
    "EFA traffic, RDMA and errors per node, from the EFA devices' hardware counters (node_amazonefa_*).",
    (
        Panel("EFA transmit", ((_rate("node_amazonefa_tx_bytes"), NODE),), unit="Bps"),
        Panel("EFA receive", ((_rate("node_amazonefa_rx_bytes"), NODE),), unit="Bps"),
        Panel("RDMA read", ((_rate("node_amazonefa_rdma_read_bytes"), NODE),), unit="Bps"),
        Panel("RDMA write", ((_rate("node_amazonefa_rdma_write_bytes"), NODE),), unit="Bps"),
        Panel("Retransmitted packets", ((_rate("node_amazonefa_retrans_pkts"), NODE),), unit="pps"),
        Panel(
            "Drops and unresponsive peers",
            (
                (_rate("node_amazonefa_rx_drops"), f"drops {NODE}"),
                (_rate("node_amazonefa_unresponsive_remote_events"), f"unresponsive {NODE}"),
            ),
            unit="short",
        ),
        Panel(
            "Devices per node",
            (("count by (instance) (node_amazonefa_tx_bytes)", NODE),),
            kind="stat",
            description="Should equal the instance type's EFA interfaces (p5.48xlarge: 32).",
        ),
        Panel("PCIe replays (GPU)", ((f"increase({s.PCIE_REPLAY}[15m]) > 0", GPU),)),
    ),
)

STORAGE = Dashboard(
    "gpucluster-storage",
    "gpucluster: storage",
    "The Lustre client on each node and the nodes' own disks; the file system's own figures are in CloudWatch.",
    (
        Panel(
            "Lustre client throughput",
            (("sum by (instance, direction) (rate(gpucluster_lustre_client_bytes_total[5m]))", "{{instance}} {{direction}}"),),
            unit="Bps",
        ),
        Panel(
            "Lustre client operations (top 10)",
            (("topk(10, sum by (op) (rate(gpucluster_lustre_client_operations_total[5m])))", "{{op}}"),),
            unit="ops",
        ),
        Panel(
            "Node disk free",
            (
                (
                    'min by (instance, mountpoint) (node_filesystem_avail_bytes{fstype!~"tmpfs|overlay"} / '
                    'node_filesystem_size_bytes{fstype!~"tmpfs|overlay"})',
                    "{{instance}} {{mountpoint}}",
                ),
            ),
            unit="percentunit",
        ),
        Panel(
            "Node disk I/O",
            (("sum by (instance) (rate(node_disk_read_bytes_total[5m]) + rate(node_disk_written_bytes_total[5m]))", NODE),),
            unit="Bps",
        ),
        Panel(
            "FSx for Lustre",
            kind="text",
            width=24,
            height=4,
            text=(
                "FSx for Lustre publishes its throughput and free capacity to **CloudWatch** (namespace `AWS/FSx`, "
                "dimension `FileSystemId`), not to Prometheus: see the CloudWatch alarms `<cluster>-fsx-throughput-near-tier` "
                "and `<cluster>-fsx-capacity-near-full`, or add the CloudWatch data source to this dashboard."
            ),
        ),
    ),
)

SCHEDULER = Dashboard(
    "gpucluster-scheduler",
    "gpucluster: scheduler",
    "Slurm's nodes, jobs and pending reasons; the node agent's launches, holds and repairs; Kueue's queues.",
    (
        Panel("Slurm nodes by state", ((f"sum by (state) ({s.SLURM_NODES})", "{{state}}"),)),
        Panel("Drained or down, by health check", ((f"sum by (check, action) ({s.SLURM_UNAVAILABLE})", "{{check}} {{action}}"),)),
        Panel("Slurm jobs by state", ((f"sum by (state) ({s.SLURM_JOBS})", "{{state}}"),)),
        Panel("Pending jobs by reason", ((f"sum by (reason) ({s.SLURM_PENDING})", "{{reason}}"),)),
        Panel("Launches in flight", ((f"sum by (group) ({s.LAUNCHES})", "{{group}}"),)),
        Panel("Holds (insufficient capacity, failed launches, protected mode)", ((f"sum by (kind) ({s.HOLDS})", "{{kind}}"),)),
        Panel(
            "Protected node groups and failed launches",
            ((f"{s.PROTECTED} > 0", "protected {{group}}"), (f"{s.BOOT_FAILURES} > 0", "failures {{group}}")),
        ),
        Panel("Repairs under way", ((f"sum by (action) ({s.REPAIRS_ACTIVE})", "{{action}}"),)),
        Panel(
            "Kueue pending workloads", ((f"sum by (cluster_queue, status) ({s.KUEUE_PENDING})", "{{cluster_queue}} {{status}}"),)
        ),
        Panel(
            "Exporters answering",
            (("sum by (job) (up)", "{{job}}"), (f"min by (collector) ({s.COLLECTOR_OK})", "{{collector}} ok")),
        ),
    ),
)


TEAM = Variable("team", "Team (Slurm account)", s.ACCOUNT_GPUS, "account")
ACCOUNT = '{account=~"$team"}'


def _per_account(metric: str, by: str = "account") -> str:
    return f"sum by ({by}) ({metric}{ACCOUNT})"


def slurm_team_panels() -> tuple[Panel, ...]:
    """Each Slurm team's figures, from the head node's loopback exporter (``job="teams"``): admins only."""
    return (
        Panel(
            "Slurm: GPUs in use and guaranteed",
            (
                (_per_account(s.ACCOUNT_GPUS), "{{account}} in use"),
                (_per_account(s.ACCOUNT_GUARANTEE), "{{account}} guaranteed"),
            ),
        ),
        Panel(
            "Slurm: share of the guarantee in use",
            ((f"{_per_account(s.ACCOUNT_GPUS)} / {_per_account(s.ACCOUNT_GUARANTEE)}", "{{account}}"),),
            unit="percentunit",
            description="Above 100 %: the team borrows idle GPUs beyond its guarantee.",
        ),
        Panel(
            "Slurm: GPU-hours, last 30 days",
            ((f"{_per_account(s.ACCOUNT_GPU_SECONDS)} / 3600", "{{account}}"),),
            kind="stat",
            width=8,
            description="sacct's records, the window of each team's own report (gpucluster-usage).",
        ),
        Panel(
            "Slurm: cost, last 30 days",
            ((_per_account(s.ACCOUNT_COST), "{{account}}"),),
            unit="currencyUSD",
            kind="stat",
            width=8,
            description="At the GPU-hour prices of the accounts file (the plan's); a partition without a price counts none.",
        ),
        Panel(
            "Slurm: share of the cluster's usage",
            ((_per_account(s.ACCOUNT_EFFECTIVE_USAGE), "{{account}}"),),
            unit="percentunit",
            kind="stat",
            width=8,
            description="sshare's EffectvUsage: the team's part of the cluster's decayed usage.",
        ),
        Panel(
            "Slurm: GPU jobs running and pending",
            ((_per_account(s.ACCOUNT_GPU_JOBS, "account, state"), "{{account}} {{state}}"),),
        ),
        Panel(
            "Slurm: fair-share factor per member",
            ((f"min by (account, user) ({s.ACCOUNT_FAIRSHARE}{ACCOUNT})", "{{account}} {{user}}"),),
            description="sshare's FairShare (1: used least, first in line); the priority's fair-share part.",
        ),
    )


def team_usage(gpu_hour_price_usd: float | None) -> Dashboard:
    panels = [
        *slurm_team_panels(),
        Panel(
            "GPUs in use per cluster queue",
            ((f"sum by (cluster_queue) ({s.KUEUE_USAGE}{{{GPU_RESOURCE}}})", "{{cluster_queue}}"),),
        ),
        Panel(
            "Share of nominal quota",
            (
                (
                    f"sum by (cluster_queue) ({s.KUEUE_USAGE}{{{GPU_RESOURCE}}}) / sum by (cluster_queue) ({s.KUEUE_QUOTA}{{{GPU_RESOURCE}}})",
                    "{{cluster_queue}}",
                ),
            ),
            unit="percentunit",
        ),
        Panel("GPU-hours, last 24 h", ((gpu_hours("24h"), "{{cluster_queue}}"),), kind="stat"),
        Panel("GPU-hours, last 7 days", ((gpu_hours("7d"), "{{cluster_queue}}"),), kind="stat"),
    ]
    if gpu_hour_price_usd is not None:
        panels.append(
            Panel(
                f"Cost, last 7 days (at ${gpu_hour_price_usd:g} per GPU-hour, the plan's price)",
                ((f"{gpu_hours('7d')} * {gpu_hour_price_usd:g}", "{{cluster_queue}}"),),
                unit="currencyUSD",
                kind="stat",
                width=24,
            )
        )
    panels.append(
        Panel(
            "Who sees what",
            kind="text",
            width=24,
            height=4,
            text=(
                "Every team is here: this Grafana is the admins'. On Slurm the figures come from the head node's "
                "loopback exporter, which no researcher reaches; a member reads their own team's quota, usage, fair "
                "share and GPU-hours with `gpucluster-usage` on a login node (docs/teams.md). Kueue's figures come "
                "from `metrics.enableClusterQueueResources`."
            ),
        )
    )
    return Dashboard(
        "gpucluster-team-usage",
        "gpucluster: usage per team",
        "Per team: GPUs in use against the guarantee, GPU-hours, dollars, fair share and jobs (Slurm accounts, Kueue "
        "cluster queues).",
        tuple(panels),
        variables=(TEAM,),
    )


def all_dashboards(gpu_hour_price_usd: float | None = None) -> tuple[Dashboard, ...]:
    return (OVERVIEW, GPU_HEALTH, FABRIC, STORAGE, SCHEDULER, team_usage(gpu_hour_price_usd))
