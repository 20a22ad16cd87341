"""Regenerate ``gpucluster/facts/data/instance_types.json`` from EC2 ``DescribeInstanceTypes``.

Run with credentials for any region that offers the types (``gpucluster catalog refresh``); the
output keeps only the fields the project reads, sorted, so a refresh is a reviewable diff. Pass
``--endpoint-url`` to point at a local API (the tests use moto's server).

This module uses boto3 and is not imported by the stack program.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpucluster.facts.catalog import INSTANCE_TYPES_FILE

# The subset of InstanceTypeInfo the catalog keeps: {key: None (keep whole) | {nested keep-spec}}.
KEEP: dict[str, Any] = {
    "InstanceType": None,
    "VCpuInfo": {"DefaultVCpus": None},
    "MemoryInfo": {"SizeInMiB": None},
    "ProcessorInfo": {"SupportedArchitectures": None},
    "GpuInfo": {
        "Gpus": {"Name": None, "Manufacturer": None, "Count": None, "MemoryInfo": None},
        "TotalGpuMemoryInMiB": None,
    },
    "NeuronInfo": {
        "NeuronDevices": {"Name": None, "Count": None, "MemoryInfo": None, "CoreInfo": None},
        "TotalNeuronDeviceMemoryInMiB": None,
    },
    "NetworkInfo": {
        "NetworkPerformance": None,
        "MaximumNetworkInterfaces": None,
        "MaximumNetworkCards": None,
        "DefaultNetworkCardIndex": None,
        "NetworkCards": {
            "NetworkCardIndex": None,
            "NetworkPerformance": None,
            "MaximumNetworkInterfaces": None,
            "BaselineBandwidthInGbps": None,
            "PeakBandwidthInGbps": None,
            "InterfaceTypes": None,
        },
        "EfaSupported": None,
        "EfaInfo": None,
        "EnaSupport": None,
        "EnaSrdSupported": None,
    },
    "InstanceStorageSupported": None,
    "InstanceStorageInfo": {"TotalSizeInGB": None, "Disks": None, "NvmeSupport": None},
    "PlacementGroupInfo": None,
    "SupportedUsageClasses": None,
}

DESCRIBE_BATCH = 100  # DescribeInstanceTypes accepts at most 100 names per request


def trim(value: Any, keep: Mapping[str, Any] | None) -> Any:
    """Keep only the fields named in ``keep`` (recursing into dicts and lists of dicts)."""
    if keep is None:
        return value
    if isinstance(value, list):
        return [trim(v, keep) for v in value]
    if isinstance(value, dict):
        return {k: trim(value[k], sub) for k, sub in keep.items() if k in value}
    return value


def fetch(ec2: Any, instance_types: Sequence[str]) -> list[dict[str, Any]]:
    """Describe ``instance_types`` (batched, paginated) and return the trimmed entries, sorted."""
    entries: list[dict[str, Any]] = []
    names = sorted(set(instance_types))
    paginator = ec2.get_paginator("describe_instance_types")
    for start in range(0, len(names), DESCRIBE_BATCH):
        for page in paginator.paginate(InstanceTypes=names[start : start + DESCRIBE_BATCH]):
            entries.extend(trim(e, KEEP) for e in page["InstanceTypes"])
    missing = set(names) - {e["InstanceType"] for e in entries}
    if missing:
        raise LookupError(f"DescribeInstanceTypes did not return: {', '.join(sorted(missing))}")
    for entry in entries:
        cards = entry.get("NetworkInfo", {}).get("NetworkCards")
        if cards:
            cards.sort(key=lambda c: c["NetworkCardIndex"])
    return sorted(entries, key=lambda e: e["InstanceType"])


def document(entries: Iterable[Mapping[str, Any]], region: str) -> dict[str, Any]:
    return {
        "Source": "ec2:DescribeInstanceTypes (trimmed by gpucluster catalog refresh)",
        "Region": region,
        "InstanceTypes": list(entries),
    }


def current_types(path: Path = INSTANCE_TYPES_FILE) -> list[str]:
    if not path.exists():
        return []
    return [e["InstanceType"] for e in json.loads(path.read_text())["InstanceTypes"]]


CREDENTIALS_FIX = "set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or run `aws sso login`"


class RefreshError(Exception):
    """The catalog could not be fetched (no credentials, a refused or unsupported call): one line."""


def refresh(
    region: str,
    *,
    instance_types: Sequence[str] | None = None,
    add: Sequence[str] = (),
    endpoint_url: str | None = None,
    out: Path = INSTANCE_TYPES_FILE,
) -> Path:
    """Write a fresh catalog for ``instance_types`` (default: the types already in ``out``) + ``add``."""
    import boto3

    names = list(instance_types) if instance_types else current_types(out)
    names += list(add)
    if not names:
        raise ValueError("no instance types to describe: pass some, or refresh an existing catalog")
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

    from gpucluster.tools.preflight import failure_reason

    try:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url)
        entries = fetch(ec2, names)
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise RefreshError(f"no AWS credentials ({exc}); {CREDENTIALS_FIX}") from None
    except (ClientError, BotoCoreError) as exc:
        raise RefreshError(f"EC2 DescribeInstanceTypes in {region} failed: {failure_reason(exc)}") from None
    doc = document(entries, region)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return out
