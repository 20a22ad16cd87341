"""Prices per region and capacity type (gpucluster.facts.prices) and the estimate that uses them."""

from __future__ import annotations

import json

from gpucluster.facts.prices import PRICES_FILE, PriceBook, load_prices
from gpucluster.load import load_spec
from gpucluster.resolve.cost.estimate import HOURS_PER_MONTH, estimate
from tests.conftest import group, make_config

BOOK = PriceBook(
    {
        "Ec2": {
            "us-east-1": {
                "p5.48xlarge": {"OnDemand": {"UsdPerHour": 55.04, "Source": "list", "Date": "2026-11-22"}},
                "m7i.xlarge": {"OnDemand": {"UsdPerHour": 0.2016, "Source": "list", "Date": "2026-11-22"}},
            },
            "eu-west-1": {
                "p5.48xlarge": {
                    "OnDemand": {"UsdPerHour": 61.0, "Source": "pricing:GetProducts", "Date": "2026-11-25"},
                    "Spot": {"UsdPerHour": 20.5, "Source": "median of 3 zones", "Date": "2026-11-25"},
                }
            },
        }
    }
)


def test_committed_prices_each_carry_a_source_and_a_date():
    doc = json.loads(PRICES_FILE.read_text())
    entries = [e for region in doc["Ec2"].values() for kinds in region.values() for e in kinds.values()]
    assert entries and all(e["UsdPerHour"] > 0 and e["Source"] and e["Date"] for e in entries)
    assert set(kind for region in doc["Ec2"].values() for kinds in region.values() for kind in kinds) <= {"OnDemand", "Spot"}


def test_day1_committed_service_prices_and_usage_each_say_where_they_come_from():
    """FSx for OpenZFS, the NLB, AMP (tiers, storage, query, collector), CloudWatch Logs and Secrets Manager each have
    a us-east-1 figure with its source and date; each usage the estimate assumes says why."""
    doc = json.loads(PRICES_FILE.read_text())
    services = doc["Services"]["us-east-1"]
    wanted = {
        "FsxOpenZfsStorageGbMonth", "FsxOpenZfsThroughputMbpsMonth", "FsxOpenZfsIopsMonth", "FsxOpenZfsBackupGbMonth",
        "NlbHour", "NlcuHour", "AmpIngestion", "AmpStorageGbMonth", "AmpQueryBillionSamples", "AmpCollectorHour",
        "AmpCollectedSamples", "LogsIngestionGb", "LogsStorageGbMonth", "SecretMonth", "SecretsApi10k",
    }  # fmt: skip
    assert wanted <= set(services)
    for key, entry in services.items():
        assert entry["Source"] and entry["Date"], key
        assert entry.get("Usd", 0) > 0 or entry.get("Tiers"), key
    assert [t[1] for t in services["AmpIngestion"]["Tiers"]] == [0.9, 0.35, 0.16]
    assert all(u["Value"] > 0 and len(u["Why"]) > 20 for u in doc["Usage"].values())
    bare = PriceBook({})  # an older price file: the committed usage, no service prices
    assert bare.usage("LogGbPerNodeMonth") == load_prices().usage("LogGbPerNodeMonth")
    assert bare.service("us-east-1", "NlbHour") is None


def test_a_recorded_regional_price_is_used_as_is():
    q = BOOK.quote("p5.48xlarge", "eu-west-1")
    assert (q.usd_per_hour, q.date, q.exact) == (61.0, "2026-11-25", True)
    assert q.source == "eu-west-1 on-demand: pricing:GetProducts"
    spot = BOOK.quote("p5.48xlarge", "eu-west-1", "spot")
    assert (spot.usd_per_hour, spot.exact) == (20.5, True) and spot.source.startswith("eu-west-1 spot")


def test_a_missing_region_borrows_us_east_1_and_says_how_to_fill_the_gap():
    q = BOOK.quote("p5.48xlarge", "ap-northeast-1")
    assert (q.usd_per_hour, q.exact) == (55.04, False)
    assert q.source == (
        "us-east-1 on-demand (no ap-northeast-1 price in the catalog; run gpucluster catalog refresh-prices --region ap-northeast-1)"
    )


def test_missing_spot_falls_back_to_on_demand_and_says_so():
    here = BOOK.quote("p5.48xlarge", "us-east-1", "spot")
    assert (here.usd_per_hour, here.exact) == (55.04, False)
    assert "no us-east-1 spot price in the catalog" in here.source and "refresh-prices --region us-east-1" in here.source
    away = BOOK.quote("p5.48xlarge", "us-west-2", "spot")
    assert away.usd_per_hour == 55.04 and away.source.startswith("us-east-1 on-demand (no us-west-2 spot or on-demand price")


def test_no_price_anywhere_is_unknown():
    q = BOOK.quote("p5e.48xlarge", "us-east-1")
    assert q.usd_per_hour is None and "refresh-prices" in q.source


def test_catalog_reference_price_comes_from_the_prices_file(catalog):
    assert catalog["p5.48xlarge"].on_demand_usd_per_hour == load_prices().on_demand("p5.48xlarge")


def _spec(region: str, **fields: object):
    zone = f"{region}a"
    config = make_config(group(availabilityZones=[zone], minSize=2, maxSize=4, desiredSize=2, **fields), region=region)
    return load_spec(config, stack="s").spec


def test_estimate_prices_each_group_for_the_stack_region_and_capacity(catalog):
    spot = estimate(_spec("eu-west-1", capacity={"type": "spot"}), catalog, BOOK).groups[0]
    assert spot.usd_per_node_hour == 20.5 and spot.capacity_type == "spot" and spot.price_date == "2026-11-25"
    assert spot.usd_per_hour == 41.0 and spot.usd_per_hour_max == 82.0
    assert spot.usd_per_month == round(20.5 * 2 * HOURS_PER_MONTH, 2) and spot.usd_per_month_max == round(82.0 * 730, 2)
    on_demand = estimate(_spec("eu-west-1"), catalog, BOOK).groups[0]
    assert on_demand.usd_per_node_hour == 61.0 and on_demand.price_source.startswith("eu-west-1 on-demand")
    borrowed = estimate(_spec("ap-northeast-1"), catalog, BOOK).groups[0]
    assert borrowed.usd_per_node_hour == 55.04 and "refresh-prices --region ap-northeast-1" in borrowed.price_source


def test_monthly_totals_are_the_sum_of_the_rows(catalog):
    est = estimate(_spec("eu-west-1"), catalog, BOOK)
    rows = [g.usd_per_month for g in est.groups] + [i.usd_per_month for i in est.fixed]
    assert est.usd_per_month == round(sum(r for r in rows if r is not None), 2)
    assert est.usd_per_month_max == round(
        sum(g.usd_per_month_max or 0 for g in est.groups) + sum(i.usd_per_month or 0 for i in est.fixed), 2
    )
    doc = est.as_dict()
    assert doc["region"] == "eu-west-1" and doc["hoursPerMonth"] == 730
    nat = next(i for i in doc["fixed"] if i["key"] == "nat-gateways")  # type: ignore[union-attr]
    assert nat["usdPerMonth"] == round(nat["usdPerHour"] * 730, 2) and "no eu-west-1 figure" in nat["source"]
