"""Alerts whose figures only CloudWatch has: FSx for Lustre (namespace ``AWS/FSx``, dimension ``FileSystemId``).

AMP scrapes Prometheus endpoints; FSx publishes its throughput and free capacity to CloudWatch alone, so
"throughput near its tier" and "capacity near full" are CloudWatch alarms on the same SNS topic as the
Prometheus alerts. :func:`fsx_alarms` returns each alarm as ``aws.cloudwatch.MetricAlarm`` keyword arguments
(pulumi-aws 7 names); the caller adds ``alarm_actions``/``ok_actions`` (the topic) and ``tags``.

Figures (FSx for Lustre user guide, "How to use FSx for Lustre CloudWatch metrics"): client throughput =
SUM(DataReadBytes + DataWriteBytes) / PERIOD in bytes per second; free space = FreeDataStorageCapacity (Sum,
bytes). A PERSISTENT_2 file system's throughput capacity is its tier (MB/s per TiB) times its TiB of storage;
MB is taken as 10^6 bytes (the 5 % between MB and MiB does not move an 80 % alarm much).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NAMESPACE = "AWS/FSx"
PERIOD = 300  # s: FSx publishes every minute; five-minute sums smooth one checkpoint burst
GIB = 1 << 30
CAPACITY_PERIOD = 60  # s: free space is a level, not a count: the Sum of one minute is the free bytes of every
# storage target at that minute, where a five-minute Sum would add five minutes' samples (five times the free space)
CAPACITY_PERIODS = 5  # five minutes in a row below the floor; a minute without a sample is skipped, not a breach


@dataclass(frozen=True)
class FsxThresholds:
    throughput_fraction: float = 0.8  # of the tier's throughput, sustained THROUGHPUT_PERIODS
    throughput_periods: int = 3  # 15 min
    free_fraction: float = 0.2  # capacity alarm when less than this is free (HyperPod: used > 80 %)


def fsx_throughput_capacity_bytes(storage_capacity_gib: int, throughput_mb_per_tib: int) -> float:
    """Bytes per second the file system is provisioned for."""
    return storage_capacity_gib / 1024 * throughput_mb_per_tib * 1e6


def _metric(mid: str, name: str, file_system_id: object) -> dict[str, Any]:
    return {
        "id": mid,
        "metric": {
            "namespace": NAMESPACE,
            "metric_name": name,
            "dimensions": {"FileSystemId": file_system_id},
            "period": PERIOD,
            "stat": "Sum",
        },
        "return_data": False,
    }


def fsx_alarms(
    cluster_name: str,
    file_system_id: object,
    storage_capacity_gib: int,
    throughput_mb_per_tib: int,
    thresholds: FsxThresholds | None = None,
) -> dict[str, dict[str, Any]]:
    """``{suffix: MetricAlarm kwargs}`` for one FSx for Lustre file system (``file_system_id`` may be an Output)."""
    if storage_capacity_gib <= 0 or throughput_mb_per_tib <= 0:
        raise ValueError(
            f"storage_capacity_gib {storage_capacity_gib} and throughput_mb_per_tib {throughput_mb_per_tib} must both be positive"
        )
    t = thresholds or FsxThresholds()
    limit = fsx_throughput_capacity_bytes(storage_capacity_gib, throughput_mb_per_tib)
    free_floor = storage_capacity_gib * GIB * t.free_fraction
    return {
        "fsx-throughput": {
            "name": f"{cluster_name}-fsx-throughput-near-tier",
            "alarm_description": (
                f"FSx for Lustre client throughput above {t.throughput_fraction:.0%} of its "
                f"{limit / 1e6:.0f} MB/s for {t.throughput_periods * PERIOD // 60} min. Runbook: jobs will wait on I/O; "
                "find the readers (lfs/llite stats on the nodes), stage data to the nodes' NVMe, or raise the "
                "file system's throughput tier or capacity."
            ),
            "comparison_operator": "GreaterThanThreshold",
            "evaluation_periods": t.throughput_periods,
            "threshold": round(limit * t.throughput_fraction),
            "treat_missing_data": "notBreaching",
            "metric_queries": [
                _metric("r", "DataReadBytes", file_system_id),
                _metric("w", "DataWriteBytes", file_system_id),
                {"id": "throughput", "expression": "(r + w) / PERIOD(r)", "label": "bytes/s", "return_data": True},
            ],
        },
        "fsx-capacity": {
            "name": f"{cluster_name}-fsx-capacity-near-full",
            "alarm_description": (
                f"FSx for Lustre has less than {t.free_fraction:.0%} of its {storage_capacity_gib} GiB free. "
                "Runbook: writes fail when it is full (checkpoints first): delete or release old checkpoints "
                "(lfs hsm_release for files exported to S3), or increase the storage capacity (it only grows)."
            ),
            "comparison_operator": "LessThanThreshold",
            "evaluation_periods": CAPACITY_PERIODS,
            "threshold": round(free_floor),
            "treat_missing_data": "missing",
            "namespace": NAMESPACE,
            "metric_name": "FreeDataStorageCapacity",
            "dimensions": {"FileSystemId": file_system_id},
            "period": CAPACITY_PERIOD,
            "statistic": "Sum",
        },
    }
