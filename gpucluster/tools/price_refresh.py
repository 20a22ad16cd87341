"""Rebuild one region's EC2 prices in ``gpucluster/facts/data/prices.json`` from AWS (``gpucluster catalog
refresh-prices --region R``).

* On-demand: the AWS Price List API (``pricing:GetProducts``, service ``AmazonEC2``), one product per
  instance type filtered to what a node group runs — Linux, shared tenancy, no pre-installed software, no
  licence, ``capacitystatus`` Used (the instance itself, not an unused reservation's hours), on-demand
  market. Each ``PriceList`` entry is a JSON document in a string; the price is the ``Hrs`` dimension of
  its ``OnDemand`` term, in USD. The Price List endpoint lives in us-east-1 whatever region is priced.
* Spot: EC2 ``DescribeSpotPriceHistory`` in the region (``Linux/UNIX``) from now: the latest price of each
  zone, and of those the **median** (what a group spread over the region's zones pays typically; the
  minimum and the zone count are kept beside it).

* Services (``Services`` in the file): the Price List's product of each service price the estimate uses that it
  can name by attributes — FSx for OpenZFS (Single-AZ 1 SSD storage, throughput, IOPS, backups), the network load
  balancer (hour, NLCU-hour), Secrets Manager (secret-month, API calls) and CloudWatch Logs (ingestion, storage) —
  picked by product family, attributes and usage type (:data:`SERVICE_PRODUCTS`). AMP and Managed Grafana are not
  in that table and keep their hand-entered figures.

The refresh replaces that region's entries for the types it priced and keeps every other region and
type, so the file grows region by region; a type AWS does not price in the region is left out and
reported, never filled in. A service price the Price List does not give (no product, or several different prices
for one) keeps its recorded entry and is reported. Each entry records its source and the date of the refresh. This
module uses boto3 and is not imported by the stack program.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.facts.prices import ON_DEMAND, PRICES_FILE, SPOT
from gpucluster.tools.catalog_refresh import CREDENTIALS_FIX, RefreshError, current_types

PRICING_REGION = "us-east-1"
PRODUCT_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "licenseModel": "No License required",
    "capacitystatus": "Used",
    "marketoption": "OnDemand",
}
SPOT_PRODUCT = "Linux/UNIX"


def _filters(instance_type: str, region: str) -> list[dict[str, str]]:
    fields = {"instanceType": instance_type, "regionCode": region, **PRODUCT_FILTERS}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def _hourly_usd(product: dict[str, Any]) -> float | None:
    """The USD per hour of a Price List product's on-demand term (``None`` if it has no hourly dimension)."""
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            if dim.get("unit") == "Hrs" and "USD" in dim.get("pricePerUnit", {}):
                return float(dim["pricePerUnit"]["USD"])
    return None


def on_demand_price(pricing: Any, instance_type: str, region: str) -> float | None:
    """The on-demand Linux price of ``instance_type`` in ``region``; ``None`` where AWS lists none."""
    prices: set[float] = set()
    skus: list[str] = []
    paginator = pricing.get_paginator("get_products")
    for page in paginator.paginate(ServiceCode="AmazonEC2", Filters=_filters(instance_type, region), FormatVersion="aws_v1"):
        for text in page.get("PriceList", []):
            product = json.loads(text)
            usd = _hourly_usd(product)
            if usd is not None and usd > 0:
                prices.add(usd)
                skus.append(str(product.get("product", {}).get("sku", "?")))
    if len(prices) > 1:
        raise RefreshError(
            f"the Price List gives {instance_type} in {region} {len(prices)} on-demand prices "
            f"({', '.join(f'${p}' for p in sorted(prices))}; SKUs {', '.join(skus)}): the filters no longer pick one product"
        )
    return prices.pop() if prices else None


@dataclass(frozen=True)
class ServiceProduct:
    """How to find one ``Services`` price in the Price List: the service, exact attributes, a usage type fragment."""

    service_code: str
    attributes: dict[str, str]
    usagetype: str = ""
    """A fragment the product's ``usagetype`` contains (``LCUUsage``); empty: any."""
    not_usagetype: str = ""
    """A fragment it must not contain (storage that is not backup storage)."""
    scale: float = 1.0
    """What the Price List's USD per unit is multiplied by to give the file's unit (per 10,000 API calls)."""


_OPENZFS = {"fileSystemType": "OpenZFS"}
_NLB = {"productFamily": "Load Balancer-Network", "locationType": "AWS Region"}
SERVICE_PRODUCTS: dict[str, ServiceProduct] = {
    "FsxOpenZfsStorageGbMonth": ServiceProduct(
        "AmazonFSx",
        {**_OPENZFS, "productFamily": "Storage", "deploymentOption": "Single-AZ", "storageType": "SSD"},
        not_usagetype="Backup",
    ),
    "FsxOpenZfsThroughputMbpsMonth": ServiceProduct(
        "AmazonFSx", {**_OPENZFS, "productFamily": "Provisioned Throughput", "deploymentOption": "Single-AZ"}
    ),
    "FsxOpenZfsIopsMonth": ServiceProduct(
        "AmazonFSx", {**_OPENZFS, "productFamily": "Provisioned IOPS", "deploymentOption": "Single-AZ"}
    ),
    "FsxOpenZfsBackupGbMonth": ServiceProduct("AmazonFSx", {**_OPENZFS, "productFamily": "Storage"}, "BackupUsage"),
    "NlbHour": ServiceProduct("AWSELB", _NLB, "LoadBalancerUsage"),
    "NlcuHour": ServiceProduct("AWSELB", _NLB, "LCUUsage"),
    "SecretMonth": ServiceProduct("AWSSecretsManager", {"productFamily": "Secret"}),
    "SecretsApi10k": ServiceProduct("AWSSecretsManager", {"productFamily": "API Request"}, scale=10_000),
    "LogsIngestionGb": ServiceProduct("AmazonCloudWatch", {"productFamily": "Data Payload"}, "-DataProcessing-Bytes"),
    "LogsStorageGbMonth": ServiceProduct("AmazonCloudWatch", {"productFamily": "Storage Snapshot"}, "-TimedStorage-ByteHrs"),
}
"""The ``Services`` prices the refresh reads from the Price List (the file's key → where to find it)."""


def _unit_prices(product: dict[str, Any]) -> list[tuple[float, str]]:
    """Each non-zero USD price of a product's on-demand terms, with its unit."""
    out = []
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = float(dim.get("pricePerUnit", {}).get("USD", 0) or 0)
            if usd > 0:
                out.append((usd, str(dim.get("unit", ""))))
    return out


def service_price(pricing: Any, key: str, region: str) -> tuple[float | None, str]:
    """The Price List's USD figure for ``Services`` key ``key`` in ``region`` (``None`` where it gives none or more
    than one) and what was found."""
    wanted = SERVICE_PRODUCTS[key]
    fields = {**wanted.attributes, "regionCode": region}
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]
    prices: set[float] = set()
    usagetypes: set[str] = set()
    for page in pricing.get_paginator("get_products").paginate(
        ServiceCode=wanted.service_code, Filters=filters, FormatVersion="aws_v1"
    ):
        for text in page.get("PriceList", []):
            product = json.loads(text)
            usagetype = str(product.get("product", {}).get("attributes", {}).get("usagetype", ""))
            if wanted.usagetype not in usagetype or (wanted.not_usagetype and wanted.not_usagetype in usagetype):
                continue
            for usd, _unit in _unit_prices(product):
                prices.add(round(usd * wanted.scale, 10))
                usagetypes.add(usagetype)
    if len(prices) == 1:
        return prices.pop(), ", ".join(sorted(usagetypes))
    if prices:
        return None, f"{len(prices)} prices ({', '.join(f'${p:g}' for p in sorted(prices))}), kept the recorded one"
    return None, "no product, kept the recorded one"


@dataclass
class ServiceRefresh:
    """What the services part of one refresh found: entries by key, and the keys it left as they were (why)."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)


def collect_services(pricing: Any, region: str, date: str) -> ServiceRefresh:
    out = ServiceRefresh()
    for key, wanted in SERVICE_PRODUCTS.items():
        usd, found = service_price(pricing, key, region)
        if usd is None:
            out.kept[key] = found
            continue
        out.entries[key] = {
            "Usd": usd,
            "Source": f"AWS Price List API (pricing:GetProducts), {wanted.service_code} {found}",
            "Date": date,
        }
    return out


def merge_services(document: dict[str, Any], region: str, refreshed: ServiceRefresh) -> dict[str, Any]:
    """``document`` with the refreshed ``Services`` prices of ``region`` replaced (each keeps its recorded unit)."""
    out = json.loads(json.dumps(document))
    here = out.setdefault("Services", {}).setdefault(region, {})
    for key, entry in refreshed.entries.items():
        unit = here.get(key, {}).get("Unit") or out["Services"].get("us-east-1", {}).get(key, {}).get("Unit")
        here[key] = {**entry, **({"Unit": unit} if unit else {})}
    if not here:
        out["Services"].pop(region)
    return out


@dataclass(frozen=True)
class SpotPrice:
    median: float
    minimum: float
    zones: int


def spot_prices(ec2: Any, instance_types: Sequence[str], now: dt.datetime) -> dict[str, SpotPrice]:
    """The median (and minimum) over zones of each zone's latest Linux spot price, per instance type."""
    latest: dict[tuple[str, str], tuple[dt.datetime, float]] = {}
    paginator = ec2.get_paginator("describe_spot_price_history")
    pages = paginator.paginate(InstanceTypes=list(instance_types), ProductDescriptions=[SPOT_PRODUCT], StartTime=now)
    for page in pages:
        for item in page.get("SpotPriceHistory", []):
            key = (item["InstanceType"], item["AvailabilityZone"])
            stamp, price = item["Timestamp"], float(item["SpotPrice"])
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, price)
    per_type: dict[str, list[float]] = {}
    for (itype, _zone), (_stamp, price) in sorted(latest.items()):
        per_type.setdefault(itype, []).append(price)
    return {t: SpotPrice(round(statistics.median(p), 6), min(p), len(p)) for t, p in per_type.items()}


@dataclass
class PriceRefresh:
    """What one refresh found: entries per type, and the types it could not price."""

    region: str
    date: str
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    no_on_demand: list[str] = field(default_factory=list)
    no_spot: list[str] = field(default_factory=list)
    services: ServiceRefresh = field(default_factory=ServiceRefresh)


def collect(pricing: Any, ec2: Any, region: str, instance_types: Sequence[str], now: dt.datetime) -> PriceRefresh:
    result = PriceRefresh(region, now.date().isoformat())
    names = sorted(set(instance_types))
    spot = spot_prices(ec2, names, now)
    for itype in names:
        entry: dict[str, Any] = {}
        usd = on_demand_price(pricing, itype, region)
        if usd is None:
            result.no_on_demand.append(itype)
        else:
            entry[ON_DEMAND] = {
                "UsdPerHour": usd,
                "Source": "AWS Price List API (pricing:GetProducts), Linux, shared tenancy, on-demand",
                "Date": result.date,
            }
        s = spot.get(itype)
        if s is None:
            result.no_spot.append(itype)
        else:
            entry[SPOT] = {
                "UsdPerHour": s.median,
                "MinUsdPerHour": s.minimum,
                "Zones": s.zones,
                "Source": f"ec2:DescribeSpotPriceHistory, Linux/UNIX, median of the latest price in {s.zones} zone(s)",
                "Date": result.date,
            }
        if entry:
            result.entries[itype] = entry
    return result


def merge(document: dict[str, Any], refreshed: PriceRefresh) -> dict[str, Any]:
    """``document`` with the refreshed region's entries for the priced types replaced; the rest kept."""
    out = json.loads(json.dumps(document))
    region = out.setdefault("Ec2", {}).setdefault(refreshed.region, {})
    for itype in {*refreshed.entries, *refreshed.no_on_demand, *refreshed.no_spot}:
        region.pop(itype, None)
    region.update(refreshed.entries)
    if not region:
        out["Ec2"].pop(refreshed.region)
    return out


def refresh_prices(
    region: str,
    *,
    instance_types: Sequence[str] | None = None,
    endpoint_url: str | None = None,
    out: Path = PRICES_FILE,
    clients: tuple[Any, Any] | None = None,
    now: dt.datetime | None = None,
) -> PriceRefresh:
    """Price ``instance_types`` (default: every type in the catalog) in ``region`` and rewrite ``out``."""
    names = list(instance_types) if instance_types else current_types()
    if not names:
        raise ValueError("no instance types to price")
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

    from gpucluster.tools.preflight import failure_reason

    when = now or dt.datetime.now(dt.timezone.utc)
    try:
        if clients is None:
            import boto3

            clients = (
                boto3.client("pricing", region_name=PRICING_REGION, endpoint_url=endpoint_url),
                boto3.client("ec2", region_name=region, endpoint_url=endpoint_url),
            )
        refreshed = collect(clients[0], clients[1], region, names, when)
        refreshed.services = collect_services(clients[0], region, refreshed.date)
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise RefreshError(f"no AWS credentials ({exc}); {CREDENTIALS_FIX}") from None
    except (ClientError, BotoCoreError) as exc:
        raise RefreshError(f"pricing {region} failed: {failure_reason(exc)}") from None
    document = json.loads(out.read_text()) if out.exists() else {}
    merged = merge_services(merge(document, refreshed), region, refreshed.services)
    out.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    return refreshed
