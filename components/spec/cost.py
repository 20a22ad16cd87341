"""What the cluster costs per hour and draws in power, from the catalog's list prices and estimates.

Figures are planning estimates (see ``data/instance_extras.json`` for their sources), shown in the
plan at the desired size and at the maximum size of each node group.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.spec.catalog import Catalog
from components.spec.cluster import ClusterSpec


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

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.usd_per_node_hour is None else round(self.usd_per_node_hour * self.desired, 2)

    @property
    def usd_per_hour_max(self) -> float | None:
        return None if self.usd_per_node_hour is None else round(self.usd_per_node_hour * self.maximum, 2)

    @property
    def kw(self) -> float | None:
        return None if self.kw_per_node is None else round(self.kw_per_node * self.desired, 1)

    @property
    def kw_max(self) -> float | None:
        return None if self.kw_per_node is None else round(self.kw_per_node * self.maximum, 1)


@dataclass(frozen=True)
class Estimate:
    groups: tuple[GroupEstimate, ...]

    def _total(self, attr: str) -> float | None:
        values = [getattr(g, attr) for g in self.groups]
        return None if any(v is None for v in values) else round(sum(values), 2)

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
            "nodeGroups": [
                {
                    "nodeGroup": g.node_group,
                    "instanceType": g.instance_type,
                    "desired": g.desired,
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


def estimate(spec: ClusterSpec, catalog: Catalog) -> Estimate:
    """Cost and power of the node groups of a resolved spec."""
    groups = []
    for g in spec.node_groups:
        facts = catalog[g.instance_type]
        if g.price_per_hour is not None:
            price, source = g.price_per_hour, "pricePerHour"
        elif g.capacity.type == "spot":
            price, source = facts.on_demand_usd_per_hour, "on-demand list price (spot is usually lower)"
        else:
            price, source = facts.on_demand_usd_per_hour, "on-demand list price, us-east-1"
        groups.append(
            GroupEstimate(
                node_group=g.name,
                instance_type=g.instance_type,
                desired=g.desired_size or 0,
                maximum=g.max_size,
                usd_per_node_hour=price,
                price_source=source if price is not None else "unknown: set pricePerHour",
                kw_per_node=facts.estimated_power_kw,
                accelerators_per_node=facts.accelerator_count,
            )
        )
    return Estimate(tuple(groups))
