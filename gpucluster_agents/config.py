# pyright: strict
"""Agent configuration: one JSON file, rendered by the Pulumi stack from its outputs.

Location: ``--config PATH``, else ``$GPUCLUSTER_AGENT_CONFIG``, else ``/etc/gpucluster/agent.json``.

Schema (version 1). Keys marked * are required; unknown keys are errors, so a typo never
silently falls back to a default::

    {
      "schema_version": 1,                       # optional; must be 1
      "cluster_name": "demo",                    # * [A-Za-z0-9-_]{1,64}; value of tag gpucluster:cluster
      "region": "us-east-1",                     # * AWS region of the node groups
      "endpoint_url": null,                      # EC2 endpoint override (tests point it at moto)
      "log_file": "/var/log/gpucluster/agent.log",
      "state_dir": "/var/lib/gpucluster/agent",  # locks, launch journal, capacity holds
      "slurm_bin_dir": "/usr/bin",               # scontrol is <slurm_bin_dir>/scontrol
      "topology_conf": "/etc/slurm/topology.conf",  # null: never write topology.conf
      "insufficient_capacity_hold_seconds": 600, # node group held DOWN after insufficient capacity
      "failure_hold_seconds": 600,               # node held DOWN after any other launch failure
      "orphan_grace_seconds": 300,               # untagged instance age before it counts as an orphan
      "lock_timeout_seconds": 300,               # wait for the state_dir lock at most this long
      "max_instances_per_fleet": 500,            # CreateFleet batch size, 1..500
      "api_retry_mode": "adaptive",              # botocore retry mode: standard | adaptive
      "api_max_attempts": 8,                     # botocore total attempts per call, 1..20
      "api_concurrency": 8,                      # parallel CreateTags calls, 1..64
      "node_groups": [                           # * at least one
        {
          "name": "p5",                          # * [a-z0-9][a-z0-9_-]*, not ending in '-'; tag gpucluster:node-group
          "mode": "dynamic",                     # dynamic (default) | static, see below
          "partition": "p5",                     # * Slurm partition of the group
          "node_prefix": "p5",                   # nodes are <node_prefix>-1 .. <node_prefix>-<max_nodes>; default: name
          "max_nodes": 16,                       # * >= 1
          "instance_type": "p5.48xlarge",        # *
          "launch_template_id": "lt-0123456789abcdef0",   # *
          "launch_template_version": "$Default", # "$Default", "$Latest" or a version number
          "subnet_ids": ["subnet-0123456789abcdef0"],     # * one CreateFleet override per subnet
          "efa_enabled": false,                  # true: exactly one subnet, SingleAvailabilityZone
          "placement_group": null,               # cluster placement group name (not with capacity-block)
          "capacity": {                          # default {"type": "on-demand"}
            "type": "on-demand",                 # on-demand | spot | capacity-reservation | capacity-block
            "reservation_id": null,              # cr-...; required for capacity-block
            "resource_group_arn": null           # capacity-reservation resource group (targeted ODCRs)
          },
          "tags": {"team": "ml"}                 # put on every instance at launch (<= 40 tags)
        }
      ]
    }

Node names are ``<node_prefix>-<N>``; the agent finds a node's group by the text before the last
'-', so group names and prefixes may contain '-' themselves (``train-a`` owns ``train-a-3``).

Modes:
- ``dynamic``: Slurm cloud nodes. The agent launches them with CreateFleet when slurmctld resumes
  them and terminates them when it suspends them.
- ``static``: an Auto Scaling group owns the instances (it launches, replaces and terminates them).
  The agent never launches or terminates them; on every call it names each new instance of the
  group after the lowest free node (tag ``gpucluster:node-name``, which the instance reads from its
  metadata to start ``slurmd -N <node>``), sets names without an instance DOWN (reason
  ``gpucluster: no instance ...``) and hands them back (``state=resume``) once an instance has them.

Only instances tagged with one of these node groups are the agent's: others carrying the cluster
tag (the head node, plain Auto Scaling groups) are never listed, swept or terminated.

How the capacity type reaches CreateFleet:
- on-demand: ``DefaultTargetCapacityType=on-demand``.
- spot: ``DefaultTargetCapacityType=spot``, ``SpotOptions.AllocationStrategy=price-capacity-optimized``.
- capacity-reservation: ``DefaultTargetCapacityType=on-demand`` and
  ``OnDemandOptions.CapacityReservationOptions.UsageStrategy=use-capacity-reservations-first``;
  open reservations are used automatically, targeted ones must be named by the launch template
  (``CapacityReservationSpecification`` with the reservation or its resource group).
- capacity-block: ``DefaultTargetCapacityType=capacity-block``; the launch template must carry
  ``InstanceMarketOptions.MarketType=capacity-block`` and target ``reservation_id``.
The agent logs reservation_id / resource_group_arn with every launch so a failure can be traced.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

DEFAULT_CONFIG_PATH = "/etc/gpucluster/agent.json"
CONFIG_ENV = "GPUCLUSTER_AGENT_CONFIG"
SCHEMA_VERSION = 1
MAX_FLEET_BATCH = 500  # CreateFleet type=instant launches at most this many per call (our cap)

CAPACITY_TYPES = ("on-demand", "spot", "capacity-reservation", "capacity-block")
MODES = ("dynamic", "static")
RETRY_MODES = ("standard", "adaptive")

_CLUSTER_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_GROUP_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,38}[a-z0-9_])?$")
_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
_TAG_KEY_RESERVED = ("aws:", "gpucluster:")


class ConfigError(ValueError):
    """The agent config is missing, unreadable or invalid. ``errors`` lists every problem."""

    def __init__(self, errors: list[str], path: str | None = None) -> None:
        self.errors = list(errors)
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(where + "; ".join(self.errors))


@dataclass(frozen=True)
class Capacity:
    type: str = "on-demand"
    reservation_id: str | None = None
    resource_group_arn: str | None = None


@dataclass(frozen=True)
class NodeGroup:
    name: str
    partition: str
    node_prefix: str
    max_nodes: int
    instance_type: str
    launch_template_id: str
    launch_template_version: str
    subnet_ids: tuple[str, ...]
    efa_enabled: bool = False
    placement_group: str | None = None
    capacity: Capacity = field(default_factory=Capacity)
    tags: tuple[tuple[str, str], ...] = ()
    mode: str = "dynamic"

    @property
    def static(self) -> bool:
        """An Auto Scaling group owns the instances; the agent only names them."""
        return self.mode == "static"

    def node_names(self) -> list[str]:
        return [f"{self.node_prefix}-{i}" for i in range(1, self.max_nodes + 1)]

    def owns(self, node: str) -> bool:
        prefix, sep, num = node.rpartition("-")
        return (
            sep == "-"
            and prefix == self.node_prefix
            and num.isdigit()
            and not num.startswith("0")
            and 1 <= int(num) <= self.max_nodes
        )


@dataclass(frozen=True)
class AgentConfig:
    cluster_name: str
    region: str
    node_groups: tuple[NodeGroup, ...]
    endpoint_url: str | None = None
    log_file: str = "/var/log/gpucluster/agent.log"
    state_dir: str = "/var/lib/gpucluster/agent"
    slurm_bin_dir: str = "/usr/bin"
    topology_conf: str | None = "/etc/slurm/topology.conf"
    insufficient_capacity_hold_seconds: int = 600
    failure_hold_seconds: int = 600
    orphan_grace_seconds: int = 300
    lock_timeout_seconds: int = 300
    max_instances_per_fleet: int = MAX_FLEET_BATCH
    api_retry_mode: str = "adaptive"
    api_max_attempts: int = 8
    api_concurrency: int = 8

    @property
    def scontrol(self) -> str:
        return os.path.join(self.slurm_bin_dir, "scontrol")

    def group(self, name: str) -> NodeGroup | None:
        for g in self.node_groups:
            if g.name == name:
                return g
        return None

    def group_of_node(self, node: str) -> NodeGroup | None:
        for g in self.node_groups:
            if g.owns(node):
                return g
        return None


# --------------------------------------------------------------------------- parsing

_TOP_KEYS = {
    "schema_version",
    "cluster_name",
    "region",
    "endpoint_url",
    "log_file",
    "state_dir",
    "slurm_bin_dir",
    "topology_conf",
    "insufficient_capacity_hold_seconds",
    "failure_hold_seconds",
    "orphan_grace_seconds",
    "lock_timeout_seconds",
    "max_instances_per_fleet",
    "api_retry_mode",
    "api_max_attempts",
    "api_concurrency",
    "node_groups",
}
_GROUP_KEYS = {
    "name",
    "mode",
    "partition",
    "node_prefix",
    "max_nodes",
    "instance_type",
    "launch_template_id",
    "launch_template_version",
    "subnet_ids",
    "efa_enabled",
    "placement_group",
    "capacity",
    "tags",
}
_CAPACITY_KEYS = {"type", "reservation_id", "resource_group_arn"}


class _Reader:
    """Reads typed values out of a JSON object, recording an error naming the key path."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors

    def err(self, path: str, msg: str) -> None:
        self.errors.append(f"{path}: {msg}")

    def unknown(self, obj: Mapping[str, Any], allowed: set[str], path: str) -> None:
        for key in sorted(set(obj) - allowed):
            where = f"{path}.{key}" if path else key
            self.err(where, f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def string(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        default: str | None = None,
        required: bool = False,
        nullable: bool = False,
        pattern: re.Pattern[str] | None = None,
        hint: str = "",
    ) -> str | None:
        where = f"{path}.{key}" if path else key
        if key not in obj:
            if required:
                self.err(where, "required key is missing")
            return default
        value = obj[key]
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value:
            self.err(where, f"must be a non-empty string, got {value!r}")
            return default
        if pattern is not None and not pattern.match(value):
            self.err(where, f"{value!r} is not valid{(': ' + hint) if hint else ''}")
            return default
        return value

    def integer(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        default: int,
        minimum: int,
        maximum: int | None = None,
        required: bool = False,
    ) -> int:
        where = f"{path}.{key}" if path else key
        if key not in obj:
            if required:
                self.err(where, "required key is missing")
            return default
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, int):
            self.err(where, f"must be an integer, got {value!r}")
            return default
        if value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
            self.err(where, f"must be {bound}, got {value}")
            return default
        return value

    def boolean(self, obj: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        where = f"{path}.{key}" if path else key
        if key not in obj:
            return default
        value = obj[key]
        if not isinstance(value, bool):
            self.err(where, f"must be true or false, got {value!r}")
            return default
        return value


def _parse_capacity(r: _Reader, raw: Any, path: str) -> Capacity:
    if raw is None:
        return Capacity()
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return Capacity()
    obj = cast("dict[str, Any]", raw)
    r.unknown(obj, _CAPACITY_KEYS, path)
    ctype = r.string(obj, "type", path, default="on-demand") or "on-demand"
    if ctype not in CAPACITY_TYPES:
        r.err(f"{path}.type", f"{ctype!r} is not one of {', '.join(CAPACITY_TYPES)}")
        ctype = "on-demand"
    rid = r.string(
        obj,
        "reservation_id",
        path,
        nullable=True,
        pattern=re.compile(r"^cr-[0-9a-f]+$"),
        hint="expected a capacity reservation id like cr-0123456789abcdef0",
    )
    arn = r.string(
        obj,
        "resource_group_arn",
        path,
        nullable=True,
        pattern=re.compile(r"^arn:aws[a-z-]*:resource-groups:"),
        hint="expected an arn:aws:resource-groups:... ARN",
    )
    if ctype == "capacity-block" and not rid:
        r.err(f"{path}.reservation_id", "required when type is capacity-block")
    if ctype in ("on-demand", "spot") and (rid or arn):
        r.err(path, f"reservation_id/resource_group_arn only apply to capacity reservations, not {ctype}")
    return Capacity(type=ctype, reservation_id=rid, resource_group_arn=arn)


def _parse_tags(r: _Reader, raw: Any, path: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        r.err(path, f"must be an object of string to string, got {raw!r}")
        return ()
    obj = cast("dict[Any, Any]", raw)
    out: list[tuple[str, str]] = []
    for key, value in obj.items():
        if not isinstance(key, str) or not key or len(key) > 128:
            r.err(path, f"tag key {key!r} must be a string of 1..128 characters")
            continue
        if key.lower().startswith(_TAG_KEY_RESERVED):
            r.err(f"{path}.{key}", "keys starting with aws: or gpucluster: are reserved")
            continue
        if not isinstance(value, str) or len(value) > 256:
            r.err(f"{path}.{key}", f"tag value must be a string of at most 256 characters, got {value!r}")
            continue
        out.append((key, value))
    if len(out) > 40:
        r.err(path, f"at most 40 tags (EC2 allows 50 and the agent adds its own), got {len(out)}")
    return tuple(sorted(out))


def _parse_group(r: _Reader, raw: Any, path: str) -> NodeGroup | None:
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return None
    obj = cast("dict[str, Any]", raw)
    before = len(r.errors)
    r.unknown(obj, _GROUP_KEYS, path)
    name = r.string(
        obj,
        "name",
        path,
        required=True,
        pattern=_GROUP_NAME_RE,
        hint="lower-case letters, digits, '_' and '-', not starting or ending with '-'",
    )
    mode = r.string(obj, "mode", path, default="dynamic") or "dynamic"
    if mode not in MODES:
        r.err(f"{path}.mode", f"{mode!r} is not one of {', '.join(MODES)}")
    partition = r.string(obj, "partition", path, required=True)
    prefix = r.string(
        obj,
        "node_prefix",
        path,
        default=name,
        pattern=_PREFIX_RE,
        hint="a letter, then letters, digits, '_' or '-'",
    )
    max_nodes = r.integer(obj, "max_nodes", path, default=0, minimum=1, maximum=100000, required=True)
    itype = r.string(
        obj,
        "instance_type",
        path,
        required=True,
        pattern=re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$"),
        hint="expected an EC2 instance type like p5.48xlarge",
    )
    lt_id = r.string(
        obj,
        "launch_template_id",
        path,
        required=True,
        pattern=re.compile(r"^lt-[0-9a-f]+$"),
        hint="expected a launch template id like lt-0123456789abcdef0",
    )
    lt_version: str | None = "$Default"
    if "launch_template_version" in obj:
        v = obj["launch_template_version"]
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            lt_version = str(v)
        elif isinstance(v, str) and (v in ("$Default", "$Latest") or (v.isdigit() and int(v) >= 1)):
            lt_version = v
        else:
            r.err(f"{path}.launch_template_version", f"must be $Default, $Latest or a version number >= 1, got {v!r}")
    subnets_raw = obj.get("subnet_ids")
    subnets: tuple[str, ...] = ()
    if "subnet_ids" not in obj:
        r.err(f"{path}.subnet_ids", "required key is missing")
    elif not isinstance(subnets_raw, list) or not subnets_raw:
        r.err(f"{path}.subnet_ids", f"must be a non-empty list of subnet ids, got {subnets_raw!r}")
    else:
        items = cast("list[Any]", subnets_raw)
        good: list[str] = []
        for i, s in enumerate(items):
            if not isinstance(s, str) or not re.match(r"^subnet-[0-9a-f]+$", s):
                r.err(f"{path}.subnet_ids[{i}]", f"{s!r} is not a subnet id like subnet-0123456789abcdef0")
            elif s in good:
                r.err(f"{path}.subnet_ids[{i}]", f"{s} is listed twice")
            else:
                good.append(s)
        subnets = tuple(good)
    efa = r.boolean(obj, "efa_enabled", path, default=False)
    if efa and len(subnets) > 1:
        r.err(
            f"{path}.subnet_ids",
            f"an EFA group must stay in one availability zone; give exactly one subnet, got {len(subnets)}",
        )
    pg = r.string(obj, "placement_group", path, nullable=True)
    capacity = _parse_capacity(r, obj.get("capacity"), f"{path}.capacity")
    if pg and capacity.type == "capacity-block":
        r.err(f"{path}.placement_group", "placement groups cannot be used with capacity blocks")
    tags = _parse_tags(r, obj.get("tags"), f"{path}.tags")
    if len(r.errors) != before:
        return None
    assert name and partition and prefix and itype and lt_id and lt_version
    return NodeGroup(
        name=name,
        partition=partition,
        node_prefix=prefix,
        max_nodes=max_nodes,
        instance_type=itype,
        launch_template_id=lt_id,
        launch_template_version=lt_version,
        subnet_ids=subnets,
        efa_enabled=efa,
        placement_group=pg,
        capacity=capacity,
        tags=tags,
        mode=mode,
    )


def parse_config(data: Any, path: str | None = None) -> AgentConfig:
    """Validate a decoded JSON document; raise ConfigError listing every problem."""
    errors: list[str] = []
    r = _Reader(errors)
    if not isinstance(data, dict):
        raise ConfigError([f"top level must be a JSON object, got {type(data).__name__}"], path)
    obj = cast("dict[str, Any]", data)
    r.unknown(obj, _TOP_KEYS, "")
    if "schema_version" in obj and obj["schema_version"] != SCHEMA_VERSION:
        r.err("schema_version", f"this agent reads schema_version {SCHEMA_VERSION}, got {obj['schema_version']!r}")
    cluster = r.string(obj, "cluster_name", "", required=True, pattern=_CLUSTER_NAME_RE, hint="1..64 of [A-Za-z0-9-_]")
    region = r.string(
        obj,
        "region",
        "",
        required=True,
        pattern=re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$"),
        hint="expected a region like us-east-1",
    )
    endpoint = r.string(obj, "endpoint_url", "", nullable=True, pattern=re.compile(r"^https?://"), hint="expected an http(s) URL")
    log_file = r.string(obj, "log_file", "", default=AgentConfig.log_file)
    state_dir = r.string(obj, "state_dir", "", default=AgentConfig.state_dir)
    bin_dir = r.string(obj, "slurm_bin_dir", "", default=AgentConfig.slurm_bin_dir)
    topo = r.string(obj, "topology_conf", "", default=AgentConfig.topology_conf, nullable=True)
    for key, value in (("log_file", log_file), ("state_dir", state_dir), ("slurm_bin_dir", bin_dir), ("topology_conf", topo)):
        if value is not None and not os.path.isabs(value):
            r.err(key, f"must be an absolute path, got {value!r}")
    ice_hold = r.integer(obj, "insufficient_capacity_hold_seconds", "", default=600, minimum=0, maximum=86400)
    fail_hold = r.integer(obj, "failure_hold_seconds", "", default=600, minimum=0, maximum=86400)
    grace = r.integer(obj, "orphan_grace_seconds", "", default=300, minimum=0, maximum=86400)
    lock_timeout = r.integer(obj, "lock_timeout_seconds", "", default=300, minimum=1, maximum=3600)
    batch = r.integer(obj, "max_instances_per_fleet", "", default=MAX_FLEET_BATCH, minimum=1, maximum=MAX_FLEET_BATCH)
    retry_mode = r.string(obj, "api_retry_mode", "", default="adaptive") or "adaptive"
    if retry_mode not in RETRY_MODES:
        r.err("api_retry_mode", f"{retry_mode!r} is not one of {', '.join(RETRY_MODES)}")
    attempts = r.integer(obj, "api_max_attempts", "", default=8, minimum=1, maximum=20)
    concurrency = r.integer(obj, "api_concurrency", "", default=8, minimum=1, maximum=64)

    groups: list[NodeGroup] = []
    raw_groups = obj.get("node_groups")
    if "node_groups" not in obj:
        r.err("node_groups", "required key is missing")
    elif not isinstance(raw_groups, list) or not raw_groups:
        r.err("node_groups", f"must be a non-empty list, got {raw_groups!r}")
    else:
        items = cast("list[Any]", raw_groups)
        for i, raw in enumerate(items):
            g = _parse_group(r, raw, f"node_groups[{i}]")
            if g is not None:
                groups.append(g)
        seen_names: dict[str, int] = {}
        seen_prefix: dict[str, int] = {}
        for i, g in enumerate(groups):
            if g.name in seen_names:
                r.err(f"node_groups[{i}].name", f"{g.name!r} is also used by node_groups[{seen_names[g.name]}]")
            seen_names.setdefault(g.name, i)
            if g.node_prefix in seen_prefix:
                r.err(
                    f"node_groups[{i}].node_prefix",
                    f"{g.node_prefix!r} is also used by node_groups[{seen_prefix[g.node_prefix]}]",
                )
            seen_prefix.setdefault(g.node_prefix, i)
    if errors:
        raise ConfigError(errors, path)
    assert cluster and region and log_file and state_dir and bin_dir
    return AgentConfig(
        cluster_name=cluster,
        region=region,
        node_groups=tuple(groups),
        endpoint_url=endpoint,
        log_file=log_file,
        state_dir=state_dir,
        slurm_bin_dir=bin_dir,
        topology_conf=topo,
        insufficient_capacity_hold_seconds=ice_hold,
        failure_hold_seconds=fail_hold,
        orphan_grace_seconds=grace,
        lock_timeout_seconds=lock_timeout,
        max_instances_per_fleet=batch,
        api_retry_mode=retry_mode,
        api_max_attempts=attempts,
        api_concurrency=concurrency,
    )


def config_path(explicit: str | None = None) -> str:
    return explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH


def load_config(path: str | None = None) -> AgentConfig:
    """Read and validate the config file; raise ConfigError (naming the file and every bad key)."""
    p = config_path(path)
    try:
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError([f"cannot read config file: {exc.strerror or exc}"], p) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"], p) from exc
    return parse_config(data, p)
