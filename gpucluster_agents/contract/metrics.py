# pyright: strict
"""The series gpucluster's exporters write (:mod:`gpucluster_agents.metrics`) and the ports the collector scrapes them
on: the control plane's dashboards, alert rules and collection config (render/monitoring/) query and scrape exactly
these, so a series is named once, here. Each is ``(name, type, help)``; the GPU exporter's fields also name the NVML
reading they come from (:mod:`gpucluster_agents.metrics.gpu` says how the value is taken from it)."""

from __future__ import annotations

GPU_EXPORTER_PORT = 9400  # gpucluster's exporter (or NVIDIA's dcgm-exporter); the head node's exporter too
NODE_EXPORTER_PORT = 9100
JOB_PORTS = {"gpu": (GPU_EXPORTER_PORT,), "node": (NODE_EXPORTER_PORT,), "head": (GPU_EXPORTER_PORT, NODE_EXPORTER_PORT)}
"""The collector's jobs and the ports each scrapes on its targets."""

# --- the GPU exporter (metrics/gpu.py): DCGM's names where DCGM has one ----------------------------------------

# NVML enums (nvml.h): nvmlNvLinkErrorCounter_t
NVLINK_ERRORS = (
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 0, "Total number of NVLink retries."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 1, "Total number of NVLink recovery errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 2, "Total number of NVLink flow-control CRC errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 3, "Total number of NVLink data CRC errors."),
)
# (metric, type, help, reading). Readings are named in GpuReader.read_all.
GPU_FIELDS: tuple[tuple[str, str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "clock_sm"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "clock_mem"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temperature"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", "energy"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "pcie_replay"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "utilization"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "utilization"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", "encoder"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", "decoder"),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "memory"),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "memory"),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.", "ecc_sbe_vol"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", "ecc_dbe_vol"),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors.", "ecc_sbe_agg"),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors.", "ecc_dbe_agg"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors", "rows"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors", "rows"),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending (a GPU reset applies it)", "rows"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", "rows"),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns).", "viol_power"),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns).", "viol_thermal"),
    (
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons (bitmask of NVML's clocks event reasons).",
        "clock_events",
    ),
)
RESERVED = ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).")
XID_LAST = ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.")
XID_TOTAL = ("gpucluster_gpu_xid_errors_total", "counter", "XIDs in the kernel's own records since boot, by XID and class.")
READ_ERRORS = ("gpucluster_gpu_read_errors", "gauge", "NVML readings of this GPU that failed with an error in this scrape.")
NVML_UP = ("gpucluster_nvml_up", "gauge", "1 when NVML started and counted the GPUs, else 0.")
GPU_COUNT = ("gpucluster_gpus", "gauge", "GPUs NVML counts on this node.")
XID_READABLE = ("gpucluster_xid_log_readable", "gauge", "1 when the kernel log could be read for XIDs, else 0.")

# --- the head node's exporter (metrics/head.py): Slurm and the node agent ----------------------------------------

NODES = ("gpucluster_slurm_nodes", "gauge", "Slurm nodes by state as sinfo prints it (idle~: powered down).")
DRAINS = (
    "gpucluster_slurm_unavailable_nodes",
    "gauge",
    "Down or drained nodes by reason kind: the health check and action, or other.",
)
NODE_GPUS = (
    "gpucluster_slurm_node_gpus_allocated",
    "gauge",
    "GPUs Slurm has allocated on each GPU node (sinfo GresUsed), one series per node.",
)
JOBS = ("gpucluster_slurm_jobs", "gauge", "Slurm jobs by state.")
PENDING = ("gpucluster_slurm_pending_jobs", "gauge", "Pending Slurm jobs by Slurm's reason code.")
LAUNCHES = ("gpucluster_agent_launches_in_flight", "gauge", "Launches the agent started and has not finished, by node group.")
HOLDS = ("gpucluster_agent_holds", "gauge", "Node groups or nodes the agent holds DOWN, by scope and kind.")
PROTECTED = ("gpucluster_agent_protected", "gauge", "1 while a node group is in protected mode (its launches keep failing).")
BOOT_FAILS = ("gpucluster_agent_boot_failures", "gauge", "Boot failures counted towards a node group's protected mode.")
REPAIRS = ("gpucluster_agent_repairs_active", "gauge", "Node repairs under way, by action.")
REPAIRED = ("gpucluster_agent_repairs_recent", "gauge", "Finished node repairs among the last 500, by action and outcome.")
BRAKE = ("gpucluster_agent_repair_brake_tripped", "gauge", "1 while a node group's repair brake is on.")

# --- each team's figures (metrics/teams.py), on the head node's loopback exporter ---------------------------------

ACCOUNT_GPU_SECONDS = (
    "gpucluster_slurm_account_gpu_seconds",
    "gauge",
    "GPU-seconds of the account's jobs over the last 30 days (sacct).",
)
ACCOUNT_COST = (
    "gpucluster_slurm_account_cost_usd",
    "gauge",
    "Dollars of those GPU-seconds at the accounts file's prices (a partition without a price counts none).",
)
ACCOUNT_FAIRSHARE = (
    "gpucluster_slurm_account_fairshare",
    "gauge",
    "Each member's fair-share factor in the account (sshare FairShare; 1: used least).",
)
ACCOUNT_EFFECTIVE = (
    "gpucluster_slurm_account_effective_usage",
    "gauge",
    "The account's part of the cluster's usage (sshare EffectvUsage).",
)
ACCOUNT_JOBS = (
    "gpucluster_slurm_account_gpu_jobs",
    "gauge",
    "The account's jobs that ask for GPUs, by state (running, pending).",
)
ACCOUNT_GPUS = ("gpucluster_slurm_account_gpus_allocated", "gauge", "GPUs allocated to the account's running jobs (squeue).")
ACCOUNT_GUARANTEE = (
    "gpucluster_slurm_account_gpu_guarantee",
    "gauge",
    "GPUs the accounts file guarantees the account (grp_tres gres/gpu).",
)
ACCOUNT_FAMILIES = (
    ACCOUNT_GPU_SECONDS,
    ACCOUNT_COST,
    ACCOUNT_FAIRSHARE,
    ACCOUNT_EFFECTIVE,
    ACCOUNT_JOBS,
    ACCOUNT_GPUS,
    ACCOUNT_GUARANTEE,
)

# --- the node exporter's EFA counters and gpucluster's Lustre client figures (metrics/fabric.py) ------------------

EFA_PREFIX = "node_amazonefa_"
LUSTRE_OPS = ("gpucluster_lustre_client_operations_total", "counter", "Lustre client operations, by file system and operation.")
LUSTRE_BYTES = ("gpucluster_lustre_client_bytes_total", "counter", "Bytes the Lustre client read or wrote, by file system.")

# --- every exporter of gpucluster's (metrics/server.py) -------------------------------------------------------------

SCRAPE_SECONDS = ("gpucluster_metrics_scrape_duration_seconds", "gauge", "Seconds this exporter took to read its metrics.")
COLLECTOR_OK = ("gpucluster_metrics_collector_success", "gauge", "1 when a collector read its source, else 0.")
