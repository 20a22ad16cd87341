"""The cloud nodes' Slurm security group towards a site, built alone: the optional slurmdbd rule, login
networks, and a site's own port choices."""

from __future__ import annotations

import pulumi

from gpucluster.components.hybrid._security import hybrid_node_security_group
from gpucluster.config.hybrid import HybridSpec

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


def spec(**controller) -> HybridSpec:
    return HybridSpec.model_validate(
        {
            "on_prem_cidrs": ["10.20.0.0/16", "172.16.0.0/16"],
            "controller": {"host": "ctl", "address": "10.20.0.10", "slurm_version": "22.05", **controller},
            "connectivity": {"type": "existing-tgw", "transit_gateway_id": "tgw-0123456789abcdef0"},
            "credentials": {"type": "ssm"},
            "login_node_cidrs": ["10.20.8.0/24", "172.16.4.0/24"],
            "srun_port_range": "50000-50100",
        }
    )


def rules(plan, kind: str) -> list[tuple[str, int, int]]:
    token = INGRESS if kind == "in" else EGRESS
    return sorted((r.inputs["cidrIpv4"], r.inputs["fromPort"], r.inputs["toPort"]) for r in plan.of_type(token))


def build(s: HybridSpec):
    return lambda: hybrid_node_security_group(
        "s", s, vpc_id="vpc-0123456789abcdef0", cluster="c", tags={"team": "ml"}, opts=pulumi.ResourceOptions()
    )


def test_site_ports_both_ways_with_slurmdbd(run_components):
    plan = run_components(build(spec(port=7817, slurmdbd_port=7819)))
    assert rules(plan, "in") == [("10.20.0.0/16", 6818, 6818), ("10.20.0.10/32", 50000, 50100), ("172.16.0.0/16", 6818, 6818)]
    assert rules(plan, "out") == [
        ("10.20.0.10/32", 7817, 7817),
        ("10.20.0.10/32", 7819, 7819),
        ("10.20.8.0/24", 50000, 50100),
        ("172.16.4.0/24", 50000, 50100),
    ]
    assert all(r.inputs["ipProtocol"] == "tcp" for r in plan.of_type(INGRESS) + plan.of_type(EGRESS))


def test_no_path_to_slurmdbd_unless_asked(run_components):
    plan = run_components(build(spec()))
    assert ("10.20.0.10/32", 6819, 6819) not in rules(plan, "out")
    assert [p for _, p, _ in rules(plan, "out") if p not in (6817, 50000)] == []
