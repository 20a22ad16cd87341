"""Checks of one node group against the instance catalog and the cluster around it: instance type,
EFA, zones and subnets, placement, capacity, sizes, public IPs, addresses per subnet, tag count and
scheduler. Each is a ``GroupCheck``; :mod:`gpucluster.config.checks.cluster` runs them for every group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from gpucluster.config.cluster import ClusterSpec, known_region
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import effective_desired, effective_efa
from gpucluster.config.errors import Finding, error, group_path, warning
from gpucluster.config.naming import RESERVED_TAGS
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.efa import interface_layout, ips_per_node
from gpucluster.facts.regions import zone_in_region

MAX_TAGS = 50
# Tags gpucluster adds to every resource (see gpucluster.config.naming.cluster_tags).
RESERVED_TAG_COUNT = len(RESERVED_TAGS)


# --- node group checks ---------------------------------------------------------------------------

GroupCheck = Callable[[int, NodeGroupSpec, InstanceFacts | None, ClusterSpec, Catalog], Iterable[Finding]]


def check_instance_type(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    if facts is None:
        close = catalog.suggest(g.instance_type)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        yield error(
            group_path(i, "instanceType"),
            f"instance type {g.instance_type!r} is not in the instance catalog",
            f"{hint}Known accelerated types: {', '.join(t for t in catalog if catalog[t].accelerator_count)}. "
            "Add another with `gpucluster catalog refresh --add <type>`.",
            g.instance_type,
            "unknown-instance-type",
        )
    elif not facts.accelerator_count:
        yield warning(
            group_path(i, "instanceType"),
            f"instance type {g.instance_type!r} has no GPU or Neuron accelerator",
            "use an accelerated type (p5.48xlarge, g6e.48xlarge, trn1.32xlarge …) for training nodes",
            g.instance_type,
            "no-accelerator",
        )


def check_efa(i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if facts is None:
        return
    if g.enable_efa_support and not facts.efa_supported:
        efa_types = [t for t in catalog if catalog[t].efa_supported and catalog[t].accelerator_count]
        yield error(
            group_path(i, "enableEfaSupport"),
            f"EFA is enabled but {g.instance_type} does not support EFA",
            f"set enableEfaSupport: false, or use an EFA type such as {', '.join(efa_types[:5])}",
            True,
            "efa-unsupported",
        )
    if effective_efa(g, facts) and len(g.availability_zones) > 1:
        yield error(
            group_path(i, "availabilityZones"),
            f"an EFA node group must stay in one Availability Zone, but it spans {list(g.availability_zones)}: "
            "EFA traffic does not cross zones",
            f"keep one zone (e.g. [{g.availability_zones[0]}]), split the group per zone, or set enableEfaSupport: false",
            list(g.availability_zones),
            "efa-multi-az",
        )
    if effective_efa(g, facts):
        slots = interface_layout(facts, True, g.efa_layout)
        per_card: dict[int, int] = {}
        for slot in slots:
            per_card[slot.network_card_index] = per_card.get(slot.network_card_index, 0) + 1
        for card in facts.network_cards:
            if per_card.get(card.index, 0) > card.max_interfaces:
                yield error(
                    group_path(i, "efaLayout"),
                    f"the {g.efa_layout} EFA layout puts {per_card[card.index]} interfaces on network card "
                    f"{card.index} of {g.instance_type}, which takes {card.max_interfaces}",
                    "use efaLayout: legacy (one interface per card)",
                    g.efa_layout,
                    "efa-card-interfaces",
                )


def check_zones(i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    for zone in g.availability_zones:
        if known_region(spec.region) and not zone_in_region(zone, spec.region):
            yield error(
                group_path(i, "availabilityZones"),
                f"zone {zone!r} is not in region {spec.region}",
                f"use zones of {spec.region}, e.g. {spec.region}a, or change aws:region",
                zone,
                "zone-region",
            )


def check_subnets(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    net = spec.network
    if g.subnet_ids and net.create_vpc:
        yield error(
            group_path(i, "subnetIds"),
            "subnetIds are only used with your own VPC (network.vpcId); gpucluster creates the subnets of a new VPC",
            "remove subnetIds, or set network.vpcId and network.subnets",
            list(g.subnet_ids),
            "subnets-without-vpc",
        )
        return
    for subnet in g.subnet_ids:
        zone = net.subnet_zone(subnet)
        if zone is None:
            yield error(
                group_path(i, "subnetIds"),
                f"subnet {subnet} is not listed in network.subnets",
                "add it to network.subnets with its availabilityZone, or pick one of " + ", ".join(s.id for s in net.subnets),
                subnet,
                "subnet-unknown",
            )
        elif zone not in g.availability_zones:
            yield error(
                group_path(i, "subnetIds"),
                f"subnet {subnet} is in {zone}, outside the group's zones {list(g.availability_zones)}",
                f"use a subnet in {', '.join(g.availability_zones)}, or add {zone} to availabilityZones"
                + (" (an EFA group keeps one zone)" if effective_efa(g, facts) else ""),
                subnet,
                "subnet-outside-zone",
            )
    if not net.create_vpc and not g.subnet_ids:
        for zone in g.availability_zones:
            if not any(s.availability_zone == zone for s in net.subnets):
                yield error(
                    group_path(i, "availabilityZones"),
                    f"no subnet of network.subnets is in {zone}",
                    f"add a private subnet in {zone} to network.subnets, or choose a zone that has one: "
                    + ", ".join(sorted({s.availability_zone for s in net.subnets})),
                    zone,
                    "zone-without-subnet",
                )


def check_placement(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    wants_pg = g.create_placement_group is True or g.placement_group_name is not None
    field = "createPlacementGroup" if g.create_placement_group else "placementGroupName"
    if g.create_placement_group and g.placement_group_name:
        yield error(
            group_path(i, "placementGroupName"),
            "createPlacementGroup and placementGroupName both set: a group launches into one placement group",
            "keep placementGroupName to use the existing group, or remove it to create one",
            g.placement_group_name,
            "placement-group-twice",
        )
    if wants_pg and g.capacity.type == "capacity-block":
        yield error(
            group_path(i, field),
            "a placement group cannot be used with a capacity block: EC2 places the block's instances itself",
            "remove the placement group (createPlacementGroup: false); the block is already co-located",
            g.create_placement_group if g.create_placement_group else g.placement_group_name,
            "placement-group-capacity-block",
        )
    elif wants_pg and g.capacity.type == "capacity-reservation":
        yield warning(
            group_path(i, field),
            "a placement group can stop a capacity reservation from delivering all its instances "
            "(only reserved capacity inside the group can be used)",
            "use the placement group the reservation was created in (placementGroupName), or none",
            g.create_placement_group if g.create_placement_group else g.placement_group_name,
            "placement-group-capacity-reservation",
        )
    if g.create_placement_group and len(g.availability_zones) > 1:
        yield error(
            group_path(i, "createPlacementGroup"),
            f"a cluster placement group lives in one zone, but the group spans {list(g.availability_zones)}",
            "keep one zone, or set createPlacementGroup: false",
            True,
            "placement-group-multi-az",
        )
    if g.create_placement_group and facts is not None and not facts.supports_cluster_placement:
        yield error(
            group_path(i, "createPlacementGroup"),
            f"{g.instance_type} does not support cluster placement groups",
            "set createPlacementGroup: false",
            True,
            "placement-group-unsupported",
        )


def check_capacity(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    cap = g.capacity
    if cap.instance_count is not None and g.max_size > cap.instance_count:
        yield error(
            group_path(i, "maxSize"),
            f"maxSize {g.max_size} is above the {cap.instance_count} instances {cap.reservation_id or 'the reservation'} "
            "holds; launches beyond it fail",
            f"set maxSize to at most {cap.instance_count}, or enlarge the reservation and update capacity.instanceCount",
            g.max_size,
            "max-size-above-reservation",
        )
    if cap.reserved and len(g.availability_zones) > 1:
        yield error(
            group_path(i, "availabilityZones"),
            f"a {cap.type} lives in one Availability Zone, but the group spans {list(g.availability_zones)}",
            "list only the reservation's zone",
            list(g.availability_zones),
            "reservation-multi-az",
        )
    if cap.type == "capacity-block" and facts is not None and facts.usage_classes and "capacity-block" not in facts.usage_classes:
        blocks = [t for t in catalog if "capacity-block" in catalog[t].usage_classes]
        yield error(
            group_path(i, "capacity.type"),
            f"{g.instance_type} is not sold as a capacity block",
            f"use on-demand, spot or a capacity reservation, or a type sold in blocks: {', '.join(blocks)}",
            "capacity-block",
            "capacity-block-unsupported",
        )
    if cap.type == "spot" and facts is not None and not facts.supports_spot:
        yield error(
            group_path(i, "capacity.type"),
            f"{g.instance_type} is not sold as spot",
            "use on-demand, capacity-reservation or capacity-block",
            "spot",
            "spot-unsupported",
        )


def check_sizes(i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    desired = effective_desired(g)
    if g.min_size > g.max_size:
        yield error(
            group_path(i, "minSize"),
            f"minSize {g.min_size} is greater than maxSize {g.max_size}",
            f"make minSize <= maxSize (e.g. maxSize: {g.min_size})",
            g.min_size,
            "sizes",
        )
    elif not g.min_size <= desired <= g.max_size:
        yield error(
            group_path(i, "desiredSize"),
            f"desiredSize {desired} is outside minSize {g.min_size} .. maxSize {g.max_size}",
            f"set desiredSize between {g.min_size} and {g.max_size}",
            desired,
            "sizes",
        )


def check_public_ip(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    if not g.associate_public_ip_address:
        return
    if facts is not None and facts.multi_card:
        yield error(
            group_path(i, "associatePublicIpAddress"),
            f"{g.instance_type} has {len(facts.network_cards)} network cards; EC2 cannot auto-assign a public IP "
            "to an instance with several network interfaces",
            "set associatePublicIpAddress: false and reach nodes through SSM Session Manager or a bastion",
            True,
            "public-ip-multi-card",
        )
    elif spec.network.create_vpc:
        yield error(
            group_path(i, "associatePublicIpAddress"),
            "nodes of a gpucluster VPC live in private subnets, where a public IP is unreachable",
            "set associatePublicIpAddress: false (use SSM Session Manager), or bring your own VPC",
            True,
            "public-ip-private-subnet",
        )


def check_addresses(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    """A node takes one private IP per full interface; the subnet must hold the whole group."""
    if facts is None or not spec.network.create_vpc or len(g.availability_zones) != 1:
        return
    slots = interface_layout(facts, effective_efa(g, facts), g.efa_layout)
    need = g.max_size * ips_per_node(slots)
    usable = 2 ** (32 - spec.network.private_subnet_prefix_length) - 5  # AWS reserves 5 per subnet
    if need > usable:
        yield error(
            group_path(i, "maxSize"),
            f"{g.max_size} nodes × {ips_per_node(slots)} IP addresses each ({g.efa_layout} layout) = {need} addresses, "
            f"more than a /{spec.network.private_subnet_prefix_length} subnet's {usable}",
            "use efaLayout: current (efa-only interfaces take no IP), a larger network.privateSubnetPrefixLength, "
            "or a smaller maxSize",
            g.max_size,
            "subnet-exhaustion",
        )


def check_tag_count(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    total = len({**spec.tags, **g.tags}) + RESERVED_TAG_COUNT
    if total > MAX_TAGS:
        yield error(
            group_path(i, "tags"),
            f"this group's resources would carry {total} tags; AWS allows {MAX_TAGS}",
            f"drop {total - MAX_TAGS} tags from gpucluster:tags or this group's tags",
            total,
            "too-many-tags",
        )


def check_scheduler(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    if g.scheduler in ("slurm", "kubernetes") and g.scheduler not in spec.schedulers:
        yield error(
            group_path(i, "scheduler"),
            f"the group asks for {g.scheduler}, but the cluster configures no {g.scheduler} (gpucluster:{g.scheduler})",
            f"add a gpucluster:{g.scheduler} section, or set scheduler to one of: {', '.join([*spec.schedulers, 'none'])}",
            g.scheduler,
            "scheduler-missing",
        )
