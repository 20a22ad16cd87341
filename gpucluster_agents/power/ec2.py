# pyright: strict, reportMissingTypeStubs=false
"""EC2 calls of the agent: CreateFleet (instant), CreateTags, DescribeInstances, TerminateInstances,
DescribeInstanceTopology. boto3 only; retries of throttling come from botocore's retry config."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable, TypeVar, cast

from boto3.session import Session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ..contract import TAG_CLUSTER, TAG_LAUNCH_TOKEN, TAG_NODE_GROUP, TAG_NODE_NAME, AgentConfig, NodeGroup
from ..contract.site import session_kwargs
from .error_codes import NOT_FOUND, UNCERTAIN_CODES

log = logging.getLogger("gpucluster_agents")

LIVE_STATES = ("pending", "running")
NOT_TERMINATED_STATES = ("pending", "running", "stopping", "stopped")

TERMINATE_BATCH = 1000  # TerminateInstances accepts up to 1000 ids
TOPOLOGY_BATCH = 100  # DescribeInstanceTopology: at most 100 explicit instance ids

T = TypeVar("T")
AWS_ERRORS = (ClientError, BotoCoreError)  # what a failed EC2 call raises


@dataclass(frozen=True)
class Instance:
    id: str
    state: str
    launch_time: datetime
    private_ip: str | None
    instance_type: str
    tags: dict[str, str] = field(default_factory=lambda: {})
    image_id: str = ""  # the AMI it runs (DescribeInstances ImageId): the rolling update compares it (roll.py)

    @property
    def node(self) -> str | None:
        return self.tags.get(TAG_NODE_NAME)

    @property
    def group(self) -> str | None:
        return self.tags.get(TAG_NODE_GROUP)

    @property
    def token(self) -> str | None:
        return self.tags.get(TAG_LAUNCH_TOKEN)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def age(self, now: float) -> float:
        return now - self.launch_time.timestamp()


@dataclass
class FleetResult:
    instance_ids: list[str]
    errors: list[tuple[str, str]]  # (code, message)
    uncertain: bool = False  # the call failed in a way that may still have launched instances


def make_client(cfg: AgentConfig, service: str = "ec2") -> Any:
    config = Config(
        region_name=cfg.region,
        retries={"mode": cfg.api_retry_mode, "total_max_attempts": cfg.api_max_attempts},
        connect_timeout=10,
        read_timeout=120,
        user_agent_extra="gpucluster-agent",
    )
    session = Session(region_name=cfg.region, **session_kwargs(cfg.site))  # a site's controller: its profile only
    client = cast(Any, session.client(service, endpoint_url=cfg.endpoint_url, config=config))  # pyright: ignore[reportUnknownMemberType]
    client.meta.events.register_first(f"needs-retry.{service}", _log_attempt)
    return client


def _d(value: Any) -> dict[str, Any]:
    """A JSON object from a boto3 response, or {} (typed for the checker)."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return cast("list[Any]", value) if isinstance(value, list) else []


def _log_attempt(**kwargs: Any) -> None:
    """Log every failed attempt botocore sees (throttling included) before it decides to retry."""
    response = kwargs.get("response")
    caught = kwargs.get("caught_exception")
    operation = kwargs.get("operation")
    code: str | None = None
    if isinstance(response, tuple) and len(cast("tuple[Any, ...]", response)) == 2:
        err = _d(_d(cast("tuple[Any, Any]", response)[1]).get("Error"))
        if err.get("Code"):
            code = str(err["Code"])
    if code or caught is not None:
        log.info("api %s attempt=%s error=%s", getattr(operation, "name", "?"), kwargs.get("attempts"), code or repr(caught))
    return None


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(_d(_d(exc.response).get("Error")).get("Code") or "ClientError")  # pyright: ignore[reportUnknownMemberType]
    return type(exc).__name__


def error_message(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(_d(_d(exc.response).get("Error")).get("Message") or exc)  # pyright: ignore[reportUnknownMemberType]
    return str(exc)


def _instance_from_api(raw: dict[str, Any]) -> Instance:
    tags = {str(_d(t).get("Key")): str(_d(t).get("Value", "")) for t in _l(raw.get("Tags"))}
    lt = raw.get("LaunchTime")
    if not isinstance(lt, datetime):
        lt = datetime.now(timezone.utc)
    elif lt.tzinfo is None:
        lt = lt.replace(tzinfo=timezone.utc)
    return Instance(
        id=str(raw["InstanceId"]),
        state=str(raw.get("State", {}).get("Name", "unknown")),
        launch_time=lt,
        private_ip=raw.get("PrivateIpAddress"),
        instance_type=str(raw.get("InstanceType", "")),
        tags=tags,
        image_id=str(raw.get("ImageId") or ""),
    )


def fleet_request(cfg: AgentConfig, group: NodeGroup, count: int, token: str) -> dict[str, Any]:
    """The CreateFleet (type=instant) request for ``count`` instances of ``group`` (pure; tested).

    Capacity: on-demand, spot (price-capacity-optimized), capacity-reservation (on-demand, reservations
    first; targeted ones named by the launch template), capacity-block (template targets reservation_id).
    """
    overrides: list[dict[str, Any]] = []
    for subnet in group.subnet_ids:
        o: dict[str, Any] = {"InstanceType": group.instance_type, "SubnetId": subnet}
        if group.placement_group:
            o["Placement"] = {"GroupName": group.placement_group}
        overrides.append(o)
    tags = [
        {"Key": TAG_CLUSTER, "Value": cfg.cluster_name},
        {"Key": TAG_NODE_GROUP, "Value": group.name},
        {"Key": TAG_LAUNCH_TOKEN, "Value": token},
    ] + [{"Key": k, "Value": v} for k, v in group.tags]
    req: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": token,
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateId": group.launch_template_id,
                    "Version": group.launch_template_version,
                },
                "Overrides": overrides,
            }
        ],
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}],
    }
    ctype = group.capacity.type
    single_az = group.efa_enabled
    if ctype == "spot":
        req["TargetCapacitySpecification"] = {"TotalTargetCapacity": count, "DefaultTargetCapacityType": "spot"}
        spot: dict[str, Any] = {"AllocationStrategy": "price-capacity-optimized"}
        if single_az:
            spot["SingleAvailabilityZone"] = True
        req["SpotOptions"] = spot
    elif ctype == "capacity-block":
        req["TargetCapacitySpecification"] = {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": "capacity-block",
        }
    else:
        req["TargetCapacitySpecification"] = {"TotalTargetCapacity": count, "DefaultTargetCapacityType": "on-demand"}
        od: dict[str, Any] = {"AllocationStrategy": "lowest-price"}
        if ctype == "capacity-reservation":
            od["CapacityReservationOptions"] = {"UsageStrategy": "use-capacity-reservations-first"}
        if single_az:
            od["SingleAvailabilityZone"] = True
        req["OnDemandOptions"] = od
    return req


class Ec2:
    def __init__(self, cfg: AgentConfig, client: Any = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.cfg = cfg
        self.client = client if client is not None else make_client(cfg)
        self.sleep = sleep

    # ------------------------------------------------------------------ helpers
    def _retry_not_found(self, what: str, fn: Callable[[], T], attempts: int = 6) -> T:
        """EC2 is eventually consistent: an instance id just returned by CreateFleet can be
        unknown to the next call for a moment. Retry those NotFound errors with backoff."""
        delay = 0.25
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except ClientError as exc:
                if error_code(exc) not in NOT_FOUND or attempt == attempts:
                    raise
                log.info("api %s: %s (eventual consistency), retry %d in %.2fs", what, error_code(exc), attempt, delay)
                self.sleep(delay)
                delay = min(delay * 2, 4.0)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ reads
    def list_cluster_instances(self) -> list[Instance]:
        """Every not-terminated instance with the cluster tag and a node-group tag, whether or not the
        config still has that group: instances of removed or renamed groups must stay visible to be
        cleaned up (``lifecycle.split_strays`` tells them apart). Instances without a node-group tag,
        such as the head node, are not the agent's and never listed."""
        out: list[Instance] = []
        pages = 0
        paginator = self.client.get_paginator("describe_instances")
        for page in paginator.paginate(
            Filters=[
                {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cfg.cluster_name]},
                {"Name": "tag-key", "Values": [TAG_NODE_GROUP]},
                {"Name": "instance-state-name", "Values": list(NOT_TERMINATED_STATES)},
            ],
            PaginationConfig={"PageSize": 1000},
        ):
            pages += 1
            for res in page.get("Reservations", []):
                for raw in res.get("Instances", []):
                    out.append(_instance_from_api(raw))
        log.info("api DescribeInstances cluster=%s pages=%d instances=%d", self.cfg.cluster_name, pages, len(out))
        return out

    def describe_launch(self, token: str, ids: Sequence[str]) -> dict[str, Instance]:
        """Instances of one launch (by launch-token tag), waiting briefly for all ``ids`` to be visible."""
        want = set(ids)
        found: dict[str, Instance] = {}
        delay = 0.25
        for attempt in range(1, 7):
            paginator = self.client.get_paginator("describe_instances")
            for page in paginator.paginate(
                Filters=[
                    {"Name": f"tag:{TAG_LAUNCH_TOKEN}", "Values": [token]},
                    {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cfg.cluster_name]},
                ],
                PaginationConfig={"PageSize": 1000},
            ):
                for res in page.get("Reservations", []):
                    for raw in res.get("Instances", []):
                        inst = _instance_from_api(raw)
                        found[inst.id] = inst
            missing = want - set(found)
            log.info("api DescribeInstances launch-token=%s found=%d missing=%d", token, len(want & set(found)), len(missing))
            if not missing or attempt == 6:
                break
            self.sleep(delay)
            delay = min(delay * 2, 4.0)
        return found

    # ------------------------------------------------------------------ writes
    def create_fleet(self, group: NodeGroup, count: int, token: str, nodes: Sequence[str]) -> FleetResult:
        req = fleet_request(self.cfg, group, count, token)
        cap = group.capacity
        try:
            resp = self.client.create_fleet(**req)
        except (ClientError, BotoCoreError) as exc:
            code, msg = error_code(exc), error_message(exc)
            log.error(
                "api CreateFleet group=%s token=%s count=%d capacity=%s reservation=%s nodes=%s failed: %s: %s",
                group.name,
                token,
                count,
                cap.type,
                cap.reservation_id or cap.resource_group_arn or "-",
                ",".join(nodes),
                code,
                msg,
            )
            uncertain = not isinstance(exc, ClientError) or code in UNCERTAIN_CODES
            return FleetResult([], [(code, msg)], uncertain=uncertain)
        ids: list[str] = []
        for item in _l(resp.get("Instances")):
            for iid in _l(_d(item).get("InstanceIds")):
                if str(iid) not in ids:
                    ids.append(str(iid))
        errors = [
            (str(_d(e).get("ErrorCode") or "UnknownError"), str(_d(e).get("ErrorMessage") or "")) for e in _l(resp.get("Errors"))
        ]
        log.info(
            "api CreateFleet group=%s token=%s fleet=%s count=%d capacity=%s reservation=%s launched=%d instances=%s errors=%s",
            group.name,
            token,
            resp.get("FleetId", "-"),
            count,
            cap.type,
            cap.reservation_id or cap.resource_group_arn or "-",
            len(ids),
            ",".join(ids) or "-",
            ";".join(f"{c}:{m}" for c, m in errors) or "-",
        )
        return FleetResult(ids, errors)

    def tag_nodes(self, assignments: dict[str, str]) -> dict[str, str]:
        """Tag each instance with its node name (one CreateTags per instance, in parallel).
        Returns {instance_id: error} for the ones that could not be tagged."""

        def one(item: tuple[str, str]) -> tuple[str, str | None]:
            iid, node = item
            tags = [{"Key": TAG_NODE_NAME, "Value": node}, {"Key": "Name", "Value": f"{self.cfg.cluster_name}-{node}"}]
            try:
                self._retry_not_found(f"CreateTags {iid}", lambda: self.client.create_tags(Resources=[iid], Tags=tags))
            except (ClientError, BotoCoreError) as exc:
                log.error("api CreateTags instance=%s node=%s failed: %s: %s", iid, node, error_code(exc), error_message(exc))
                return iid, f"{error_code(exc)}"
            log.info("api CreateTags instance=%s node=%s", iid, node)
            return iid, None

        items = sorted(assignments.items())
        workers = max(1, min(self.cfg.api_concurrency, len(items)))
        if workers == 1:
            results = [one(i) for i in items]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(one, items))
        return {iid: err for iid, err in results if err}

    def terminate(self, ids: Sequence[str], why: str, fresh: bool = False) -> list[str]:
        """Terminate in batches of 1000; returns ids not terminated. Ids EC2 no longer knows count as
        gone, unless ``fresh`` (just launched): then NotFound is eventual consistency, retried with
        backoff and never read as gone, so the launch journal keeps the instance until it is."""
        remaining = sorted(set(ids))
        failed: list[str] = []
        for i in range(0, len(remaining), TERMINATE_BATCH):
            batch: list[str] = remaining[i : i + TERMINATE_BATCH]
            for _round in range(3):
                if not batch:
                    break
                try:
                    call = partial(self.client.terminate_instances, InstanceIds=batch)
                    self._retry_not_found("TerminateInstances", call) if fresh else call()
                    log.info("api TerminateInstances reason=%s count=%d instances=%s", why, len(batch), ",".join(batch))
                    batch = []
                except ClientError as exc:
                    if error_code(exc) in NOT_FOUND and not fresh:
                        gone = set(re.findall(r"i-[0-9a-f]+", error_message(exc))) & set(batch)
                        if gone:
                            log.info("api TerminateInstances: already gone %s", ",".join(sorted(gone)))
                            batch = [b for b in batch if b not in gone]
                            continue
                    log.error(
                        "api TerminateInstances reason=%s instances=%s failed: %s: %s",
                        why,
                        ",".join(batch),
                        error_code(exc),
                        error_message(exc),
                    )
                    break
                except BotoCoreError as exc:
                    log.error("api TerminateInstances instances=%s failed: %s", ",".join(batch), exc)
                    break
            failed.extend(batch)
        return failed

    def instance_topology(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """DescribeInstanceTopology for ``ids`` (<=100 per call, following NextToken).
        Instances of unsupported types or not yet running come back without network nodes."""
        out: dict[str, list[str]] = {}
        ordered = sorted(set(ids))
        for i in range(0, len(ordered), TOPOLOGY_BATCH):
            batch = ordered[i : i + TOPOLOGY_BATCH]
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"InstanceIds": batch}
                if token:
                    kwargs["NextToken"] = token
                resp = self.client.describe_instance_topology(**kwargs)
                got = _l(resp.get("Instances"))
                for item in got:
                    nodes = [str(n) for n in _l(_d(item).get("NetworkNodes"))]
                    if nodes:
                        out[str(_d(item).get("InstanceId"))] = nodes
                log.info(
                    "api DescribeInstanceTopology ids=%d returned=%d next=%s", len(batch), len(got), bool(resp.get("NextToken"))
                )
                token = resp.get("NextToken")
                if not token:
                    break
        return out
