"""Security-group rules, one helper for every component (Network, LustreStorage, …)."""

from __future__ import annotations

from typing import Literal

import pulumi
import pulumi_aws as aws

Direction = Literal["in", "out"]
# Both directions of a symmetric rule, with the word each one's description uses.
BOTH_WAYS: tuple[tuple[Direction, str], ...] = (("in", "from"), ("out", "to"))


def allow(
    name: str,
    direction: Direction,
    security_group_id: pulumi.Input[str],
    *,
    description: str,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
    peer_security_group_id: pulumi.Input[str] | None = None,
    cidr: pulumi.Input[str] | None = None,
    protocol: str = "-1",
    ports: tuple[int, int] | None = None,
) -> aws.vpc.SecurityGroupIngressRule | aws.vpc.SecurityGroupEgressRule:
    """One ingress (``in``) or egress (``out``) rule to/from a security group or a CIDR block.

    ``protocol="-1"`` is all traffic (no ports); otherwise ``ports`` is the (from, to) range.
    """
    low, high = ports if ports else (None, None)
    rule = aws.vpc.SecurityGroupIngressRule if direction == "in" else aws.vpc.SecurityGroupEgressRule
    return rule(
        name,
        security_group_id=security_group_id,
        referenced_security_group_id=peer_security_group_id,
        cidr_ipv4=cidr,
        ip_protocol=protocol,
        from_port=low,
        to_port=high,
        description=description,
        tags=tags,
        opts=opts,
    )
