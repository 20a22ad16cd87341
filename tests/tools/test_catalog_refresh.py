"""The catalog refresh script, against moto's DescribeInstanceTypes (a real HTTP API on 127.0.0.1)."""

from __future__ import annotations

import boto3

from gpucluster.facts.catalog import INSTANCE_TYPES_FILE, Catalog, load_catalog
from gpucluster.tools.catalog_refresh import KEEP, current_types, fetch, refresh, trim


def test_refresh_reproduces_the_committed_catalog(moto_endpoint, aws_env, tmp_path):
    """The committed data file is exactly what the script writes from DescribeInstanceTypes."""
    out = tmp_path / "instance_types.json"
    refresh("us-east-1", instance_types=current_types(), endpoint_url=moto_endpoint, out=out)
    assert out.read_text() == INSTANCE_TYPES_FILE.read_text()


def test_refresh_adds_types_and_the_result_loads(moto_endpoint, aws_env, tmp_path):
    out = tmp_path / "instance_types.json"
    out.write_text(INSTANCE_TYPES_FILE.read_text())
    refresh("us-east-1", add=["p5.4xlarge", "g6e.4xlarge"], endpoint_url=moto_endpoint, out=out)
    import json

    catalog = Catalog.from_documents(json.loads(out.read_text()), {})
    assert "g6e.4xlarge" in catalog and len(catalog) == len(load_catalog()) + 1  # p5.4xlarge was already there
    assert catalog["g6e.4xlarge"].gpu_count == 1


def test_fetch_batches_at_100_names(moto_endpoint, aws_env):
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    names = sorted(
        t["InstanceType"] for page in ec2.get_paginator("describe_instance_types").paginate() for t in page["InstanceTypes"]
    )[:150]
    calls: list[int] = []
    ec2.meta.events.register(
        "before-parameter-build.ec2.DescribeInstanceTypes", lambda params, **_: calls.append(len(params.get("InstanceTypes", [])))
    )
    entries = fetch(ec2, names)
    assert [e["InstanceType"] for e in entries] == names
    assert calls and all(n <= 100 for n in calls) and sum(calls) >= 150


def test_fetch_reports_types_ec2_does_not_know(moto_endpoint, aws_env):
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    try:
        fetch(ec2, ["p5.48xlarge", "p9.mega"])
    except Exception as exc:  # moto rejects unknown names like EC2 (InvalidInstanceType)
        assert "p9.mega" in str(exc)
    else:
        raise AssertionError("an unknown type must not be silently dropped")


def test_trim_keeps_only_named_fields():
    entry = {
        "InstanceType": "x",
        "Hypervisor": "nitro",
        "NetworkInfo": {
            "EfaSupported": True,
            "Ipv6Supported": True,
            "NetworkCards": [{"NetworkCardIndex": 0, "MaximumEnaQueueCount": 8}],
        },
    }
    assert trim(entry, KEEP) == {
        "InstanceType": "x",
        "NetworkInfo": {"EfaSupported": True, "NetworkCards": [{"NetworkCardIndex": 0}]},
    }
