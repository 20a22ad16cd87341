"""Size an FSx for Lustre file system from the workload, and show the arithmetic.

Facts (FSx for Lustre user guide: "Performance", "Using EFA-enabled file systems", "SSD storage
options"; ParallelCluster's FsxStorageCapacityValidator):

* Throughput = storage capacity (TiB) × throughput tier (MB/s per TiB). FSx counts 1.2 TiB as
  1200 GiB, so delivered MB/s = capacity GiB / 1000 × tier.
* Tiers: PERSISTENT_2 125/250/500/1000, PERSISTENT_1 50/100/200, SCRATCH_2 200 (baseline).
* Capacity: 1200 GiB, then multiples of 2400 GiB; EFA-enabled file systems grow in steps of
  4800/9600/19200/38400 GiB for the 1000/500/250/125 tiers.
* Metadata IOPS (PERSISTENT_2): 1500, 3000, 6000, 12000, then multiples of 12000 up to 192000.
* Per-client throughput: ~100 Gbps without EFA, 700 Gbps with EFA, 1200 Gbps with EFA + GPUDirect
  Storage (GDS clients: P5, P5e, P5en, P6-B200).
* Prices are us-east-1 list prices per GB-month (FSx pricing page), planning estimates only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpucluster.config.storage import LustreSpec, WorkloadSpec
from gpucluster.facts.catalog import InstanceFacts

TIERS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_2": (125, 250, 500, 1000),
    "PERSISTENT_1": (50, 100, 200),
    "SCRATCH_2": (200,),
}
FIRST_STEP_GIB = 1200
STEP_GIB = 2400
EFA_STEP_GIB = {1000: 4800, 500: 9600, 250: 19200, 125: 38400}
METADATA_IOPS: tuple[int, ...] = (1500, 3000, 6000, 12000, *range(24000, 192001, 12000))
MAX_DATA_REPOSITORIES = 8
MB_PER_GIB = 1073.741824  # 2**30 bytes in MB (10**6 bytes)
GBPS_TO_MBPS = 125  # 1 Gbit/s = 125 MB/s
CLIENT_LIMIT_GBPS = {"plain": 100, "efa": 700, "efa+gds": 1200}
USD_PER_GB_MONTH: dict[str, dict[int, float]] = {
    "PERSISTENT_2": {125: 0.145, 250: 0.21, 500: 0.34, 1000: 0.60},
    "PERSISTENT_1": {50: 0.14, 100: 0.195, 200: 0.29},
    "SCRATCH_2": {200: 0.14},
}


def round_up_capacity(gib: float, tier: int, efa: bool) -> int:
    """The smallest valid capacity (GiB) that holds ``gib``."""
    if efa:
        step = EFA_STEP_GIB[tier]
        return max(step, math.ceil(gib / step) * step)
    if gib <= FIRST_STEP_GIB:
        return FIRST_STEP_GIB
    return math.ceil(gib / STEP_GIB) * STEP_GIB


def valid_capacity(gib: int, tier: int | None, efa: bool) -> bool:
    if efa and tier in EFA_STEP_GIB:
        return gib > 0 and gib % EFA_STEP_GIB[tier] == 0
    return gib == FIRST_STEP_GIB or (gib > 0 and gib % STEP_GIB == 0)


def nearest_capacities(gib: int, tier: int | None, efa: bool) -> tuple[int, int]:
    """Valid capacities just below and above ``gib`` (below is 0 when there is none)."""
    use_efa = efa and tier in EFA_STEP_GIB
    above = round_up_capacity(gib, tier or 1000, use_efa)
    if use_efa:
        step = EFA_STEP_GIB[tier or 1000]
        return (above - step if above > step else 0), above
    if above <= FIRST_STEP_GIB:
        return 0, above
    return (FIRST_STEP_GIB if above == STEP_GIB else above - STEP_GIB), above


def delivered_mbps(capacity_gib: int, tier: int) -> float:
    return capacity_gib / 1000 * tier


def metadata_iops_for(ops_per_second: int) -> int | None:
    """The smallest valid metadata IOPS setting that serves ``ops_per_second`` (None: above the max)."""
    return next((v for v in METADATA_IOPS if v >= ops_per_second), None)


@dataclass(frozen=True)
class Mounter:
    """A node group that mounts the file system, as the sizing sees it."""

    name: str
    facts: InstanceFacts
    nodes: int
    efa: bool

    @property
    def accelerators(self) -> int:
        return self.facts.accelerator_count * self.nodes


@dataclass(frozen=True)
class TierOption:
    tier: int
    capacity_gib: int
    delivered_mbps: float
    usd_per_month: float | None
    meets: bool


@dataclass(frozen=True)
class ClientCheck:
    node_group: str
    instance_type: str
    client: str  # plain | efa | efa+gds
    share_mbps: float
    limit_mbps: float

    @property
    def capped(self) -> bool:
        return self.share_mbps > self.limit_mbps


@dataclass(frozen=True)
class Sizing:
    deployment_type: str
    efa: bool
    gpus: int
    read_mb_per_gpu: float
    read_mbps: float
    checkpoint_gib: float
    checkpoint_seconds: float
    checkpoint_mbps: float
    dataset_gib: float
    checkpoints_kept: int
    free_fraction: float
    data_gib: float
    options: tuple[TierOption, ...]
    chosen: TierOption
    metadata_iops: int | None
    clients: tuple[ClientCheck, ...] = field(default=())

    @property
    def required_mbps(self) -> float:
        return max(self.read_mbps, self.checkpoint_mbps)

    def lines(self) -> list[str]:
        n = lambda v: f"{v:,.0f}"  # noqa: E731
        out = [
            f"FSx for Lustre {self.deployment_type}{' (EFA-enabled)' if self.efa else ''} sized for {self.gpus} accelerators:",
            f"  read        {self.gpus} × {n(self.read_mb_per_gpu)} MB/s per GPU = {n(self.read_mbps)} MB/s",
            f"  checkpoint  {n(self.checkpoint_gib)} GiB in {n(self.checkpoint_seconds)} s = {n(self.checkpoint_mbps)} MB/s",
            f"  required    max(read, checkpoint) = {n(self.required_mbps)} MB/s",
            f"  capacity    ({n(self.dataset_gib)} GiB data + {self.checkpoints_kept} × {n(self.checkpoint_gib)} GiB checkpoints)"
            f" / (1 − {self.free_fraction:g} free) = {n(self.data_gib)} GiB",
            "  tier MB/s/TiB   capacity GiB   delivers MB/s   $/month (list)",
        ]
        for o in self.options:
            mark = "  ← chosen" if o == self.chosen else ("" if o.meets else "  (too slow)")
            cost = "unknown" if o.usd_per_month is None else f"${n(o.usd_per_month)}"
            out.append(f"  {o.tier:>13}   {n(o.capacity_gib):>12}   {n(o.delivered_mbps):>13}   {cost:>14}{mark}")
        verdict = "meets" if self.chosen.meets else "DOES NOT MEET"
        out.append(
            f"  delivered   {n(self.chosen.delivered_mbps)} MB/s {verdict} the required {n(self.required_mbps)} MB/s;"
            f" {n(self.chosen.capacity_gib)} GiB {'≥' if self.chosen.capacity_gib >= self.data_gib else '<'} {n(self.data_gib)} GiB needed"
        )
        out.append(f"  metadata    {'automatic' if self.metadata_iops is None else f'{n(self.metadata_iops)} IOPS'}")
        for c in self.clients:
            state = "CAPPED" if c.capped else "ok"
            out.append(
                f"  per client  {c.node_group} ({c.instance_type}, {c.client}): share {n(c.share_mbps)} MB/s,"
                f" client limit {n(c.limit_mbps)} MB/s — {state}"
            )
        return out

    def as_dict(self) -> dict[str, object]:
        return {
            "requiredMBps": round(self.required_mbps, 1),
            "readMBps": round(self.read_mbps, 1),
            "checkpointMBps": round(self.checkpoint_mbps, 1),
            "dataGiB": round(self.data_gib, 1),
            "tier": self.chosen.tier,
            "capacityGiB": self.chosen.capacity_gib,
            "deliveredMBps": round(self.chosen.delivered_mbps, 1),
            "usdPerMonth": self.chosen.usd_per_month,
            "meets": self.chosen.meets,
            "metadataIops": self.metadata_iops,
            "lines": self.lines(),
        }


def client_kind(fs_efa: bool, gds: bool, mounter: Mounter) -> str:
    if fs_efa and mounter.efa and mounter.facts.efa_supported:
        return "efa+gds" if gds and mounter.facts.gds_supported else "efa"
    return "plain"


def size_lustre(workload: WorkloadSpec, lustre: LustreSpec, mounters: list[Mounter]) -> Sizing:
    """Pick tier, capacity and metadata IOPS for ``workload``; fixed choices in ``lustre`` are kept."""
    gpus = workload.gpu_count or sum(m.accelerators for m in mounters)
    read = gpus * workload.read_mb_per_second_per_gpu
    checkpoint = workload.checkpoint_size_gib * MB_PER_GIB / workload.checkpoint_write_seconds
    required = max(read, checkpoint)
    dataset_gib = workload.dataset_size_tib * 1024
    data_gib = (dataset_gib + workload.checkpoints_kept * workload.checkpoint_size_gib) / (1 - workload.free_space_fraction)
    efa = lustre.enable_efa
    tiers = (lustre.throughput_per_unit_storage,) if lustre.throughput_per_unit_storage else TIERS[lustre.deployment_type]
    prices = USD_PER_GB_MONTH.get(lustre.deployment_type, {})
    options = []
    for tier in tiers:
        if lustre.storage_capacity_gib:
            capacity = lustre.storage_capacity_gib
        else:
            capacity = round_up_capacity(max(data_gib, required / tier * 1000), tier, efa and tier in EFA_STEP_GIB)
        delivered = delivered_mbps(capacity, tier)
        price = prices.get(tier)
        options.append(
            TierOption(
                tier=tier,
                capacity_gib=capacity,
                delivered_mbps=delivered,
                usd_per_month=None if price is None else round(capacity * price, 2),
                meets=delivered >= required and capacity >= data_gib,
            )
        )
    meeting = [o for o in options if o.meets]
    pool = meeting or options
    chosen = min(pool, key=lambda o: (o.usd_per_month if o.usd_per_month is not None else math.inf, -o.tier))
    if lustre.metadata_iops is not None:
        metadata = lustre.metadata_iops
    elif workload.metadata_operations_per_second and lustre.deployment_type == "PERSISTENT_2":
        metadata = metadata_iops_for(workload.metadata_operations_per_second)
    else:
        metadata = None
    total_acc = max(1, sum(m.accelerators for m in mounters))
    clients = []
    for m in mounters:
        kind = client_kind(efa, lustre.enable_gpudirect_storage, m)
        per_node_share = chosen.delivered_mbps * m.facts.accelerator_count / total_acc if m.facts.accelerator_count else 0.0
        clients.append(ClientCheck(m.name, m.facts.instance_type, kind, per_node_share, CLIENT_LIMIT_GBPS[kind] * GBPS_TO_MBPS))
    return Sizing(
        deployment_type=lustre.deployment_type,
        efa=efa,
        gpus=gpus,
        read_mb_per_gpu=workload.read_mb_per_second_per_gpu,
        read_mbps=read,
        checkpoint_gib=workload.checkpoint_size_gib,
        checkpoint_seconds=workload.checkpoint_write_seconds,
        checkpoint_mbps=checkpoint,
        dataset_gib=dataset_gib,
        checkpoints_kept=workload.checkpoints_kept,
        free_fraction=workload.free_space_fraction,
        data_gib=data_gib,
        options=tuple(options),
        chosen=chosen,
        metadata_iops=metadata,
        clients=tuple(clients),
    )
