"""The cluster's own preflight checks: each instance type is offered in each zone it is asked for; a capacity
reservation or block exists, is active (or when it starts), holds the instance type in the group's zone, and
has room for ``maxSize``; bring-your-own subnets exist in the VPC and zone the config says; an existing FSx
file system exists and is in the group's zone; vCPU quotas cover the on-demand and spot groups at maximum
size. Each check returns findings with the config path, like the validators."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.tools.preflight.clients import Clients

# EC2 vCPU quota codes (service "ec2") by instance family letter and purchase option.
ON_DEMAND_QUOTAS = {"p": "L-417A185B", "g": "L-DB2E81BA", "trn": "L-2C3B7624", "standard": "L-1216C47A"}
SPOT_QUOTAS = {"p": "L-7212CCBC", "g": "L-3819A6DF", "trn": "L-6B0D517C", "standard": "L-34B43A08"}


def quota_family(instance_type: str) -> str:
    family = instance_type.split(".", 1)[0]
    if family.startswith("trn"):
        return "trn"
    if family[0] in ("p", "g"):
        return family[0]
    return "standard"


Check = Callable[[ClusterSpec, Catalog, Clients], Iterator[Finding]]


def check_offerings(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    for i, g in enumerate(spec.node_groups):
        pages = aws.ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [g.instance_type]}],
        )
        offered = {o["Location"] for page in pages for o in page["InstanceTypeOfferings"]}
        for zone in g.availability_zones:
            if zone not in offered:
                yield error(
                    f"gpucluster:nodeGroups[{i}].availabilityZones",
                    f"{g.instance_type} is not offered in {zone}",
                    f"use a zone that offers it: {', '.join(sorted(offered)) or f'none in {spec.region}'}",
                    zone,
                    "type-not-offered",
                )


def check_reservations(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    now = datetime.now(timezone.utc)
    for i, g in enumerate(spec.node_groups):
        cap = g.capacity
        if not cap.reservation_id:
            continue
        path = f"gpucluster:nodeGroups[{i}].capacity.reservationId"
        try:
            found = aws.ec2.describe_capacity_reservations(CapacityReservationIds=[cap.reservation_id])["CapacityReservations"]
        except aws.ec2.exceptions.ClientError as exc:
            code = exc.response["Error"]["Code"]
            yield error(
                path,
                f"EC2 does not know {cap.reservation_id} ({code})",
                "check the id and the region",
                cap.reservation_id,
                "reservation-missing",
            )
            continue
        if not found:
            yield error(
                path,
                f"EC2 does not know {cap.reservation_id}",
                "check the id and the region",
                cap.reservation_id,
                "reservation-missing",
            )
            continue
        yield from _reservation_fit(i, g, found[0])
        yield from _reservation_state(path, g, found[0], now)


def _reservation_fit(i: int, g: NodeGroupSpec, r: dict[str, Any]) -> Iterator[Finding]:
    """Whether reservation ``r`` holds group ``i``'s instance type, in its zone, of its kind, with room for ``maxSize``."""
    cap = g.capacity
    rid = str(cap.reservation_id)
    path = f"gpucluster:nodeGroups[{i}].capacity.reservationId"
    if r.get("InstanceType") != g.instance_type:
        yield error(
            path,
            f"{rid} reserves {r.get('InstanceType')}, not {g.instance_type}",
            f"set instanceType: {r.get('InstanceType')} or target another reservation",
            rid,
            "reservation-type",
        )
    if r.get("AvailabilityZone") not in g.availability_zones:
        yield error(
            path,
            f"{rid} is in {r.get('AvailabilityZone')}, not in {list(g.availability_zones)}",
            f"set availabilityZones: [{r.get('AvailabilityZone')}]",
            rid,
            "reservation-zone",
        )
    is_block = r.get("ReservationType") == "capacity-block"
    if cap.type == "capacity-block" and not is_block:
        yield error(
            f"gpucluster:nodeGroups[{i}].capacity.type",
            f"{rid} is an On-Demand Capacity Reservation, not a capacity block",
            "set capacity.type: capacity-reservation",
            cap.type,
            "reservation-kind",
        )
    if cap.type == "capacity-reservation" and is_block:
        yield error(
            f"gpucluster:nodeGroups[{i}].capacity.type",
            f"{rid} is a capacity block",
            "set capacity.type: capacity-block",
            cap.type,
            "reservation-kind",
        )
    total = int(r.get("TotalInstanceCount", 0))
    if g.max_size > total:
        yield error(
            f"gpucluster:nodeGroups[{i}].maxSize",
            f"maxSize {g.max_size} is above the {total} instances {rid} holds",
            f"set maxSize to at most {total}",
            g.max_size,
            "max-size-above-reservation",
        )
    if cap.instance_count is not None and cap.instance_count != total:
        yield warning(
            f"gpucluster:nodeGroups[{i}].capacity.instanceCount",
            f"the config says {cap.instance_count} instances, EC2 says {rid} holds {total}",
            f"set instanceCount: {total}",
            cap.instance_count,
            "reservation-count",
        )


def _reservation_state(path: str, g: NodeGroupSpec, r: dict[str, Any], now: datetime) -> Iterator[Finding]:
    """Whether reservation ``r`` is open to others, has ended or not begun, and has room for ``desiredSize`` now."""
    cap = g.capacity
    rid = str(cap.reservation_id)
    total = int(r.get("TotalInstanceCount", 0))
    if r.get("InstanceMatchCriteria") == "open" and cap.type == "capacity-reservation":
        yield info(
            path,
            f"{rid} is open: any matching instance in the account may use it",
            "make it targeted if other workloads must not take it",
            rid,
            "reservation-open",
        )
    state = r.get("State")
    start, end = r.get("StartDate"), r.get("EndDate")
    if state in ("expired", "cancelled", "failed"):
        yield error(path, f"{rid} is {state}", "buy or create another one", rid, "reservation-state")
    elif state in ("scheduled", "pending") and start:
        yield info(path, f"{rid} starts at {start:%Y-%m-%d %H:%M} UTC; nodes launch from then on", "", rid, "reservation-starts")
    if end is not None and end < now:
        yield error(path, f"{rid} ended at {end:%Y-%m-%d %H:%M} UTC", "buy or create another one", rid, "reservation-ended")
    elif state == "active" and int(r.get("AvailableInstanceCount", total)) < (g.desired_size or 0):
        yield warning(
            path,
            f"{rid} has {r.get('AvailableInstanceCount')} free instances; the group wants {(g.desired_size or 0)} now",
            "free instances in the reservation, or lower desiredSize",
            rid,
            "reservation-full",
        )


def check_subnets(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    net = spec.network
    if net.create_vpc:
        return
    try:
        subnets = aws.ec2.describe_subnets(SubnetIds=[s.id for s in net.subnets])["Subnets"]
    except aws.ec2.exceptions.ClientError as exc:
        yield error(
            "gpucluster:network.subnets",
            f"EC2 does not know every subnet listed ({exc.response['Error']['Code']})",
            "check the subnet ids and the region",
            [s.id for s in net.subnets],
            "subnet-missing",
        )
        return
    actual = {s["SubnetId"]: s for s in subnets}
    for j, subnet in enumerate(net.subnets):
        found = actual.get(subnet.id)
        if found is None:
            continue
        if found["VpcId"] != net.vpc_id:
            yield error(
                f"gpucluster:network.subnets[{j}].id",
                f"{subnet.id} belongs to {found['VpcId']}, not {net.vpc_id}",
                f"list subnets of {net.vpc_id}",
                subnet.id,
                "subnet-vpc",
            )
        if found["AvailabilityZone"] != subnet.availability_zone:
            yield error(
                f"gpucluster:network.subnets[{j}].availabilityZone",
                f"{subnet.id} is in {found['AvailabilityZone']}, not {subnet.availability_zone}",
                f"set availabilityZone: {found['AvailabilityZone']}",
                subnet.availability_zone,
                "subnet-zone",
            )


def check_file_system(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    storage = spec.storage
    if storage is None or storage.lustre is None or not storage.lustre.file_system_id:
        return
    fs_id = storage.lustre.file_system_id
    path = "gpucluster:storage.lustre.fileSystemId"
    try:
        systems = aws.fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
    except aws.fsx.exceptions.ClientError as exc:
        yield error(
            path,
            f"FSx does not know {fs_id} ({exc.response['Error']['Code']})",
            "check the id and the region",
            fs_id,
            "file-system-missing",
        )
        return
    if not systems:
        yield error(path, f"FSx does not know {fs_id}", "check the id and the region", fs_id, "file-system-missing")
        return
    fs = systems[0]
    if fs.get("FileSystemType") != "LUSTRE":
        yield error(
            path,
            f"{fs_id} is an FSx for {fs.get('FileSystemType')} file system, not Lustre",
            "give a Lustre file system",
            fs_id,
            "file-system-type",
        )
    subnet_ids = fs.get("SubnetIds") or []
    if subnet_ids:
        zone = aws.ec2.describe_subnets(SubnetIds=subnet_ids[:1])["Subnets"][0]["AvailabilityZone"]
        for g in spec.node_groups:
            if g.name in (storage.lustre.node_groups or ()) and g.enable_efa_support and zone not in g.availability_zones:
                yield error(
                    path,
                    f"{fs_id} is in {zone}, but EFA node group {g.name!r} is in {', '.join(g.availability_zones)}",
                    f"mount it only from groups in {zone}",
                    fs_id,
                    "file-system-zone",
                )


def check_quotas(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    need: dict[tuple[str, str], int] = {}
    for g in spec.node_groups:
        facts: InstanceFacts = catalog[g.instance_type]
        if g.capacity.type == "capacity-block":
            continue  # capacity blocks are bought capacity, outside the vCPU quotas
        option = "spot" if g.capacity.type == "spot" else "on-demand"
        codes = SPOT_QUOTAS if option == "spot" else ON_DEMAND_QUOTAS
        key = (option, codes[quota_family(g.instance_type)])
        need[key] = need.get(key, 0) + g.max_size * facts.vcpus
    for (option, code), vcpus in sorted(need.items()):
        try:
            quota = aws.quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
        except aws.quotas.exceptions.ClientError as exc:
            yield warning(
                "gpucluster:nodeGroups",
                f"could not read quota {code} ({exc.response['Error']['Code']})",
                "grant servicequotas:GetServiceQuota to check quotas before deploying",
                code,
                "quota-unknown",
            )
            continue
        limit = int(quota.get("Value", 0))
        if vcpus > limit:
            yield error(
                "gpucluster:nodeGroups",
                f"the {option} groups need {vcpus:,} vCPUs at maximum size, but the quota '{quota.get('QuotaName', code)}' "
                f"({code}) is {limit:,}",
                f"request an increase to at least {vcpus:,} in Service Quotas, or lower maxSize",
                vcpus,
                "quota",
            )
