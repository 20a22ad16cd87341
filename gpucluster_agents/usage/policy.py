# pyright: strict
"""What the usage report takes from the accounts contract (``/etc/gpucluster/accounts.json``): the cluster's
name, the GPU price per partition and where the daily file goes.

The file is read by the contract's own parser (:mod:`gpucluster_agents.contract.accounts`, the one the reconcile
uses): strict, every problem named with its key. This module only turns it into the report's terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract import ConfigError
from ..contract import accounts as contract

DEFAULT_FILE = contract.DEFAULT_PATH


class PolicyError(ValueError):
    """The file is missing, not JSON, or wrong (every problem, with its key)."""


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
        return of_contract(contract.load(path))
    except ConfigError as exc:
        raise PolicyError(str(exc)) from exc


def parse_policy(obj: Any, source: str = "accounts.json") -> UsagePolicy:
    try:
        return of_contract(contract.parse(obj, source))
    except ConfigError as exc:
        raise PolicyError(str(exc)) from exc


def of_contract(c: contract.AccountsContract) -> UsagePolicy:
    prices: dict[str, float] = {}
    for i, p in enumerate(c.gpu_prices):
        if p.partition in prices:
            raise ConfigError([f"gpu_prices[{i}].partition: {p.partition!r} is priced twice"])
        prices[p.partition] = p.usd_per_gpu_hour
    target = UsageTarget(c.usage.bucket, c.usage.prefix) if c.usage is not None else None
    return UsagePolicy(c.cluster, prices, target)
