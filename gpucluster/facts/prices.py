"""EC2 prices per region, instance type and capacity type, read from ``data/prices.json``.

The file holds only figures someone recorded, each with its source and date (hand-entered list prices,
or what ``gpucluster catalog refresh-prices`` read from AWS's Price List and spot price history). A
cost estimate asks :meth:`PriceBook.quote` for the price of one instance type in one region; where the
file has no figure for that region or capacity type the quote falls back to the nearest one it has
(the region's on-demand price for spot, else us-east-1 on-demand) and its ``source`` says so and how to
fill the gap, so a plan never presents a borrowed price as the real one.

The other services a stack creates (FSx for OpenZFS, the network load balancer, Secrets Manager, AMP, CloudWatch
Logs, Managed Grafana) are priced from the file's ``Services`` section (:meth:`PriceBook.service`), and where they
bill by use, the usage the estimate assumes is the file's ``Usage`` section (:meth:`PriceBook.usage`), each figure
with why, so the plan can print the assumption beside its price.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRICES_FILE = Path(__file__).parent / "data" / "prices.json"
REFERENCE_REGION = "us-east-1"
"""The region whose on-demand prices every catalog type has; the fallback for the others."""

ON_DEMAND, SPOT = "OnDemand", "Spot"


def refresh_hint(region: str) -> str:
    return f"run gpucluster catalog refresh-prices --region {region}"


@dataclass(frozen=True)
class Quote:
    """One price the estimate uses: USD per instance-hour (``None``: no figure at all), where it came from."""

    usd_per_hour: float | None
    source: str
    date: str | None = None
    exact: bool = True
    """False when the price is borrowed from another region or capacity type."""


@dataclass(frozen=True)
class ServicePrice:
    """One recorded price of a service other than EC2 (``Services`` in the file): its entry, and a note when it was
    borrowed from us-east-1."""

    entry: Mapping[str, Any]
    note: str = ""

    @property
    def usd(self) -> float:
        return float(self.entry["Usd"])

    @property
    def source(self) -> str:
        return f"{self.entry.get('Source', '')}{self.note}"

    @property
    def date(self) -> str | None:
        return self.entry.get("Date")


class PriceBook:
    """The recorded prices: ``{"Ec2": {region: {instance type: {"OnDemand"|"Spot": entry}}}}``."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document

    def entry(self, region: str, instance_type: str, kind: str) -> Mapping[str, Any] | None:
        """The recorded ``OnDemand`` or ``Spot`` entry, or ``None``."""
        found = self.document.get("Ec2", {}).get(region, {}).get(instance_type, {}).get(kind)
        return found if found and found.get("UsdPerHour") is not None else None

    def services(self, region: str) -> tuple[Mapping[str, Any], str]:
        """The ``Services`` prices of ``region``, us-east-1's for any key the region lacks, and a note saying so."""
        prices = self.document.get("Services", {})
        here, reference = prices.get(region, {}), prices.get(REFERENCE_REGION, {})
        borrowed = region != REFERENCE_REGION and any(k not in here for k in reference)
        note = f"; us-east-1 prices where the catalog has no {region} figure" if borrowed else ""
        return {**reference, **here}, note

    def service(self, region: str, key: str) -> ServicePrice | None:
        """The recorded price ``key`` of ``Services`` (``FsxOpenZfsStorageGbMonth``, ``NlbHour`` …) for ``region``,
        us-east-1's where the region has none; ``None`` where neither has it."""
        prices = self.document.get("Services", {})
        found, note = prices.get(region, {}).get(key), ""
        if found is None and region != REFERENCE_REGION:
            found, note = prices.get(REFERENCE_REGION, {}).get(key), f"; us-east-1 price, the catalog has no {region} figure"
        if not found or (found.get("Usd") is None and found.get("Tiers") is None):
            return None
        return ServicePrice(found, note)

    def usage(self, key: str) -> float:
        """The usage the estimate assumes for ``key`` of ``Usage`` (``LogGbPerNodeMonth`` …); the committed file's
        where this document has none (a price file of an older version, or one a test made)."""
        found = self.document.get("Usage", {}).get(key) or load_prices().document["Usage"][key]
        return float(found["Value"])

    def on_demand(self, instance_type: str, region: str = REFERENCE_REGION) -> float | None:
        e = self.entry(region, instance_type, ON_DEMAND)
        return None if e is None else float(e["UsdPerHour"])

    def quote(self, instance_type: str, region: str, capacity: str = "on-demand") -> Quote:
        """The price of ``instance_type`` in ``region`` for a capacity type (``spot`` or anything billed on demand).

        Reservations and capacity blocks are quoted on demand: the caller says what that means for them.
        """
        if capacity == "spot":
            spot = self.entry(region, instance_type, SPOT)
            if spot is not None:
                return Quote(float(spot["UsdPerHour"]), f"{region} spot: {spot.get('Source', '')}", spot.get("Date"))
            return self._on_demand_quote(instance_type, region, missing=f"no {region} spot price in the catalog")
        return self._on_demand_quote(instance_type, region)

    def _on_demand_quote(self, instance_type: str, region: str, missing: str = "") -> Quote:
        here = self.entry(region, instance_type, ON_DEMAND)
        if here is not None and not missing:
            return Quote(float(here["UsdPerHour"]), f"{region} on-demand: {here.get('Source', '')}", here.get("Date"))
        if here is not None:
            return Quote(
                float(here["UsdPerHour"]), f"{region} on-demand ({missing}; {refresh_hint(region)})", here.get("Date"), False
            )
        reference = self.entry(REFERENCE_REGION, instance_type, ON_DEMAND)
        if reference is not None:
            if region == REFERENCE_REGION:
                gap = missing
            else:
                gap = f"no {region} {'spot or on-demand ' if missing else ''}price in the catalog"
            note = f" ({gap}; {refresh_hint(region)})" if gap else f": {reference.get('Source', '')}"
            return Quote(float(reference["UsdPerHour"]), f"{REFERENCE_REGION} on-demand{note}", reference.get("Date"), not gap)
        return Quote(None, f"no price for {instance_type} in the catalog; {refresh_hint(region)}", None, exact=False)


@functools.lru_cache(maxsize=4)
def load_prices(path: Path = PRICES_FILE) -> PriceBook:
    return PriceBook(json.loads(Path(path).read_text()) if Path(path).exists() else {})
