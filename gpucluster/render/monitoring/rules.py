"""Prometheus alert rule groups for one cluster (the ``data`` of an AMP rule group namespace).

Every alert carries ``severity`` (``critical``: act now, a job or the cluster is hurt; ``warning``: act today),
``cluster`` (the alert's grouping key in Alertmanager), a ``summary`` and a ``runbook`` annotation saying what to
do. Thresholds are :class:`AlertThresholds` (HyperPod's observability rules where it has one: GPU temperature
80 °C for 5 min warns, 85 °C for 1 min is critical; docs/monitoring.md ``## Alerts`` gives each source).

Which figures AMP cannot see: FSx for Lustre publishes to CloudWatch only (``AWS/FSx``), so "throughput near
its tier" and "capacity near full" are CloudWatch alarms (:mod:`.cloudwatch_alarms`), not rules here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpucluster.render.core import to_yaml
from gpucluster.render.monitoring import series as s
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster_agents.contract.xid import XID_CLASSES

SCHEDULERS = ("slurm", "kubernetes")
# An idle GPU carries no pod label of its own; a scrape that names its target's pod (the exporter's) must not
# make it look allocated (the collector keeps the exporter's labels: honor_labels, docs/monitoring.md).
EXPORTER_POD = 'pod!~"nvidia-dcgm-exporter-.*"'
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


@dataclass(frozen=True)
class AlertThresholds:
    """What makes an alert fire. Defaults: HyperPod's GPU temperatures; idle = under 2 % for 30 min."""

    gpu_temp_warn_c: int = 80
    gpu_temp_crit_c: int = 85
    power_throttle_fraction: float = 0.5  # share of the time power-capped, over 15 min, that warns
    nvlink_replays_per_15m: int = 10
    idle_util_percent: float = 2.0
    idle_minutes: int = 30
    idle_allocated_fraction: float = 0.75  # Slurm: share of a node's allocated GPUs that must be idle ("nearly all")
    launch_failures: int = 2  # failed launches in a row (the agent's count towards protected mode)
    head_disk_free_fraction: float = 0.10
    head_memory_free_fraction: float = 0.10


@dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    for_: str  # "0m": fires at the first evaluation that matches
    severity: str  # critical | warning
    summary: str
    runbook: str

    def document(self, cluster: str) -> dict[str, object]:
        doc: dict[str, object] = {"alert": self.alert, "expr": self.expr}
        if self.for_ != "0m":
            doc["for"] = self.for_
        doc["labels"] = {"severity": self.severity, "cluster": cluster}
        doc["annotations"] = {"summary": self.summary, "runbook": self.runbook}
        return doc


def _bit(metric: str, bit: int) -> str:
    """PromQL for "bit ``bit`` of ``metric`` is set" (PromQL has no bitwise operators)."""
    return f"floor({metric} / {bit}) % 2 == 1"


def _xids(cls: str) -> str:
    codes = sorted(code for code, (kind, _) in XID_CLASSES.items() if kind == cls)
    return " or ".join(f"{s.XID} == {code}" for code in codes)


WHERE = "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}"
"""How a GPU rule names its GPU: ``{{ $labels.Hostname }}`` is the node (DCGM's label)."""


def gpu_rules(t: AlertThresholds) -> list[Rule]:
    """Per-GPU health, the same on both schedulers (DCGM names): heat and clocks, then memory and links."""
    return [*gpu_clock_rules(t), *gpu_memory_rules(t)]


def gpu_clock_rules(t: AlertThresholds) -> list[Rule]:
    """Temperature, throttling and hardware slowdown."""
    where = WHERE
    bits = " or ".join(f"({_bit(s.CLOCK_EVENTS, b)})" for n, b in s.CLOCK_EVENT_BITS.items() if n != "SW_THERMAL")
    slow = f"{s.CLOCK_EVENTS} and ({bits})"  # the value stays the bitmask
    return [
        Rule(
            "GpuTemperatureHigh",
            f"{s.GPU_TEMP} > {t.gpu_temp_warn_c}",
            "5m",
            "warning",
            f"{where} at {{{{ $value }}}} C (over {t.gpu_temp_warn_c} C for 5 min)",
            "Check the node's other GPUs and the rack's cooling; if only this GPU runs hot under the same load, "
            "drain the node at the job's end and run the deep health check.",
        ),
        Rule(
            "GpuTemperatureCritical",
            f"{s.GPU_TEMP} > {t.gpu_temp_crit_c}",
            "1m",
            "critical",
            f"{where} at {{{{ $value }}}} C (over {t.gpu_temp_crit_c} C)",
            "The GPU is about to slow down or shut off: drain the node now (Slurm: scontrol update "
            "nodename=<node> state=drain reason=hot; EKS: kubectl cordon), let the job checkpoint, then replace "
            "the instance if it stays hot when idle.",
        ),
        Rule(
            "GpuThermalThrottling",
            f"increase({s.THERMAL_VIOLATION}[5m]) > 0",
            "0m",
            "warning",
            f"{where} was slowed down for temperature in the last 5 min",
            "The job runs slower on this GPU and holds back every rank: look at its temperature panel; if it "
            "repeats, drain the node and replace the instance.",
        ),
        Rule(
            "GpuPowerThrottling",
            f"rate({s.POWER_VIOLATION}[15m]) / 1e9 > {t.power_throttle_fraction}",
            "15m",
            "warning",
            f"{where} was power-capped more than {t.power_throttle_fraction:.0%} of the last 15 min",
            "Some power capping under full load is normal; this much slows the job: compare the GPU's power limit "
            "with its siblings (nvidia-smi -q -d POWER) and replace the instance if its limit is lower.",
        ),
        Rule(
            "GpuHardwareSlowdown",
            slow,
            "2m",
            "critical",
            f"{where} reports a hardware slowdown (clock-event reasons {{{{ $value }}}})",
            "Hardware slowdown, hardware thermal or power-brake slowdown: the board protects itself. Drain the "
            "node and replace the instance (health check 'clocks' fails too).",
        ),
    ]


def gpu_memory_rules(t: AlertThresholds) -> list[Rule]:
    """ECC, row remapping, XIDs and NVLink errors."""
    where = WHERE
    return [
        Rule(
            "GpuUncorrectableEccErrors",
            f"{s.ECC_DBE_VOL} > 0",
            "0m",
            "critical",
            f"{where} had {{{{ $value }}}} uncorrected ECC errors since its last reset",
            "Memory contents are lost, the job on it has likely crashed: drain the node, reboot it (a GPU reset "
            "remaps the row), and replace it if the errors come back.",
        ),
        Rule(
            "GpuRowRemapPending",
            f"{s.ROW_REMAP_PENDING} > 0",
            "0m",
            "warning",
            f"{where} has a row remap waiting for a GPU reset",
            "Drain the node so no new job starts there; reboot it when its jobs end (the remap happens at the "
            "reset). The health check drains it at the next job start too.",
        ),
        Rule(
            "GpuRowRemapFailed",
            f"{s.ROW_REMAP_FAILURE} > 0",
            "0m",
            "critical",
            f"{where} could not remap a row: no spare rows left",
            "The GPU cannot repair its memory any more: drain the node and replace the instance (terminate it; "
            "the scheduler brings a new one).",
        ),
        Rule(
            "GpuXidReplace",
            _xids("replace"),
            "0m",
            "critical",
            f"{where} reported XID {{{{ $value }}}} (replace class: fallen off the bus, NVLink, GSP, unrecovered ECC)",
            "A reboot does not fix this class: drain the node and replace the instance; the health check's "
            "quarantine does it for Slurm nodes, EKS auto repair for managed node groups.",
        ),
        Rule(
            "GpuXidReboot",
            _xids("reboot"),
            "0m",
            "warning",
            f"{where} reported XID {{{{ $value }}}} (reboot class: ECC, row remap, engine timeout)",
            "A GPU reset clears this class: drain the node and reboot it when its job ends; replace it if the same "
            "XID returns after the reboot.",
        ),
        Rule(
            "NvlinkRecoveryErrors",
            f"increase({s.NVLINK_RECOVERY}[15m]) > 0",
            "0m",
            "warning",
            f"{where} had NVLink link recoveries in the last 15 min",
            "A link went down and came back: collective operations stall meanwhile. Run the deep health check "
            "(NVLink) at the job's end; replace the instance if it repeats.",
        ),
        Rule(
            "NvlinkReplayErrors",
            f"increase({s.NVLINK_REPLAY}[15m]) > {t.nvlink_replays_per_15m}",
            "0m",
            "warning",
            f"{where} replayed NVLink packets more than {t.nvlink_replays_per_15m} times in 15 min",
            "A noisy link: watch for recoveries; run the deep health check at the job's end.",
        ),
    ]


def idle_rules(t: AlertThresholds, schedulers: Sequence[str]) -> list[Rule]:
    """GPUs someone holds but nobody uses (money burning).

    How "allocated" is known: on EKS, the DCGM exporter's pod mapping sets ``pod``/``namespace`` on a GPU given
    to a pod (the scrape must keep the exporter's labels: ``honor_labels``), so the rule is per GPU. On Slurm the
    head node's exporter reads how many GPUs Slurm has allocated on each node (``gpucluster_slurm_node_gpus_allocated``
    by ``node``, the Slurm name; sinfo's GresUsed), and the collector gives every GPU series of a node the same
    ``node`` label (its EC2 tag). Which of a node's GPUs a job holds is not known (that is a per-job mapping), but
    Slurm gives no job a GPU it has not allocated, so ``allocated - busy`` is the fewest allocated GPUs that are
    idle: the rule fires for a node where that is at least ``idle_allocated_fraction`` of its allocated GPUs
    (8 allocated, 0 or 1 busy: fires; 4 of 8 busy: quiet) for ``idle_minutes``, naming the node."""
    rules: list[Rule] = []
    span = f"{t.idle_minutes}m"
    cost = (
        "Ask the owner (squeue -t running / kubectl get pod -o wide) whether the job waits on something (data, a "
        "hung rank, a debugger); a job that holds GPUs without using them blocks others and is billed by the hour."
    )
    if "kubernetes" in schedulers:
        rules.append(
            Rule(
                "GpuAllocatedIdleKubernetes",
                f'{s.GPU_UTIL}{{pod!="",{EXPORTER_POD}}} < {t.idle_util_percent}',
                span,
                "warning",
                f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}} given to pod {{{{ $labels.namespace }}}}/"
                f"{{{{ $labels.pod }}}} has been idle for {t.idle_minutes} min",
                cost,
            )
        )
    if "slurm" in schedulers:
        allocated = f"max by (node) ({s.SLURM_NODE_GPUS})"
        # busy GPUs per node; a node whose GPUs all idle has no "busy" series, so it counts 0 (its GPUs' count × 0)
        busy = (
            f'(count by (node) ({s.GPU_UTIL}{{node!=""}} >= {t.idle_util_percent}) '
            f'or count by (node) ({s.GPU_UTIL}{{node!=""}}) * 0)'
        )
        rules.append(
            Rule(
                "GpuAllocatedIdleSlurm",
                f"({allocated} - on (node) {busy}) >= on (node) ({t.idle_allocated_fraction:g} * {allocated} > 0)",
                span,
                "warning",
                f"Slurm node {{{{ $labels.node }}}} has had at least {{{{ $value }}}} allocated GPUs under "
                f"{t.idle_util_percent:g} % for {t.idle_minutes} min",
                "Find the job with squeue -w <node> and ask its owner whether it waits on something (data, a hung "
                "rank, a debugger); a job that holds GPUs without using them blocks others and is billed by the hour.",
            )
        )
    return rules


def slurm_rules(t: AlertThresholds, head: str) -> list[Rule]:
    """The Slurm side: the agent, the health drains, the head node and its daemons. ``head`` selects the head
    node's node-exporter series (a PromQL label matcher list, e.g. ``role="head"``)."""
    rules = [
        Rule(
            "SlurmNodesDrainedByHealthCheck",
            f'sum by (check, action) ({s.SLURM_UNAVAILABLE}{{check!="other"}}) > 0',
            "0m",
            "warning",
            "{{ $value }} Slurm nodes are drained by gpucluster's health check '{{ $labels.check }}' ({{ $labels.action }})",
            "sinfo -R shows each node's failed check; the quarantine reboots or replaces them by itself. Resume a "
            "node (scontrol update nodename=<node> state=resume) only after its check passes.",
        ),
        Rule(
            "NodeLaunchFailuresRepeated",
            f"{s.BOOT_FAILURES} >= {t.launch_failures}",
            "0m",
            "warning",
            "Node group {{ $labels.group }} has {{ $value }} failed launches in a row (protected mode at the configured limit)",
            "Read the agent's log on the head node (journalctl -u gpucluster-agent): capacity errors fail over "
            "by themselves; quota, IAM, AMI or launch template errors need a fix in the account or the stack.",
        ),
        Rule(
            "NodeGroupProtectedMode",
            f"{s.PROTECTED} > 0",
            "0m",
            "critical",
            "Node group {{ $labels.group }} is in protected mode: no more launches",
            "Launches failed repeatedly, so the agent stopped trying. Fix the cause in the agent's log; the next "
            "successful launch, or an operator's `gpucluster-agent clear-protect <group>`, ends protected mode.",
        ),
        Rule(
            "RepairBrakeTripped",
            f"{s.REPAIR_BRAKE} > 0",
            "0m",
            "warning",
            "Node group {{ $labels.group }}'s repair brake is on: automatic repairs stopped",
            "Too many nodes failed at once, which points at a shared cause (an AMI, a driver, the fabric) rather "
            "than bad hardware: read the health verdicts before replacing anything.",
        ),
        Rule(
            "HeadNodeDiskFull",
            f'node_filesystem_avail_bytes{{{head},mountpoint="/"}} / node_filesystem_size_bytes{{{head},mountpoint="/"}}'
            f" < {t.head_disk_free_fraction}",
            "5m",
            "critical",
            f"The head node's root file system has less than {t.head_disk_free_fraction:.0%} free",
            "slurmctld stops saving state when the disk fills: find what grew (du -xh / | sort -h | tail), rotate "
            "or delete logs, or grow the volume.",
        ),
        Rule(
            "HeadNodeMemoryLow",
            f"node_memory_MemAvailable_bytes{{{head}}} / node_memory_MemTotal_bytes{{{head}}} < {t.head_memory_free_fraction}",
            "5m",
            "warning",
            f"The head node has less than {t.head_memory_free_fraction:.0%} memory available",
            "Find the process (ps aux --sort=-rss | head); slurmctld growing means many queued jobs: use a "
            "larger head node instance type.",
        ),
        Rule(
            "SlurmctldDown",
            f'({s.COLLECTOR_OK}{{collector="slurm"}} == 0) or '
            f'({s.UNIT_STATE}{{{head},name="slurmctld.service",state="active"}} == 0)',
            "2m",
            "critical",
            "slurmctld does not answer on the head node (sinfo fails, or its unit is not active)",
            "systemctl status slurmctld; journalctl -u slurmctld -n 100 on the head node; restart it once the "
            "cause is fixed (no job is lost: running jobs continue, slurmctld reloads its state).",
        ),
        Rule(
            "SlurmdbdDown",
            f'{s.UNIT_STATE}{{{head},name="slurmdbd.service",state="active"}} == 0',
            "2m",
            "critical",
            "slurmdbd is not running on the head node",
            "Accounting records queue in slurmctld until it returns: systemctl status slurmdbd mariadb; "
            "journalctl -u slurmdbd -n 100; restart it once the database answers.",
        ),
    ]
    return rules


def collection_rules() -> list[Rule]:
    return [
        Rule(
            "ScrapeTargetDown",
            "up == 0",
            "10m",
            "warning",
            "{{ $labels.job }} target {{ $labels.instance }} has not answered for 10 min",
            "Its exporter or the node is down: check the node's state in the scheduler and the exporter's "
            "service (systemctl status on a Slurm node; the pod on EKS).",
        ),
    ]


def groups(
    cluster_name: str, schedulers: Iterable[str], thresholds: AlertThresholds | None = None, head_selector: str = 'role="head"'
) -> list[dict[str, object]]:
    """The rule groups as data (the document's ``groups``)."""
    kinds = tuple(schedulers)
    bad = [k for k in kinds if k not in SCHEDULERS]
    if bad:
        raise ValueError(f"schedulers {kinds!r}: each must be one of {SCHEDULERS} (none: GPU rules only)")
    if not _NAME_RE.fullmatch(cluster_name):
        raise ValueError(f"cluster name {cluster_name!r} is not a plain name (letters, digits, '_.-')")
    t = thresholds or AlertThresholds()
    out: list[tuple[str, list[Rule]]] = [("gpu-health", gpu_rules(t)), ("gpu-allocation", idle_rules(t, kinds))]
    if "slurm" in kinds:
        out.append(("slurm", slurm_rules(t, head_selector)))
    out.append(("collection", collection_rules()))
    return [{"name": f"gpucluster-{name}", "rules": [r.document(cluster_name) for r in rules]} for name, rules in out]


def rule_groups(
    cluster_name: str, schedulers: Iterable[str], thresholds: AlertThresholds | None = None, head_selector: str = 'role="head"'
) -> str:
    """The Prometheus rules YAML document for ``cluster_name``. ``schedulers``: ``slurm`` and/or ``kubernetes``
    (none, for plain node groups: the GPU health and collection rules only)."""
    doc = {"groups": groups(cluster_name, schedulers, thresholds, head_selector)}
    return f"# gpucluster alert rules for cluster {cluster_name}; generated, do not edit\n{to_yaml(doc)}\n"


def cluster_schedulers(cluster: ResolvedCluster) -> tuple[str, ...]:
    """The schedulers a resolved cluster runs (``slurm``, ``kubernetes``)."""
    return tuple(kind for kind, present in (("slurm", cluster.slurm), ("kubernetes", cluster.kubernetes)) if present)
