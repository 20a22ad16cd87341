"""What the cluster costs per hour and per month and draws in power, from the catalog's prices and estimates.

Figures are planning estimates shown in the plan at the desired size and at the maximum size of each
node group, per hour and per month of 730 hours. Node prices come from ``facts/data/prices.json`` for
the stack's region and each group's capacity type (:class:`~gpucluster.facts.prices.PriceBook`): spot
groups at the region's recorded spot price, on-demand groups, reservations and capacity blocks at the
on-demand price (an On-Demand Capacity Reservation bills at that rate whether used or not; a capacity
block is paid up front at its own rate, so its figure is only a stand-in). Where the file has no figure
for the region or capacity type, the estimate borrows the nearest one and its source says so.
Power is the catalog's estimate per node (``instance_extras.json``).

A line the price file has no figure for stays in the estimate, unpriced, and names the override that would price it
(a node group's ``pricePerHour``, any other line's ``estimate.pricePerHour.<key>``); the totals are the sum of the
priced lines, and :attr:`Estimate.unpriced` names the lines left out of them, so a plan never shows a bare "unknown"
for the whole cluster because one line has no price.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import EllipsisType
from typing import Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.prices import REFERENCE_REGION, PriceBook, Quote, load_prices
from gpucluster.resolve.cost.hybrid import hybrid_link_parts
from gpucluster.resolve.cost.people import slurm_people_parts
from gpucluster.resolve.cost.services import (
    INTERFACE_ENDPOINT_USD_PER_HOUR_PER_ZONE,
    NAT_GATEWAY_USD_PER_HOUR,
    eks_parts,
    slurm_service_parts,
    us_east_1,
)
from gpucluster.resolve.monitoring import monitoring_parts


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
    capacity_type: str = "on-demand"
    price_date: str | None = None
    """When the price was recorded (``None`` for a price set in the config or none at all)."""

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
    def usd_per_month(self) -> float | None:
        return _monthly(self.usd_per_node_hour, self.billed_now)

    @property
    def usd_per_month_max(self) -> float | None:
        return _monthly(self.usd_per_node_hour, max(self.maximum, self.reserved))

    @property
    def kw(self) -> float | None:
        return None if self.kw_per_node is None else round(self.kw_per_node * self.desired, 1)

    @property
    def kw_max(self) -> float | None:
        return None if self.kw_per_node is None else round(self.kw_per_node * self.maximum, 1)


HOURS_PER_MONTH = 730
"""The month of the estimate (AWS's pricing pages and calculator use 730 hours)."""


def _monthly(usd_per_hour: float | None, count: int = 1) -> float | None:
    return None if usd_per_hour is None else round(usd_per_hour * count * HOURS_PER_MONTH, 2)


@dataclass(frozen=True)
class LineItem:
    """A cost beside the GPU node groups: fixed, or (monitoring) following their size."""

    name: str
    usd_per_hour: float | None
    kw: float
    source: str
    key: str = ""
    """A stable name for the item (``nat-gateways``, ``fsx-lustre`` …): ``name`` carries counts and sizes; the key
    of its ``estimate.pricePerHour`` override."""
    price_date: str | None = None
    usd_per_hour_at_max: float | EllipsisType | None = ...
    """USD per hour with every node group at its maximum size; ``...``: the same as now (a fixed cost)."""

    @property
    def usd_per_hour_max(self) -> float | None:
        return self.usd_per_hour if isinstance(self.usd_per_hour_at_max, EllipsisType) else self.usd_per_hour_at_max

    @property
    def usd_per_month(self) -> float | None:
        return _monthly(self.usd_per_hour)

    @property
    def usd_per_month_max(self) -> float | None:
        return _monthly(self.usd_per_hour_max)


@dataclass(frozen=True)
class Estimate:
    groups: tuple[GroupEstimate, ...]
    fixed: tuple[LineItem, ...] = ()
    region: str = REFERENCE_REGION

    def _total(self, attr: str) -> float | None:
        """The sum of the priced lines (dollars) or of every line (kW: unknown where a line's power is)."""
        values = [getattr(g, attr) for g in self.groups]
        fixed = [i.kw if attr.startswith("kw") else getattr(i, attr) for i in self.fixed]
        if attr.startswith("kw") and any(v is None for v in [*values, *fixed]):
            return None
        return round(sum(v for v in [*values, *fixed] if v is not None), 2)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """The lines without a price (node groups by name, then other lines by name): left out of the totals."""
        groups = tuple(g.node_group for g in self.groups if g.usd_per_node_hour is None)
        return groups + tuple(i.name for i in self.fixed if i.usd_per_hour is None)

    @property
    def usd_per_hour(self) -> float | None:
        return self._total("usd_per_hour")

    @property
    def usd_per_hour_max(self) -> float | None:
        return self._total("usd_per_hour_max")

    @property
    def usd_per_month(self) -> float | None:
        return self._total("usd_per_month")

    @property
    def usd_per_month_max(self) -> float | None:
        return self._total("usd_per_month_max")

    @property
    def kw(self) -> float | None:
        return self._total("kw")

    @property
    def kw_max(self) -> float | None:
        return self._total("kw_max")

    def as_dict(self) -> dict[str, object]:
        return {
            "region": self.region,
            "hoursPerMonth": HOURS_PER_MONTH,
            "usdPerHour": self.usd_per_hour,
            "usdPerHourAtMax": self.usd_per_hour_max,
            "usdPerMonth": self.usd_per_month,
            "usdPerMonthAtMax": self.usd_per_month_max,
            "kw": self.kw,
            "kwAtMax": self.kw_max,
            "unpriced": list(self.unpriced),
            "fixed": [
                {
                    "key": i.key,
                    "name": i.name,
                    "usdPerHour": i.usd_per_hour,
                    "usdPerMonth": i.usd_per_month,
                    "usdPerHourAtMax": i.usd_per_hour_max,
                    "usdPerMonthAtMax": i.usd_per_month_max,
                    "kw": i.kw,
                    "source": i.source,
                    "priceDate": i.price_date,
                }
                for i in self.fixed
            ],
            "nodeGroups": [
                {
                    "nodeGroup": g.node_group,
                    "instanceType": g.instance_type,
                    "desired": g.desired,
                    "reserved": g.reserved,
                    "max": g.maximum,
                    "capacityType": g.capacity_type,
                    "usdPerNodeHour": g.usd_per_node_hour,
                    "priceSource": g.price_source,
                    "priceDate": g.price_date,
                    "usdPerHour": g.usd_per_hour,
                    "usdPerHourAtMax": g.usd_per_hour_max,
                    "usdPerMonth": g.usd_per_month,
                    "usdPerMonthAtMax": g.usd_per_month_max,
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
NULLABLE_TOTAL_KEYS = ("usdPerHour", "usdPerHourAtMax", "usdPerMonth", "usdPerMonthAtMax", "kw", "kwAtMax")
NULLABLE_GROUP_KEYS = (
    "usdPerNodeHour",
    "priceDate",
    "usdPerHour",
    "usdPerHourAtMax",
    "usdPerMonth",
    "usdPerMonthAtMax",
    "kwPerNode",
    "kw",
    "kwAtMax",
)
NULLABLE_FIXED_KEYS = ("usdPerHour", "usdPerMonth", "usdPerHourAtMax", "usdPerMonthAtMax", "priceDate")


def restore_nulls(exported: dict[str, Any]) -> dict[str, Any]:
    """An exported estimate with its unknown (``None``) figures back as explicit keys."""
    out = {**{k: None for k in NULLABLE_TOTAL_KEYS}, **exported}
    out["nodeGroups"] = [{**{k: None for k in NULLABLE_GROUP_KEYS}, **g} for g in exported.get("nodeGroups") or []]
    out["fixed"] = [{**{k: None for k in NULLABLE_FIXED_KEYS}, **f} for f in exported.get("fixed") or []]
    out.setdefault("unpriced", [])
    return out


def group_price(capacity: str, quote: Quote) -> tuple[float | None, str]:
    """The node-hour price of a group bought as ``capacity`` and what the plan says about it."""
    if capacity == "capacity-block":
        return quote.usd_per_hour, f"{quote.source}; a capacity block is paid up front at its own rate"
    if capacity == "capacity-reservation":
        return quote.usd_per_hour, f"{quote.source}; a reservation bills whether used or not"
    return quote.usd_per_hour, quote.source


def estimate(spec: ClusterSpec, catalog: Catalog, prices: PriceBook | None = None) -> Estimate:
    """Cost and power of the node groups of a resolved spec, priced for its region."""
    book = prices if prices is not None else load_prices()
    groups = []
    for i, g in enumerate(spec.node_groups):
        facts = catalog[g.instance_type]
        quote = book.quote(g.instance_type, spec.region, g.capacity.type)
        if g.price_per_hour is not None:
            price, source, date = g.price_per_hour, "pricePerHour", None
        else:
            (price, source), date = group_price(g.capacity.type, quote), quote.date
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
                capacity_type=g.capacity.type,
                price_date=date if price is not None else None,
            )
        )
    return Estimate(tuple(groups), tuple(fixed_costs(spec, catalog, book)), spec.region)


def fixed_costs(spec: ClusterSpec, catalog: Catalog, prices: PriceBook | None = None) -> list[LineItem]:
    """NAT gateways, interface endpoints, the Lustre file system, the Slurm head node, its people, secrets and image
    builds, EKS's control plane and system nodes, monitoring; each with its ``estimate.pricePerHour`` override
    applied."""
    book = prices if prices is not None else load_prices()
    overrides = spec.estimate.price_per_hour
    return [_overridden(i, overrides[i.key]) if i.key in overrides else i for i in _fixed_costs(spec, catalog, book)]


def _overridden(item: LineItem, usd: float) -> LineItem:
    return replace(item, usd_per_hour=usd, usd_per_hour_at_max=..., source=OVERRIDE_SOURCE.format(key=item.key), price_date=None)


OVERRIDE_SOURCE = "estimate.pricePerHour.{key} (set in the stack config: the same now and at max size)"


def _fixed_costs(spec: ClusterSpec, catalog: Catalog, book: PriceBook) -> list[LineItem]:
    items = network_costs(spec)
    if spec.hybrid is not None:
        for name, usd, what, key in hybrid_link_parts(spec.hybrid):
            items.append(LineItem(name, usd, 0.0, us_east_1(spec.region, what), key))
    items += lustre_costs(spec)
    items += slurm_head_costs(spec, catalog, book)
    items += [LineItem(*part) for part in slurm_people_parts(spec, catalog, book)]
    items += [LineItem(*part) for part in slurm_service_parts(spec, book)]
    items += [LineItem(*part) for part in eks_parts(spec, catalog, book)]
    if getattr(spec, "monitoring", None) is not None:
        items += [LineItem(*part) for part in monitoring_parts(spec, book, catalog)]
    return items


def network_costs(spec: ClusterSpec) -> list[LineItem]:
    """A new VPC's NAT gateways and interface endpoints."""
    region, net, zones = spec.region, spec.network, len(spec.zones)
    items: list[LineItem] = []
    if net.create_vpc and net.enable_nat_gateway:
        count = zones if net.one_nat_gateway_per_az else 1
        items.append(
            LineItem(
                f"{count} NAT gateway(s)",
                round(count * NAT_GATEWAY_USD_PER_HOUR, 3),
                0.0,
                us_east_1(region, "VPC pricing, per hour (data processed is extra)"),
                "nat-gateways",
            )
        )
    if net.create_vpc and net.interface_endpoints:
        n = len(net.interface_endpoints) * zones
        items.append(
            LineItem(
                f"{n} interface endpoint ENIs",
                round(n * INTERFACE_ENDPOINT_USD_PER_HOUR_PER_ZONE, 3),
                0.0,
                us_east_1(region, "PrivateLink pricing, per endpoint per zone"),
                "interface-endpoints",
            )
        )
    return items


def lustre_costs(spec: ClusterSpec) -> list[LineItem]:
    """A new Lustre file system, per hour (its GB-month price over 730 hours)."""
    from gpucluster.config.storage.sizing import USD_PER_GB_MONTH

    storage = spec.storage
    if storage is None or storage.lustre is None or storage.lustre.file_system_id:
        return []
    fs = storage.lustre
    price = USD_PER_GB_MONTH.get(fs.deployment_type, {}).get(fs.throughput_per_unit_storage or 0)
    usd = (
        None if price is None or fs.storage_capacity_gib is None else round(fs.storage_capacity_gib * price / HOURS_PER_MONTH, 2)
    )
    return [
        LineItem(
            f"FSx for Lustre {fs.storage_capacity_gib or '?'} GiB",
            usd,
            0.0,
            us_east_1(spec.region, "FSx pricing, per GB-month / 730"),
            "fsx-lustre",
        )
    ]


def slurm_head_costs(spec: ClusterSpec, catalog: Catalog, book: PriceBook) -> list[LineItem]:
    """The Slurm head node (none where a site's own slurmctld is the controller)."""
    slurm = getattr(spec, "slurm", None)
    hybrid = getattr(spec, "hybrid", None)
    if slurm is None or (hybrid is not None and hybrid.controller is not None):
        return []
    head = slurm.head_node
    facts = catalog.get(head.instance_type)
    quote = book.quote(head.instance_type, spec.region)
    return [
        LineItem(
            f"Slurm head node {head.instance_type}",
            quote.usd_per_hour,
            round(facts.estimated_power_kw or 0.0, 2) if facts else 0.0,
            f"{quote.source}; its EBS volumes are extra",
            "slurm-head-node",
            quote.date,
        )
    ]
