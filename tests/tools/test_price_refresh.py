"""``gpucluster catalog refresh-prices``: the AWS Price List and EC2 spot price history read through botocore's
Stubber (which checks every request against the real API model) with responses in the APIs' own shapes — a
Price List entry is a JSON document inside a string — and the spot call once more against moto's HTTP server.
The dollar figures in these responses are test values: nothing here is written to the committed prices file."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
from botocore.stub import ANY, Stubber

from gpucluster.facts.prices import PRICES_FILE, PriceBook
from gpucluster.tools import price_refresh
from gpucluster.tools.catalog_refresh import RefreshError
from gpucluster.tools.cli import main
from gpucluster.tools.price_refresh import (
    PRODUCT_FILTERS,
    SERVICE_PRODUCTS,
    collect,
    collect_services,
    merge,
    refresh_prices,
    spot_prices,
)

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc)


def _product(itype: str, region: str, usd: str, sku: str = "ABCDEFGH12345678") -> str:
    """One ``PriceList`` entry as GetProducts returns it: a JSON string with OnDemand and Reserved terms."""
    doc = {
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": itype,
                "regionCode": region,
                "servicecode": "AmazonEC2",
                "usagetype": "EU-BoxUsage:" + itype,
                "operation": "RunInstances",
                **PRODUCT_FILTERS,
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${usd} per On Demand Linux {itype} Instance Hour",
                            "appliesTo": [],
                            "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": usd},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2026-11-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            },
            "Reserved": {
                f"{sku}.4NA7Y494T4": {
                    "priceDimensions": {
                        f"{sku}.4NA7Y494T4.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": "1.0000000000"}},
                        f"{sku}.4NA7Y494T4.2TG2D8R56U": {"unit": "Quantity", "pricePerUnit": {"USD": "9999"}},
                    },
                    "termAttributes": {"LeaseContractLength": "1yr", "PurchaseOption": "Partial Upfront"},
                }
            },
        },
        "version": "20261120000000",
        "publicationDate": "2026-11-20T00:00:00Z",
    }
    return json.dumps(doc)


def _spot(itype: str, zone: str, usd: str, hours_ago: int) -> dict[str, object]:
    return {
        "AvailabilityZone": zone,
        "InstanceType": itype,
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": usd,
        "Timestamp": NOW - dt.timedelta(hours=hours_ago),
    }


def _service_product(service: str, usagetype: str, usd: str, unit: str, family: str = "x", sku: str = "SVC1") -> str:
    """A Price List entry of a service other than EC2: its usage type and one on-demand price dimension."""
    doc = {
        "product": {"productFamily": family, "attributes": {"usagetype": usagetype, "servicecode": service}, "sku": sku},
        "serviceCode": service,
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {"unit": unit, "pricePerUnit": {"USD": usd}}},
                    "sku": sku,
                }
            }
        },
    }
    return json.dumps(doc)


def _clients(
    products: dict[str, list[str]],
    spot: list[dict[str, object]],
    region: str = "eu-west-1",
    services: dict[str, list[str]] | None = None,
):
    pricing = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    ec2 = boto3.client("ec2", region_name=region, aws_access_key_id="x", aws_secret_access_key="x")
    p, e = Stubber(pricing), Stubber(ec2)
    e.add_response(
        "describe_spot_price_history",
        {"SpotPriceHistory": spot},
        {"InstanceTypes": sorted(products), "ProductDescriptions": ["Linux/UNIX"], "StartTime": NOW},
    )
    for itype in sorted(products):
        p.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": products[itype]},
            {"ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1"},
        )
    for key, wanted in SERVICE_PRODUCTS.items() if services is not None else ():  # after the instance types'
        p.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": (services or {}).get(key, [])},
            {"ServiceCode": wanted.service_code, "Filters": ANY, "FormatVersion": "aws_v1"},
        )
    p.activate()
    e.activate()
    return pricing, ec2, p, e


def test_collect_reads_the_on_demand_term_and_the_median_of_each_zones_latest_spot_price():
    spot = [
        _spot("p5.48xlarge", "eu-west-1a", "30.0", 0),
        _spot("p5.48xlarge", "eu-west-1a", "99.0", 5),  # older: ignored
        _spot("p5.48xlarge", "eu-west-1b", "20.0", 1),
        _spot("p5.48xlarge", "eu-west-1c", "24.0", 2),
    ]
    pricing, ec2, p, e = _clients({"p5.48xlarge": [_product("p5.48xlarge", "eu-west-1", "61.2340000000")]}, spot)
    done = collect(pricing, ec2, "eu-west-1", ["p5.48xlarge"], NOW)
    p.assert_no_pending_responses()
    e.assert_no_pending_responses()
    entry = done.entries["p5.48xlarge"]
    assert entry["OnDemand"]["UsdPerHour"] == 61.234 and entry["OnDemand"]["Date"] == "2026-11-25"
    assert (entry["Spot"]["UsdPerHour"], entry["Spot"]["MinUsdPerHour"], entry["Spot"]["Zones"]) == (24.0, 20.0, 3)
    assert "median" in entry["Spot"]["Source"] and done.no_on_demand == [] and done.no_spot == []


def test_the_request_filters_pick_linux_shared_tenancy_used_capacity_in_the_region():
    pricing, ec2, _, _ = _clients({"g6e.xlarge": []}, [])
    seen: list[dict[str, object]] = []
    pricing.meta.events.register("before-parameter-build.pricing.GetProducts", lambda params, **_: seen.append(params))
    done = collect(pricing, ec2, "eu-west-1", ["g6e.xlarge"], NOW)
    fields = {f["Field"]: f["Value"] for f in seen[0]["Filters"]}  # type: ignore[index, union-attr]
    assert fields == {"instanceType": "g6e.xlarge", "regionCode": "eu-west-1", **PRODUCT_FILTERS}
    assert all(f["Type"] == "TERM_MATCH" for f in seen[0]["Filters"])  # type: ignore[index, union-attr]
    # no product and no spot history: nothing is recorded, and both gaps are reported
    assert done.entries == {} and done.no_on_demand == ["g6e.xlarge"] and done.no_spot == ["g6e.xlarge"]


def test_two_different_products_for_one_type_are_refused_not_guessed():
    products = [
        _product("p5.48xlarge", "eu-west-1", "61.0", "SKUAAAAAAAAAAAAA"),
        _product("p5.48xlarge", "eu-west-1", "70.0", "SKUB"),
    ]
    pricing, ec2, _, _ = _clients({"p5.48xlarge": products}, [])
    with pytest.raises(RefreshError, match=r"2 on-demand prices.*SKUAAAAAAAAAAAAA"):
        collect(pricing, ec2, "eu-west-1", ["p5.48xlarge"], NOW)


def test_refresh_merges_one_region_and_keeps_the_others(tmp_path):
    out = tmp_path / "prices.json"
    kept = {"OnDemand": {"UsdPerHour": 55.04, "Source": "list", "Date": "2026-11-22"}}
    stale = {"OnDemand": {"UsdPerHour": 1.0, "Source": "old", "Date": "2020-01-01"}}
    out.write_text(json.dumps({"_about": "x", "Ec2": {"us-east-1": {"p5.48xlarge": kept}, "eu-west-1": {"g6e.xlarge": stale}}}))
    spot = [_spot("p5.48xlarge", "eu-west-1a", "21.0", 0)]
    products = {"p5.48xlarge": [_product("p5.48xlarge", "eu-west-1", "61.0")], "g6e.xlarge": []}
    pricing, ec2, _, _ = _clients(products, spot, services={})
    done = refresh_prices("eu-west-1", instance_types=["p5.48xlarge", "g6e.xlarge"], out=out, clients=(pricing, ec2), now=NOW)
    doc = json.loads(out.read_text())
    assert doc["_about"] == "x" and doc["Ec2"]["us-east-1"]["p5.48xlarge"] == kept
    assert "g6e.xlarge" not in doc["Ec2"]["eu-west-1"]  # AWS lists no price now: the stale one goes
    assert done.no_on_demand == ["g6e.xlarge"]
    book = PriceBook(doc)
    assert book.quote("p5.48xlarge", "eu-west-1").usd_per_hour == 61.0
    assert book.quote("p5.48xlarge", "eu-west-1", "spot").usd_per_hour == 21.0


def test_merge_drops_an_emptied_region():
    refreshed = price_refresh.PriceRefresh("eu-west-1", "2026-11-25", {}, ["x"], ["x"])
    assert merge({"Ec2": {"eu-west-1": {"x": {}}}}, refreshed) == {"Ec2": {}}


def test_spot_prices_over_moto_http(moto_endpoint, aws_env):
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    found = spot_prices(ec2, ["p5.48xlarge"], NOW)
    assert set(found) == {"p5.48xlarge"} and found["p5.48xlarge"].zones >= 1


def test_cli_reports_what_it_priced_and_what_it_could_not(tmp_path, monkeypatch, capsys):
    out = tmp_path / "prices.json"
    pricing, ec2, _, _ = _clients({"p5.48xlarge": [_product("p5.48xlarge", "eu-west-1", "61.0")]}, [], services={})
    real = price_refresh.refresh_prices
    monkeypatch.setattr(
        price_refresh, "refresh_prices", lambda region, **kw: real(region, **kw, out=out, clients=(pricing, ec2), now=NOW)
    )
    assert main(["catalog", "refresh-prices", "--region", "eu-west-1", "--types", "p5.48xlarge"]) == 0
    text = capsys.readouterr().out
    assert "priced 1 instance type(s) in eu-west-1 on 2026-11-25" in text and "no spot price in eu-west-1: p5.48xlarge" in text
    assert "priced 0 service price(s) in eu-west-1 from the Price List" in text
    assert "  NlbHour: no product, kept the recorded one" in text
    assert json.loads(out.read_text())["Ec2"]["eu-west-1"]["p5.48xlarge"]["OnDemand"]["UsdPerHour"] == 61.0


def test_cli_without_credentials_is_one_line(monkeypatch, capsys, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # a session another test made keeps its credentials
    assert main(["catalog", "refresh-prices", "--region", "eu-west-1", "--types", "p5.48xlarge"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpucluster catalog refresh-prices: no AWS credentials") and "Traceback" not in err


def _services_only(services: dict[str, list[str]]):
    pricing = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(pricing)
    for key, wanted in SERVICE_PRODUCTS.items():
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": services.get(key, [])},
            {"ServiceCode": wanted.service_code, "Filters": ANY, "FormatVersion": "aws_v1"},
        )
    stub.activate()
    return pricing, stub


def test_day1_service_prices_are_picked_by_family_attributes_and_usage_type():
    lb = [
        _service_product("AWSELB", "EUW1-LoadBalancerUsage", "0.0252", "Hrs"),
        _service_product("AWSELB", "EUW1-LCUUsage", "0.008", "LCU-Hrs"),
    ]
    services = {
        "NlbHour": lb,
        "NlcuHour": lb,  # the same family answers both: the usage type tells them apart
        "SecretsApi10k": [_service_product("AWSSecretsManager", "EUW1-AWSSecretsManager-APIRequest", "0.000005", "API")],
        "FsxOpenZfsStorageGbMonth": [
            _service_product("AmazonFSx", "EUW1-OpenZFS-SingleAZ-SSD-Storage", "0.099", "GB-Mo"),
            _service_product("AmazonFSx", "EUW1-OpenZFS-BackupUsage", "0.055", "GB-Mo"),  # a backup: not storage
        ],
    }
    pricing, stub = _services_only(services)
    seen: list[dict[str, object]] = []
    pricing.meta.events.register("before-parameter-build.pricing.GetProducts", lambda params, **_: seen.append(params))
    done = collect_services(pricing, "eu-west-1", "2026-12-07")
    stub.assert_no_pending_responses()
    assert done.entries["NlbHour"]["Usd"] == 0.0252 and done.entries["NlcuHour"]["Usd"] == 0.008
    assert done.entries["SecretsApi10k"]["Usd"] == pytest.approx(0.05)  # per request × 10,000
    assert done.entries["FsxOpenZfsStorageGbMonth"]["Usd"] == 0.099
    assert done.entries["NlbHour"]["Source"] == "AWS Price List API (pricing:GetProducts), AWSELB EUW1-LoadBalancerUsage"
    assert done.entries["NlbHour"]["Date"] == "2026-12-07"
    assert done.kept["SecretMonth"] == "no product, kept the recorded one"
    nlb_filters = {f["Field"]: f["Value"] for f in seen[list(SERVICE_PRODUCTS).index("NlbHour")]["Filters"]}  # type: ignore[index, union-attr]
    assert nlb_filters == {"productFamily": "Load Balancer-Network", "locationType": "AWS Region", "regionCode": "eu-west-1"}


def test_two_prices_for_one_service_price_keep_the_recorded_one_and_say_so():
    two = [
        _service_product("AWSSecretsManager", "EUW1-AWSSecretsManager-Secrets", "0.40", "Secrets", sku="A"),
        _service_product("AWSSecretsManager", "EUW1-AWSSecretsManager-Secrets-Other", "0.45", "Secrets", sku="B"),
    ]
    pricing, _ = _services_only({"SecretMonth": two})
    done = collect_services(pricing, "eu-west-1", "2026-12-07")
    assert "SecretMonth" not in done.entries
    assert done.kept["SecretMonth"] == "2 prices ($0.4, $0.45), kept the recorded one"


def test_day1_refresh_writes_a_regions_service_prices_and_the_estimate_borrows_the_rest(tmp_path):
    out = tmp_path / "prices.json"
    committed = json.loads(PRICES_FILE.read_text())
    out.write_text(json.dumps(committed))
    lb = [_service_product("AWSELB", "EUW1-LoadBalancerUsage", "0.0252", "Hrs")]
    pricing, ec2, _, _ = _clients({"p5.48xlarge": []}, [], services={"NlbHour": lb})
    done = refresh_prices("eu-west-1", instance_types=["p5.48xlarge"], out=out, clients=(pricing, ec2), now=NOW)
    doc = json.loads(out.read_text())
    assert doc["Services"]["eu-west-1"] == {
        "NlbHour": {**done.services.entries["NlbHour"], "Unit": committed["Services"]["us-east-1"]["NlbHour"]["Unit"]}
    }
    assert doc["Services"]["us-east-1"] == committed["Services"]["us-east-1"]  # another region's prices kept
    book = PriceBook(doc)
    assert book.service("eu-west-1", "NlbHour").usd == 0.0252  # type: ignore[union-attr]
    borrowed = book.service("eu-west-1", "NlcuHour")
    assert borrowed is not None and borrowed.source.endswith("; us-east-1 price, the catalog has no eu-west-1 figure")
