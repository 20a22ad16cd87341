# pyright: strict
"""The accounts contract: ``/etc/gpucluster/accounts.json`` on the head node, what the accounts
reconcile (:mod:`gpucluster_agents.accounts`) and the usage report read.

The Pulumi side (``gpucluster.render.slurm.accounts.accounts_contract``) writes the file; :func:`parse` reads it
back, strictly: unknown keys are errors and every problem is reported at once with its key path. Stdlib only,
Python 3.9.

Schema 1::

    {"schema": 1, "cluster": "slurm-p5",
     "qos": [{"name", "description", "priority", "preempt": [...], "preempt_mode", "grp_tres": {...},
              "max_wall_minutes": int | null}],
     "accounts": [{"name", "description", "fairshare", "grp_tres": {...}, "max_wall_minutes", "qos": [...],
                   "default_qos", "users": [...], "groups": [...]}],
     "gpu_prices": [{"partition", "gpus_per_node", "usd_per_gpu_hour"}],
     "usage": {"bucket", "prefix"}}          # usage: optional

Ownership: every account and QOS the file manages has a description starting ``gpucluster:`` (:data:`MARK`); the
reconcile changes or removes only what carries it. Names are what Slurm stores: account and QOS names lower case
(sacctmgr folds them), user names as POSIX allows. Descriptions may not hold characters that sacctmgr's command line
or its ``-P`` output would mangle (``|``, ``"``, ``=``, control characters); an apostrophe is stored as a backtick
(measured, 22.05), which the reconcile knows (:func:`stored_description`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, cast

from . import ConfigError
from .grammar import NAME_HINT, NAME_RE, PARTITION_NAME_RE
from .jsonread import BUCKET_RE, Reader

__all__ = ["MARK", "USER_RE", "Account", "AccountsContract", "GpuPrice", "Qos", "Usage", "load", "parse"]

SCHEMA = 1
MARK = "gpucluster:"
"""The start of the description of every account and QOS gpucluster manages."""
PREEMPT_MODES = ("cluster", "requeue", "cancel", "off")
DEFAULT_PATH = "/etc/gpucluster/accounts.json"

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}\$?$")
_GROUP_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_. -]{0,63}$")
_TRES_RE = re.compile(r"^(cpu|mem|node|billing|energy|gres/[a-z0-9_]+(:[A-Za-z0-9_.-]+)?|license/[A-Za-z0-9_.-]+)$")
_DESC_BAD = re.compile(r'[|"=\x00-\x1f\x7f]')

Tres = dict[str, int]


@dataclass(frozen=True)
class Qos:
    name: str
    description: str
    priority: int
    preempt: tuple[str, ...]
    preempt_mode: str
    grp_tres: Tres
    max_wall_minutes: int | None


@dataclass(frozen=True)
class Account:
    name: str
    description: str
    fairshare: int
    grp_tres: Tres
    max_wall_minutes: int | None
    qos: tuple[str, ...]
    default_qos: str | None
    users: tuple[str, ...]
    groups: tuple[str, ...]


@dataclass(frozen=True)
class GpuPrice:
    partition: str
    gpus_per_node: int
    usd_per_gpu_hour: float


@dataclass(frozen=True)
class Usage:
    bucket: str
    prefix: str


@dataclass(frozen=True)
class AccountsContract:
    cluster: str
    qos: tuple[Qos, ...]
    accounts: tuple[Account, ...]
    gpu_prices: tuple[GpuPrice, ...]
    usage: Usage | None
    schema: int = SCHEMA


TOP_KEYS = ("schema", "cluster", "qos", "accounts", "gpu_prices", "usage")
QOS_KEYS = ("name", "description", "priority", "preempt", "preempt_mode", "grp_tres", "max_wall_minutes")
ACCOUNT_KEYS = ("name", "description", "fairshare", "grp_tres", "max_wall_minutes", "qos", "default_qos", "users", "groups")
PRICE_KEYS = ("partition", "gpus_per_node", "usd_per_gpu_hour")
USAGE_KEYS = ("bucket", "prefix")


def _obj(r: Reader, raw: Any, path: str) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return None
    return cast("dict[str, Any]", raw)


def _items(r: Reader, obj: dict[str, Any], key: str, path: str, required: bool = True) -> list[Any]:
    where = f"{path}.{key}" if path else key
    if key not in obj:
        if required:
            r.err(where, "required key is missing")
        return []
    raw = obj[key]
    if not isinstance(raw, list):
        r.err(where, f"must be a list, got {raw!r}")
        return []
    return cast("list[Any]", raw)


def _names(r: Reader, obj: dict[str, Any], key: str, path: str, pattern: re.Pattern[str], hint: str) -> tuple[str, ...]:
    """A list of unique names, each matching ``pattern``."""
    out: list[str] = []
    for i, value in enumerate(_items(r, obj, key, path)):
        where = f"{path}.{key}[{i}]"
        if not isinstance(value, str) or not pattern.match(value):
            r.err(where, f"{value!r} is not valid: {hint}")
        elif value in out:
            r.err(where, f"{value!r} is listed twice")
        else:
            out.append(value)
    return tuple(out)


def _description(r: Reader, obj: dict[str, Any], path: str) -> str:
    text = r.string(obj, "description", path, required=True) or ""
    if text and not text.startswith(MARK):
        r.err(f"{path}.description", f"{text!r} must start with {MARK!r} (the mark of what gpucluster manages)")
    elif _DESC_BAD.search(text) or len(text) > 200:
        r.err(f"{path}.description", f'{text!r}: at most 200 characters, none of | " = or control characters')
    return text


def _tres(r: Reader, obj: dict[str, Any], path: str) -> Tres:
    where = f"{path}.grp_tres"
    raw = obj.get("grp_tres", {})
    if not isinstance(raw, dict):
        r.err(where, f"must be an object of TRES name to count, got {raw!r}")
        return {}
    out: Tres = {}
    for name, count in cast("dict[Any, Any]", raw).items():
        if not isinstance(name, str) or not _TRES_RE.match(name):
            r.err(where, f"{name!r} is not a TRES name (cpu, mem, node, billing, gres/gpu, gres/gpu:<type>, license/<name>)")
        elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
            r.err(f"{where}.{name}", f"must be an integer >= 0, got {count!r}")
        else:
            out[name] = count
    return out


def _wall(r: Reader, obj: dict[str, Any], path: str) -> int | None:
    if obj.get("max_wall_minutes") is None:
        return None
    return r.integer(obj, "max_wall_minutes", path, default=0, minimum=1, maximum=525600 * 10) or None


def _parse_qos(r: Reader, raw: Any, path: str) -> Qos | None:
    obj = _obj(r, raw, path)
    if obj is None:
        return None
    r.unknown(obj, QOS_KEYS, path)
    name = r.string(obj, "name", path, required=True, pattern=_NAME_RE, hint="lower case letters, digits, _ . -") or ""
    mode = r.string(obj, "preempt_mode", path, default="cluster") or "cluster"
    if mode not in PREEMPT_MODES:
        r.err(f"{path}.preempt_mode", f"{mode!r} is not one of {', '.join(PREEMPT_MODES)}")
    return Qos(
        name=name,
        description=_description(r, obj, path),
        priority=r.integer(obj, "priority", path, default=0, minimum=0, maximum=2**32 - 2),
        preempt=_names(r, obj, "preempt", path, _NAME_RE, "a QOS name") if "preempt" in obj else (),
        preempt_mode=mode,
        grp_tres=_tres(r, obj, path),
        max_wall_minutes=_wall(r, obj, path),
    )


def _parse_account(r: Reader, raw: Any, path: str) -> Account | None:
    obj = _obj(r, raw, path)
    if obj is None:
        return None
    r.unknown(obj, ACCOUNT_KEYS, path)
    name = r.string(obj, "name", path, required=True, pattern=_NAME_RE, hint="lower case letters, digits, _ . -") or ""
    if name == "root":
        r.err(f"{path}.name", "'root' is Slurm's own account: choose another team name")
    qos = _names(r, obj, "qos", path, _NAME_RE, "a QOS name") if "qos" in obj else ()
    default_qos = r.string(obj, "default_qos", path, nullable=True, pattern=_NAME_RE, hint="a QOS name")
    if default_qos is not None and default_qos not in qos:
        r.err(f"{path}.default_qos", f"{default_qos!r} is not in this account's qos list {list(qos)}")
    return Account(
        name=name,
        description=_description(r, obj, path),
        fairshare=r.integer(obj, "fairshare", path, default=1, minimum=1, maximum=2**31 - 1, required=True),
        grp_tres=_tres(r, obj, path),
        max_wall_minutes=_wall(r, obj, path),
        qos=qos,
        default_qos=default_qos,
        users=_names(r, obj, "users", path, USER_RE, "a POSIX user name") if "users" in obj else (),
        groups=_names(r, obj, "groups", path, _GROUP_RE, "a directory group name") if "groups" in obj else (),
    )


def _parse_price(r: Reader, raw: Any, path: str) -> GpuPrice | None:
    obj = _obj(r, raw, path)
    if obj is None:
        return None
    r.unknown(obj, PRICE_KEYS, path)
    partition = r.string(obj, "partition", path, required=True, pattern=PARTITION_NAME_RE, hint="a partition name") or ""
    gpus = r.integer(obj, "gpus_per_node", path, default=0, minimum=0, maximum=1024, required=True)
    price = obj.get("usd_per_gpu_hour")
    if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
        r.err(f"{path}.usd_per_gpu_hour", f"must be a number >= 0, got {price!r}")
        price = 0.0
    return GpuPrice(partition, gpus, float(price))


def _parse_usage(r: Reader, raw: Any) -> Usage | None:
    if raw is None:
        return None
    obj = _obj(r, raw, "usage")
    if obj is None:
        return None
    r.unknown(obj, USAGE_KEYS, "usage")
    bucket = r.string(obj, "bucket", "usage", required=True, pattern=BUCKET_RE, hint="an S3 bucket name") or ""
    prefix = obj.get("prefix", "")
    if not isinstance(prefix, str) or prefix.startswith("/"):
        r.err("usage.prefix", f"must be a key prefix (no leading /), got {prefix!r}")
        prefix = ""
    return Usage(bucket, prefix)


def _cross_check(r: Reader, qos: tuple[Qos, ...], accounts: tuple[Account, ...]) -> None:
    """Names unique; every QOS an account or a preempt list names is in ``qos`` (or is Slurm's ``normal``)."""
    known = {q.name for q in qos} | {"normal"}
    for kind, names in (("qos", [q.name for q in qos]), ("accounts", [a.name for a in accounts])):
        for i, name in enumerate(names):
            if name and name in names[:i]:
                r.err(f"{kind}[{i}].name", f"{name!r} is defined twice")
    for i, q in enumerate(qos):
        for name in q.preempt:
            if name not in known:
                r.err(f"qos[{i}].preempt", f"{name!r} is not a QOS of this file")
            elif name == q.name:
                r.err(f"qos[{i}].preempt", f"{name!r} cannot preempt itself")
    for i, a in enumerate(accounts):
        for name in a.qos:
            if name not in known:
                r.err(f"accounts[{i}].qos", f"{name!r} is not a QOS of this file")


def stored_description(text: str) -> str:
    """``text`` as sacctmgr stores it: an apostrophe becomes a backtick (measured on 22.05)."""
    return text.replace("'", "`")


def parse(data: Any, path: str | None = None) -> AccountsContract:
    """Validate a decoded accounts.json; raise :class:`ConfigError` listing every problem."""
    errors: list[str] = []
    r = Reader(errors)
    top = _obj(r, data, "(top level)")
    if top is None:
        raise ConfigError(errors, path)
    r.unknown(top, TOP_KEYS, "")
    if top.get("schema") != SCHEMA:
        r.err("schema", f"this agent reads schema {SCHEMA}, got {top.get('schema')!r}")
    cluster = r.string(
        top, "cluster", "", required=True, pattern=NAME_RE, hint=f"Slurm's ClusterName, the cluster's name: {NAME_HINT}"
    )
    qos = tuple(q for i, raw in enumerate(_items(r, top, "qos", "")) if (q := _parse_qos(r, raw, f"qos[{i}]")))
    accounts = tuple(a for i, raw in enumerate(_items(r, top, "accounts", "")) if (a := _parse_account(r, raw, f"accounts[{i}]")))
    prices = tuple(
        p
        for i, raw in enumerate(_items(r, top, "gpu_prices", "", required=False))
        if (p := _parse_price(r, raw, f"gpu_prices[{i}]"))
    )
    usage = _parse_usage(r, top.get("usage"))
    _cross_check(r, qos, accounts)
    if errors:
        raise ConfigError(errors, path)
    return AccountsContract(cluster or "", qos, accounts, prices, usage)


def load(path: str = DEFAULT_PATH) -> AccountsContract:
    """Read and parse the file; a missing, unreadable or malformed file is a :class:`ConfigError` too."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError([f"cannot read: {exc}"], path) from exc
    return parse(data, path)
