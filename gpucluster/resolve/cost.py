"""What the cluster costs per hour and draws in power, from the catalog's list prices and estimates.

Figures are planning estimates (see ``data/instance_extras.json`` for their sources), shown in the
plan at the desired size and at the maximum size of each node group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.facts.catalog import Catalog


@dataclass(frozen=True)
class GroupEstimate:
    node_group: str
    instance_type: str
    desired: int
    maximum: int
    usd_per_node_hour: float | None
    price_source: str
    kw_per_node: float | None
    accelerators_per_node: int
    reserved: int = 0
    """Instances billed whether they run or not (a capacity reservation or block)."""

    @property
    def billed_now(self) -> int:
        return max(self.desired, self.reserved)

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.usd_per_node_hour is None else round(self.usd_per_node_hour * self.billed_now, 2)

    @property
    def usd_per_hour_max(self) -> float | None:
        count = max(self.maximum, self.reserved)
        return None if self.usd_per_node_hour is None else round(self.usd_per_node_hour * count, 2)

    @property
    def kw(self) -> float | None:
        return None if self.kw_per_node is None else round(self.kw_per_node * self.desired, 1)

    @property
    def kw_max(self) -> float | None:
        return None if self.kw_per_node is None else round(self.kw_per_node * self.maximum, 1)


# us-east-1 list prices of the managed pieces a cluster adds (AWS pricing pages; planning figures).
NAT_GATEWAY_USD_PER_HOUR = 0.045
INTERFACE_ENDPOINT_USD_PER_HOUR_PER_ZONE = 0.01
EKS_CONTROL_PLANE_USD_PER_HOUR = 0.10
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class LineItem:
    """A fixed cost beside the GPU node groups: it does not change with their size."""

    name: str
    usd_per_hour: float | None
    kw: float
    source: str


@dataclass(frozen=True)
class Estimate:
    groups: tuple[GroupEstimate, ...]
    fixed: tuple[LineItem, ...] = ()

    def _total(self, attr: str) -> float | None:
        values = [getattr(g, attr) for g in self.groups]
        fixed = [i.kw if attr.startswith("kw") else i.usd_per_hour for i in self.fixed]
        if any(v is None for v in [*values, *fixed]):
            return None
        return round(sum(values) + sum(v for v in fixed if v is not None), 2)

    @property
    def usd_per_hour(self) -> float | None:
        return self._total("usd_per_hour")

    @property
    def usd_per_hour_max(self) -> float | None:
        return self._total("usd_per_hour_max")

    @property
    def kw(self) -> float | None:
        return self._total("kw")

    @property
    def kw_max(self) -> float | None:
        return self._total("kw_max")

    def as_dict(self) -> dict[str, object]:
        return {
            "usdPerHour": self.usd_per_hour,
            "usdPerHourAtMax": self.usd_per_hour_max,
            "kw": self.kw,
            "kwAtMax": self.kw_max,
            "fixed": [{"name": i.name, "usdPerHour": i.usd_per_hour, "kw": i.kw, "source": i.source} for i in self.fixed],
            "nodeGroups": [
                {
                    "nodeGroup": g.node_group,
                    "instanceType": g.instance_type,
                    "desired": g.desired,
                    "reserved": g.reserved,
                    "max": g.maximum,
                    "usdPerNodeHour": g.usd_per_node_hour,
                    "priceSource": g.price_source,
                    "usdPerHour": g.usd_per_hour,
                    "usdPerHourAtMax": g.usd_per_hour_max,
                    "kwPerNode": g.kw_per_node,
                    "kw": g.kw,
                    "kwAtMax": g.kw_max,
                    "acceleratorsPerNode": g.accelerators_per_node,
                }
                for g in self.groups
            ],
        }


def unknown_price_source(index: int, instance_type: str) -> str:
    """What the plan says when the catalog has no list price for a type (p5e, p5en, p6, trn2 …)."""
    return (
        f"no list price for {instance_type} in the catalog; set gpucluster:nodeGroups[{index}].pricePerHour "
        "(USD per node-hour) to include it"
    )


# Keys of :meth:`Estimate.as_dict` whose value may be ``None`` (unknown). The Pulumi runtime drops
# ``None`` values from exported maps; the plan puts them back as ``null`` so readers see every key.
NULLABLE_TOTAL_KEYS = ("usdPerHour", "usdPerHourAtMax", "kw", "kwAtMax")
NULLABLE_GROUP_KEYS = ("usdPerNodeHour", "usdPerHour", "usdPerHourAtMax", "kwPerNode", "kw", "kwAtMax")
NULLABLE_FIXED_KEYS = ("usdPerHour",)


def restore_nulls(exported: dict[str, Any]) -> dict[str, Any]:
    """An exported estimate with its unknown (``None``) figures back as explicit keys."""
    out = {**{k: None for k in NULLABLE_TOTAL_KEYS}, **exported}
    out["nodeGroups"] = [{**{k: None for k in NULLABLE_GROUP_KEYS}, **g} for g in exported.get("nodeGroups") or []]
    out["fixed"] = [{**{k: None for k in NULLABLE_FIXED_KEYS}, **f} for f in exported.get("fixed") or []]
    return out


def estimate(spec: ClusterSpec, catalog: Catalog) -> Estimate:
    """Cost and power of the node groups of a resolved spec."""
    groups = []
    for i, g in enumerate(spec.node_groups):
        facts = catalog[g.instance_type]
        if g.price_per_hour is not None:
            price, source = g.price_per_hour, "pricePerHour"
        elif g.capacity.type == "capacity-block":
            price, source = (
                facts.on_demand_usd_per_hour,
                "on-demand list price; a capacity block is paid up front at its own rate",
            )
        elif g.capacity.type == "capacity-reservation":
            price, source = facts.on_demand_usd_per_hour, "on-demand list price; a reservation bills whether used or not"
        elif g.capacity.type == "spot":
            price, source = facts.on_demand_usd_per_hour, "on-demand list price (spot is usually lower)"
        else:
            price, source = facts.on_demand_usd_per_hour, "on-demand list price, us-east-1"
        groups.append(
            GroupEstimate(
                node_group=g.name,
                instance_type=g.instance_type,
                desired=g.desired_size or 0,
                reserved=(g.capacity.instance_count or g.max_size) if g.capacity.reserved else 0,
                maximum=g.max_size,
                usd_per_node_hour=price,
                price_source=source if price is not None else unknown_price_source(i, g.instance_type),
                kw_per_node=facts.estimated_power_kw,
                accelerators_per_node=facts.accelerator_count,
            )
        )
    return Estimate(tuple(groups), tuple(fixed_costs(spec, catalog)))


def fixed_costs(spec: ClusterSpec, catalog: Catalog) -> list[LineItem]:
    """NAT gateways, interface endpoints, the Lustre file system, EKS's control plane and system nodes."""
    from gpucluster.config.sizing import USD_PER_GB_MONTH

    items: list[LineItem] = []
    net = spec.network
    zones = len(spec.zones)
    if net.create_vpc and net.enable_nat_gateway:
        count = zones if net.one_nat_gateway_per_az else 1
        items.append(
            LineItem(
                f"{count} NAT gateway(s)",
                round(count * NAT_GATEWAY_USD_PER_HOUR, 3),
                0.0,
                "VPC pricing, per hour (data processed is extra)",
            )
        )
    if net.create_vpc and net.interface_endpoints:
        n = len(net.interface_endpoints) * zones
        items.append(
            LineItem(
                f"{n} interface endpoint ENIs",
                round(n * INTERFACE_ENDPOINT_USD_PER_HOUR_PER_ZONE, 3),
                0.0,
                "PrivateLink pricing, per endpoint per zone",
            )
        )
    storage = spec.storage
    if storage is not None and storage.lustre is not None and not storage.lustre.file_system_id:
        fs = storage.lustre
        price = USD_PER_GB_MONTH.get(fs.deployment_type, {}).get(fs.throughput_per_unit_storage or 0)
        usd = (
            None
            if price is None or fs.storage_capacity_gib is None
            else round(fs.storage_capacity_gib * price / HOURS_PER_MONTH, 2)
        )
        items.append(
            LineItem(f"FSx for Lustre {fs.storage_capacity_gib or '?'} GiB", usd, 0.0, "FSx pricing, per GB-month / 730")
        )
    slurm = getattr(spec, "slurm", None)
    if slurm is not None:
        head = slurm.head_node
        facts = catalog.get(head.instance_type)
        price = facts.on_demand_usd_per_hour if facts else None
        items.append(
            LineItem(
                f"Slurm head node {head.instance_type}",
                price,
                round(facts.estimated_power_kw or 0.0, 2) if facts else 0.0,
                "on-demand list price (its EBS volumes are extra)",
            )
        )
    kubernetes = getattr(spec, "kubernetes", None)
    if kubernetes is not None:
        items.append(LineItem("EKS control plane", EKS_CONTROL_PLANE_USD_PER_HOUR, 0.0, "EKS pricing, standard support"))
        system = kubernetes.system_node_group
        facts = catalog.get(system.instance_type)
        nodes = system.effective_desired_size
        price = facts.on_demand_usd_per_hour if facts else None
        items.append(
            LineItem(
                f"EKS system nodes {nodes} × {system.instance_type}",
                None if price is None else round(price * nodes, 3),
                round((facts.estimated_power_kw or 0.0) * nodes, 2) if facts else 0.0,
                "on-demand list price",
            )
        )
    return items
