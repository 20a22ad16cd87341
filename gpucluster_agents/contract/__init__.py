# pyright: strict
"""The node contract: the agent config schema, the tag keys and the node-name rule, defined once.

The Pulumi side (``gpucluster.render.slurm.agent``) builds an :class:`AgentConfig` and writes :func:`to_json`; the
agent reads the file back with :func:`parse`. Both sides import this module (stdlib only, Python 3.9), so the two
ends cannot drift apart. :func:`parse` is strict: unknown keys are errors, so a typo never silently falls back to a
default, and every problem is reported at once with its key path. Schema version 1 is the dataclasses below: a
JSON key per field, the field's default when the key is absent, and ``schema_version`` (optional, must be 1) at the
top. Node names are ``<node_prefix>-<N>``, N = 1..max_nodes (:func:`node_name`); the agent finds a node's group by
the text before the last '-', so group names and prefixes may contain '-' themselves (``train-a`` owns ``train-a-3``).

``mode`` ``dynamic`` groups are Slurm cloud nodes the agent launches and terminates; ``static`` groups belong to an
Auto Scaling group and the agent only names their instances (tag :data:`TAG_NODE_NAME`). How each capacity type
reaches CreateFleet: ``ec2.fleet_request``; the rest: README.md.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, cast

from .grammar import NAME_HINT, NAME_RE
from .jsonread import Reader
from .nodemap import NodeMap, parse_node_map
from .repair import Repair, parse_repair
from .site import Site, parse_site
from .tags import RESERVED_TAG_PREFIXES as RESERVED_TAG_PREFIXES
from .tags import parse_tags
from .updates import Updates, parse_updates

SCHEMA_VERSION = 1
MAX_FLEET_BATCH = 500  # CreateFleet type=instant launches at most this many per call (our cap)
CAPACITY_TYPES = ("on-demand", "spot", "capacity-reservation", "capacity-block")
MODES = ("dynamic", "static")
RETRY_MODES = ("standard", "adaptive")

# --- tag keys: the agent filters and names instances by them, the IAM policy and node setup rely on them
TAG_CLUSTER = "gpucluster:cluster"
TAG_NODE_GROUP = "gpucluster:node-group"
TAG_NODE_NAME = "gpucluster:node-name"  # read by the node from instance metadata: slurmd -N <node>
TAG_LAUNCH_TOKEN = "gpucluster:launch-token"  # CreateFleet idempotency, finds a launch after a crash
TAG_MANAGED_BY = "managed-by"
TAG_ROLE = "gpucluster:role"  # head, login or compute: who may open sessions on an instance (Session Manager policies)
ROLES = ("head", "login", "compute")
MANAGED_BY = "gpucluster"


def node_name(prefix: str, i: int) -> str:
    """The i-th (1-based) node of a group: ``p5-3``."""
    return f"{prefix}-{i}"


def node_names(prefix: str, count: int) -> list[str]:
    return [node_name(prefix, i) for i in range(1, count + 1)]


def hostrange(prefix: str, count: int) -> str:
    """``p5-[1-16]`` (``p5-1`` for one node): the same names as :func:`node_names`, as Slurm writes them."""
    return node_name(prefix, 1) if count == 1 else f"{prefix}-[1-{count}]"


class ConfigError(ValueError):
    """The agent config is missing, unreadable or invalid. ``errors`` lists every problem."""

    def __init__(self, errors: list[str], path: str | None = None) -> None:
        self.errors = list(errors)
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(where + "; ".join(self.errors))


# ``metadata={"omit": True}``: left out of to_json while it holds its default (operator tunables the
# renderer does not set), so the rendered file only carries what the stack decides.
_OMIT = {"omit": True}


@dataclass(frozen=True)
class Capacity:
    type: str = "on-demand"  # one of CAPACITY_TYPES
    reservation_id: str | None = field(default=None, metadata=_OMIT)  # cr-...; required for capacity-block
    resource_group_arn: str | None = field(default=None, metadata=_OMIT)  # targeted ODCRs


@dataclass(frozen=True)
class NodeGroup:
    name: str  # value of tag gpucluster:node-group
    node_prefix: str  # default: name (omitted from JSON when equal)
    max_nodes: int
    instance_type: str
    launch_template_id: str
    launch_template_version: str  # "$Default", "$Latest" or a version number
    subnet_ids: tuple[str, ...]  # one CreateFleet override per subnet
    efa_enabled: bool = False  # true: exactly one subnet, SingleAvailabilityZone
    placement_group: str | None = None  # cluster placement group (not with capacity-block)
    capacity: Capacity = field(default_factory=Capacity)
    tags: tuple[tuple[str, str], ...] = field(default=(), metadata=_OMIT)  # on every instance (<= 40)
    mode: str = "dynamic"  # one of MODES
    # The AMI this group's nodes should run (rolling replacement, docs/rolling-updates.md): an instance whose ImageId differs is
    # on an older image. None: the image of the launch template's `launch_template_version` (the agent asks EC2,
    # DescribeLaunchTemplateVersions) -- what gpucluster renders, so a new image never changes the head node's config.
    image_id: str | None = field(default=None, metadata=_OMIT)

    @property
    def static(self) -> bool:
        """An Auto Scaling group owns the instances; the agent only names them."""
        return self.mode == "static"

    def node_names(self) -> list[str]:
        return node_names(self.node_prefix, self.max_nodes)

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
    cluster_name: str  # value of tag gpucluster:cluster
    region: str
    node_groups: tuple[NodeGroup, ...]
    endpoint_url: str | None = field(default=None, metadata=_OMIT)  # EC2 endpoint override (tests: moto)
    log_file: str = "/var/log/gpucluster/agent.log"
    state_dir: str = "/var/lib/gpucluster/agent"  # locks, launch journal, capacity holds
    slurm_bin_dir: str = "/usr/bin"  # scontrol is <slurm_bin_dir>/scontrol
    topology_conf: str | None = "/etc/slurm/topology.conf"  # None: never write topology.conf
    insufficient_capacity_hold_seconds: int = 600  # group held DOWN after insufficient capacity
    failure_hold_seconds: int = 600  # node held DOWN after any other launch failure
    orphan_grace_seconds: int = 300  # untagged instance age before it counts as an orphan
    lock_timeout_seconds: int = field(default=300, metadata=_OMIT)  # wait for the state_dir lock
    max_instances_per_fleet: int = field(default=MAX_FLEET_BATCH, metadata=_OMIT)  # CreateFleet batch
    api_retry_mode: str = field(default="adaptive", metadata=_OMIT)  # botocore: standard | adaptive
    api_max_attempts: int = field(default=8, metadata=_OMIT)  # botocore attempts per call, 1..20
    api_concurrency: int = field(default=8, metadata=_OMIT)  # parallel CreateTags calls, 1..64
    repair: Repair = field(default_factory=Repair, metadata=_OMIT)  # quarantine and protected mode (repair.py)
    site: Site = field(default_factory=Site, metadata=_OMIT)  # on a site's own slurmctld (site.py)
    node_map: NodeMap | None = field(default=None, metadata=_OMIT)  # where launches publish node names (nodemap.py)
    updates: Updates = field(default_factory=Updates, metadata=_OMIT)  # rolling onto a new image (updates.py)
    spot_queue_url: str | None = field(default=None, metadata=_OMIT)  # SQS queue of spot warnings (power/spot.py)

    @property
    def scontrol(self) -> str:
        return os.path.join(self.slurm_bin_dir, "scontrol")

    def group(self, name: str) -> NodeGroup | None:
        return next((g for g in self.node_groups if g.name == name), None)

    def group_of_node(self, node: str) -> NodeGroup | None:
        return next((g for g in self.node_groups if g.owns(node)), None)


# --------------------------------------------------------------------------- writing


def _fields_dict(obj: Any) -> dict[str, Any]:  # the fields as JSON values, less the omit ones at their default
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if f.metadata.get("omit") and value == (default if default is not MISSING else None):
            continue
        nested = isinstance(value, (Repair, Site, NodeMap, Updates))  # updates.baseline has its own to_dict
        out[f.name] = _fields_dict(value) if nested else (value.to_dict() if hasattr(value, "to_dict") else value)
    return out


def to_dict(cfg: AgentConfig) -> dict[str, Any]:
    """The JSON document :func:`parse` reads back into an equal :class:`AgentConfig`."""
    groups: list[dict[str, Any]] = []
    for g in cfg.node_groups:
        d = _fields_dict(g)
        if g.node_prefix == g.name:
            del d["node_prefix"]
        d["subnet_ids"] = list(g.subnet_ids)
        d["capacity"] = _fields_dict(g.capacity)
        if g.tags:
            d["tags"] = dict(g.tags)
        groups.append(d)
    return {"schema_version": SCHEMA_VERSION, **_fields_dict(cfg), "node_groups": groups}


def to_json(cfg: AgentConfig) -> str:
    """``/etc/gpucluster/agent.json``: sorted keys, so the same config always gives the same bytes."""
    return json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- parsing

_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_ITYPE_RE = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$")
_LT_RE = re.compile(r"^lt-[0-9a-f]+$")
_AMI_RE = re.compile(r"^ami-[0-9a-f]{8,17}$")
_RESERVATION_RE = re.compile(r"^cr-[0-9a-f]+$")
_ARN_RE = re.compile(r"^arn:aws[a-z-]*:resource-groups:")
_URL_RE = re.compile(r"^https?://")
TOP_KEYS = frozenset({"schema_version", *(f.name for f in fields(AgentConfig))})
GROUP_KEYS = frozenset(f.name for f in fields(NodeGroup))
CAPACITY_KEYS = frozenset(f.name for f in fields(Capacity))


def _parse_capacity(r: Reader, raw: Any, path: str) -> Capacity:
    if raw is None:
        return Capacity()
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return Capacity()
    obj = cast("dict[str, Any]", raw)
    r.unknown(obj, CAPACITY_KEYS, path)
    ctype = r.string(obj, "type", path, default="on-demand") or "on-demand"
    if ctype not in CAPACITY_TYPES:
        r.err(f"{path}.type", f"{ctype!r} is not one of {', '.join(CAPACITY_TYPES)}")
        ctype = "on-demand"
    rid_hint = "expected a capacity reservation id like cr-0123456789abcdef0"
    rid = r.string(obj, "reservation_id", path, nullable=True, pattern=_RESERVATION_RE, hint=rid_hint)
    arn_hint = "expected an arn:aws:resource-groups:... ARN"
    arn = r.string(obj, "resource_group_arn", path, nullable=True, pattern=_ARN_RE, hint=arn_hint)
    if ctype == "capacity-block" and not rid:
        r.err(f"{path}.reservation_id", "required when type is capacity-block")
    if ctype in ("on-demand", "spot") and (rid or arn):
        r.err(path, f"reservation_id/resource_group_arn only apply to capacity reservations, not {ctype}")
    return Capacity(type=ctype, reservation_id=rid, resource_group_arn=arn)


def _parse_group(r: Reader, raw: Any, path: str) -> NodeGroup | None:
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return None
    obj = cast("dict[str, Any]", raw)
    before = len(r.errors)
    r.unknown(obj, GROUP_KEYS, path)
    name = r.string(
        obj,
        "name",
        path,
        required=True,
        pattern=NAME_RE,
        hint=NAME_HINT,
    )
    mode = r.string(obj, "mode", path, default="dynamic") or "dynamic"
    if mode not in MODES:
        r.err(f"{path}.mode", f"{mode!r} is not one of {', '.join(MODES)}")
    prefix = r.string(
        obj, "node_prefix", path, default=name, pattern=_PREFIX_RE, hint="a letter, then letters, digits, '_' or '-'"
    )
    max_nodes = r.integer(obj, "max_nodes", path, default=0, minimum=1, maximum=100000, required=True)
    itype = r.string(
        obj, "instance_type", path, required=True, pattern=_ITYPE_RE, hint="expected an EC2 instance type like p5.48xlarge"
    )
    lt_hint = "expected a launch template id like lt-0123456789abcdef0"
    lt_id = r.string(obj, "launch_template_id", path, required=True, pattern=_LT_RE, hint=lt_hint)
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
        one_az = f"an EFA group must stay in one availability zone; give exactly one subnet, got {len(subnets)}"
        r.err(f"{path}.subnet_ids", one_az)
    pg = r.string(obj, "placement_group", path, nullable=True)
    capacity = _parse_capacity(r, obj.get("capacity"), f"{path}.capacity")
    if pg and capacity.type == "capacity-block":
        r.err(f"{path}.placement_group", "placement groups cannot be used with capacity blocks")
    image_id = r.string(
        obj, "image_id", path, nullable=True, pattern=_AMI_RE, hint="expected an AMI id like ami-0123456789abcdef0"
    )
    tags = parse_tags(r, obj.get("tags"), f"{path}.tags")
    if len(r.errors) != before:
        return None
    assert name and prefix and itype and lt_id and lt_version
    return NodeGroup(name, prefix, max_nodes, itype, lt_id, lt_version, subnets, efa, pg, capacity, tags, mode, image_id)


def _parse_groups(r: Reader, obj: dict[str, Any]) -> list[NodeGroup]:
    """``node_groups``: a non-empty list, each group valid, names and node prefixes unique."""
    groups: list[NodeGroup] = []
    raw_groups = obj.get("node_groups")
    if "node_groups" not in obj:
        r.err("node_groups", "required key is missing")
        return groups
    if not isinstance(raw_groups, list) or not raw_groups:
        r.err("node_groups", f"must be a non-empty list, got {raw_groups!r}")
        return groups
    for i, raw in enumerate(cast("list[Any]", raw_groups)):
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
            other = seen_prefix[g.node_prefix]
            r.err(f"node_groups[{i}].node_prefix", f"{g.node_prefix!r} is also used by node_groups[{other}]")
        seen_prefix.setdefault(g.node_prefix, i)
    return groups


def parse(data: Any, path: str | None = None) -> AgentConfig:
    """Validate a decoded JSON document; raise ConfigError listing every problem."""
    errors: list[str] = []
    r = Reader(errors)
    if not isinstance(data, dict):
        raise ConfigError([f"top level must be a JSON object, got {type(data).__name__}"], path)
    obj = cast("dict[str, Any]", data)
    r.unknown(obj, TOP_KEYS, "")
    if "schema_version" in obj and obj["schema_version"] != SCHEMA_VERSION:
        r.err("schema_version", f"this agent reads schema_version {SCHEMA_VERSION}, got {obj['schema_version']!r}")
    cluster = r.string(obj, "cluster_name", "", required=True, pattern=NAME_RE, hint=NAME_HINT)
    region = r.string(obj, "region", "", required=True, pattern=_REGION_RE, hint="expected a region like us-east-1")
    endpoint = r.string(obj, "endpoint_url", "", nullable=True, pattern=_URL_RE, hint="expected an http(s) URL")
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
    repair = parse_repair(r, obj.get("repair"), "repair")
    site = parse_site(r, obj.get("site"), "site")
    node_map = parse_node_map(r, obj.get("node_map"), "node_map")
    updates = parse_updates(r, obj.get("updates"), "updates")
    spot_queue = r.string(obj, "spot_queue_url", "", nullable=True, pattern=_URL_RE, hint="expected an SQS queue URL")
    groups = _parse_groups(r, obj)
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
        repair=repair,
        site=site,
        node_map=node_map,
        updates=updates,
        spot_queue_url=spot_queue,
    )
