"""The series the rules and dashboards read, named once.

GPU series carry the DCGM exporter's names and labels (``gpu``, ``UUID``, ``Hostname``, ``modelName``) on both
schedulers: on EKS the GPU Operator's dcgm-exporter emits them, on Slurm gpucluster's NVML exporter
(``gpucluster_agents.metrics``) emits the same names. The ``gpucluster_*`` series come from that exporter on the
head node (Slurm's figures, the agent's counters).
"""

from __future__ import annotations

# --- DCGM exporter names (NVIDIA dcgm-exporter etc/default-counters.csv and dcp-metrics-included.csv) -----
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # gauge, degrees C
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # gauge, percent
GPU_POWER = "DCGM_FI_DEV_POWER_USAGE"  # gauge, W
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # gauge, MHz
FB_USED = "DCGM_FI_DEV_FB_USED"  # gauge, MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # gauge, MiB
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"  # counter, ns throttled for temperature (NVIDIA DCGM field docs; NVIDIA/dcgm-exporter#589 fixed its "us" help text)
POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"  # counter, ns throttled for power
CLOCK_EVENTS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"  # gauge, NVML's clock-event reasons bitmask
ECC_DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"  # uncorrected ECC errors since the last GPU reset
ECC_SBE_VOL = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"  # 1: a remap waits for the next GPU reset
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"  # 1: a remap failed, the GPU has no spare rows
XID = "DCGM_FI_DEV_XID_ERRORS"  # gauge: the GPU's last XID (0: none since the exporter started)
NVLINK_REPLAY = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"
NVLINK_RECOVERY = "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"
NVLINK_CRC_FLIT = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
PCIE_REPLAY = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
# profiling activities: dcgm-exporter only (NVML has no profiling counters, so Slurm nodes without DCGM lack them)
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"

# NVML clock-event reason bits (nvml.h nvmlClocksEventReason*) that mean the hardware slowed the GPU down
CLOCK_EVENT_BITS = {"HW_SLOWDOWN": 0x8, "SW_THERMAL": 0x20, "HW_THERMAL": 0x40, "HW_POWER_BRAKE": 0x80}

# --- gpucluster's exporter (gpucluster_agents.metrics.head) on the Slurm head node -----------------------
SLURM_NODES = "gpucluster_slurm_nodes"  # gauge {state}: nodes per state as sinfo %T prints it
SLURM_UNAVAILABLE = "gpucluster_slurm_unavailable_nodes"  # gauge {check, action}: drained/down; check "other" = not ours
SLURM_NODE_GPUS = "gpucluster_slurm_node_gpus_allocated"  # gauge {node}: GPUs Slurm allocated on the node (GresUsed)
SLURM_JOBS = "gpucluster_slurm_jobs"  # gauge {state}
SLURM_PENDING = "gpucluster_slurm_pending_jobs"  # gauge {reason}
COLLECTOR_OK = "gpucluster_metrics_collector_success"  # gauge {collector}: 0 when e.g. sinfo got no answer
BOOT_FAILURES = "gpucluster_agent_boot_failures"  # gauge {group}: failed launches counted towards protected mode
PROTECTED = "gpucluster_agent_protected"  # gauge {group}: 1 while the group is in protected mode
HOLDS = "gpucluster_agent_holds"  # gauge {scope, kind}: insufficient_capacity | launch_failure | protected_mode
REPAIR_BRAKE = "gpucluster_agent_repair_brake_tripped"  # gauge {group}
REPAIRS_ACTIVE = "gpucluster_agent_repairs_active"  # gauge {action}
LAUNCHES = "gpucluster_agent_launches_in_flight"  # gauge {group}

# --- each team's figures (gpucluster_agents.metrics.teams): the head node's loopback exporter, job "teams" -----
ACCOUNT_GPU_SECONDS = "gpucluster_slurm_account_gpu_seconds"  # gauge {account}: over the last 30 days (sacct)
ACCOUNT_COST = "gpucluster_slurm_account_cost_usd"  # gauge {account}: those GPU-seconds at the accounts file's prices
ACCOUNT_FAIRSHARE = "gpucluster_slurm_account_fairshare"  # gauge {account, user}: each member's fair-share factor
ACCOUNT_EFFECTIVE_USAGE = "gpucluster_slurm_account_effective_usage"  # gauge {account}: its part of the cluster's usage
ACCOUNT_GPU_JOBS = "gpucluster_slurm_account_gpu_jobs"  # gauge {account, state}: running | pending, jobs asking GPUs
ACCOUNT_GPUS = "gpucluster_slurm_account_gpus_allocated"  # gauge {account}: GPUs its running jobs hold
ACCOUNT_GUARANTEE = "gpucluster_slurm_account_gpu_guarantee"  # gauge {account}: grp_tres gres/gpu of the accounts file

# --- node exporter (head node; the systemd collector limited to the Slurm daemons' units) ----------------
UNIT_STATE = "node_systemd_unit_state"

# --- Kueue (metrics.enableClusterQueueResources: true) ----------------------------------------------------
KUEUE_USAGE = "kueue_cluster_queue_resource_usage"  # {cohort, cluster_queue, flavor, resource}
KUEUE_QUOTA = "kueue_cluster_queue_nominal_quota"
KUEUE_PENDING = "kueue_pending_workloads"  # {cluster_queue, status}
