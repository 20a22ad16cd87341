# pyright: strict
"""What the usage report takes from the accounts contract (``/etc/gpucluster/accounts.json``): the cluster's
name, the GPU price per partition and where the daily file goes.

The file is the reconcile's (``gpucluster_agents/contract/accounts.py`` checks all of it); the report reads only
its own keys here, each checked, so that a report can still be made when another part of the file is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, cast

from ..contract.jsonread import Reader

DEFAULT_FILE = "/etc/gpucluster/accounts.json"
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9!_.*'()/-]{0,200}$")


class PolicyError(ValueError):
    """The file is missing, not JSON, or one of the report's keys is wrong (every problem, one per line)."""


@dataclass(frozen=True)
class UsageTarget:
    bucket: str
    prefix: str

    def key(self, day: str) -> str:
        return f"{self.prefix}{day}.json"


@dataclass(frozen=True)
class UsagePolicy:
    cluster: str
    prices: dict[str, float]
    """USD per GPU-hour by partition."""
    target: UsageTarget | None
    """None: the contract has no ``usage`` (no daily file)."""


def load_policy(path: str = DEFAULT_FILE) -> UsagePolicy:
    try:
        with open(path, encoding="utf-8") as f:
            obj: Any = json.load(f)
    except (OSError, ValueError) as exc:
        raise PolicyError(f"{path}: {exc}") from exc
    return parse_policy(obj, path)


def parse_policy(obj: Any, source: str = "accounts.json") -> UsagePolicy:
    errors: list[str] = []
    r = Reader(errors)
    if not isinstance(obj, dict):
        raise PolicyError(f"{source}: must be a JSON object")
    top = cast(dict[str, Any], obj)
    cluster = r.string(top, "cluster", "", required=True) or ""
    prices = _prices(r, top.get("gpu_prices", []))
    target = _target(r, top["usage"]) if top.get("usage") is not None else None
    if errors:
        raise PolicyError("\n".join(f"{source}: {e}" for e in errors))
    return UsagePolicy(cluster, prices, target)


def _prices(r: Reader, value: Any) -> dict[str, float]:
    prices: dict[str, float] = {}
    if not isinstance(value, list):
        r.err("gpu_prices", f"must be a list, got {value!r}")
        return prices
    for i, item in enumerate(cast(list[Any], value)):
        path = f"gpu_prices[{i}]"
        if not isinstance(item, dict):
            r.err(path, f"must be an object, got {item!r}")
            continue
        entry = cast(dict[str, Any], item)
        partition = r.string(entry, "partition", path, required=True)
        price = entry.get("usd_per_gpu_hour")
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price < 1e6:
            r.err(f"{path}.usd_per_gpu_hour", f"must be a number of dollars >= 0, got {price!r}")
            continue
        if partition is not None:
            if partition in prices:
                r.err(f"{path}.partition", f"{partition!r} is priced twice")
            prices[partition] = float(price)
    return prices


def _target(r: Reader, value: Any) -> UsageTarget | None:
    if not isinstance(value, dict):
        r.err("usage", f"must be an object or null, got {value!r}")
        return None
    obj = cast(dict[str, Any], value)
    bucket = r.string(obj, "bucket", "usage", required=True, pattern=_BUCKET_RE, hint="an S3 bucket name")
    prefix = obj.get("prefix", "")
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix) or prefix.startswith("/") or ".." in prefix:
        r.err("usage.prefix", f"{prefix!r} is not a key prefix like 'usage/'")
        return None
    return UsageTarget(bucket, prefix) if bucket else None
