"""The AWS regions gpucluster knows, per partition (``data/regions.json``, taken from botocore's
``endpoints.json``; the file names its source and date)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

REGIONS_FILE = Path(__file__).resolve().parent / "data" / "regions.json"


@functools.cache
def partitions() -> dict[str, dict[str, str]]:
    """``{partition: {region: description}}`` for the aws, aws-cn and aws-us-gov partitions."""
    return json.loads(REGIONS_FILE.read_text())["Partitions"]


def aws_partition_of(region: str) -> str | None:
    """The partition (``aws``, ``aws-cn``, ``aws-us-gov``) a known region belongs to, else ``None``."""
    for name, regions in partitions().items():
        if region in regions:
            return name
    return None


def known_regions() -> list[str]:
    return [r for regions in partitions().values() for r in regions]


def zone_in_region(zone: str, region: str) -> bool:
    """``us-east-1a`` (and Local Zones such as ``us-east-1-bos-1a``) belong to ``us-east-1``."""
    return re.fullmatch(re.escape(region) + r"([a-z]|-[a-z]+-\d+[a-z])", zone) is not None
