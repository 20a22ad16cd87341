"""In the offline plan of every shipped stack, no team namespace lacks Pod
Security enforcement; the stacks with teams (eks-p5, hybrid-eks) carry the team pods' admission policy and
binding, each team namespace's NetworkPolicies, the sweep's narrowed rights and its image by digest, and
the VPC CNI enforces NetworkPolicies. Every object is validated strictly against the Kubernetes schemas.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucluster.config.kubernetes.health import DIGEST_RE
from gpucluster.policy.evaluate import evaluate, from_plan
from gpucluster.policy.kubernetes_rules import DEFAULT_DENY, POD_SECURITY
from gpucluster.render.kubernetes.tenancy import PRIVATE_NETWORKS, TEAM_POD_POLICY
from gpucluster.tools.plan.run.json import to_json
from gpucluster.tools.plan.run.stackfile import stack_names
from tests.plans import shipped_plan
from tests.render.kubernetes.schemas import plan_objects, validate_object

TEAM_STACKS = {"eks-p5": ("applied", "research"), "hybrid-eks": ("research",)}
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"


@pytest.fixture(scope="module")
def plans() -> dict[str, Any]:
    out = {}
    for stack in stack_names():
        plan = shipped_plan(stack)
        assert plan.ok, plan.error
        out[stack] = plan
    return out


def objects(plan, kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in plan_objects(plan) if doc.get("kind") == kind]


def test_no_team_namespace_without_pod_security_enforcement(plans):
    """Every shipped stack: each Namespace of a team enforces restricted, pinned to the cluster's version;
    and the tenancy rules of the policy pack find nothing."""
    teams_seen = 0
    for stack, plan in plans.items():
        for ns in objects(plan, "Namespace"):
            labels = ns["metadata"].get("labels", {})
            if "gpucluster/team" in labels:
                teams_seen += 1
                assert labels["pod-security.kubernetes.io/enforce"] == "restricted", (stack, ns["metadata"]["name"])
                assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.33"
                assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
        found = [v for v in evaluate(from_plan(json.loads(json.dumps(to_json(plan))))) if v.rule in (POD_SECURITY, DEFAULT_DENY)]
        assert found == [], (stack, [v.render() for v in found])
    assert teams_seen == sum(len(t) for t in TEAM_STACKS.values())


@pytest.mark.parametrize("stack", sorted(TEAM_STACKS))
def test_every_kubernetes_object_is_valid(plans, stack):
    for name, doc in plan_objects(plans[stack]):
        assert validate_object(doc), name


@pytest.mark.parametrize("stack", sorted(TEAM_STACKS))
def test_the_team_pods_policy_covers_every_team(plans, stack):
    teams = TEAM_STACKS[stack]
    (policy,) = [p for p in objects(plans[stack], "ValidatingAdmissionPolicy") if p["metadata"]["name"] == TEAM_POD_POLICY]
    (binding,) = [
        b for b in objects(plans[stack], "ValidatingAdmissionPolicyBinding") if b["metadata"]["name"] == TEAM_POD_POLICY
    ]
    table = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    for team in teams:
        assert f"'{team}': " in table["uidFirst"] and f"'{team}': " in table["gid"] and f"'{team}': " in table["claims"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == sorted(teams)
    assert policy["spec"]["failurePolicy"] == "Fail" and binding["spec"]["validationActions"] == ["Deny"]


@pytest.mark.parametrize("stack", sorted(TEAM_STACKS))
def test_each_team_namespace_denies_by_default_and_allows_only_its_own(plans, stack):
    policies = objects(plans[stack], "NetworkPolicy")
    for team in TEAM_STACKS[stack]:
        mine = {p["metadata"]["name"]: p["spec"] for p in policies if p["metadata"]["namespace"] == team}
        assert sorted(mine) == ["gpucluster-default-deny", "gpucluster-dns", "gpucluster-internet", "gpucluster-same-namespace"]
        assert mine["gpucluster-default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        assert mine["gpucluster-same-namespace"]["ingress"] == [{"from": [{"podSelector": {}}]}]
        # no rule of any policy admits traffic from another namespace
        assert all(
            "namespaceSelector" not in peer for s in mine.values() for rule in s.get("ingress", []) for peer in rule["from"]
        )
        (internet,) = mine["gpucluster-internet"]["egress"]
        (block,) = internet["to"]
        excepted = set(block["ipBlock"]["except"])
        assert block["ipBlock"]["cidr"] == "0.0.0.0/0" and set(PRIVATE_NETWORKS) <= excepted
    if stack == "hybrid-eks":  # the site's networks (10.20.0.0/16, 10.96.0.0/16) fall in 10.0.0.0/8: left out
        assert "10.0.0.0/8" in excepted


@pytest.mark.parametrize("stack", sorted(TEAM_STACKS))
def test_the_sweep_is_narrowed_pinned_and_fenced(plans, stack):
    plan = plans[stack]
    (daemonset,) = objects(plan, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert DIGEST_RE.search(container["image"]), container["image"]
    assert pod["automountServiceAccountToken"] is False
    (token,) = [v for v in pod["volumes"] if v["name"] == "api-token"]
    assert token["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    (policy,) = [p for p in objects(plan, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == "gpucluster-health-sweep"]
    assert policy["spec"]["matchConditions"][0]["expression"].endswith(
        "'system:serviceaccount:gpucluster-health:gpucluster-health-sweep'"
    )
    # the sweep's role (the monitoring scraper has its own: components/monitoring/_eks_scraper.py)
    (role,) = [r for r in objects(plan, "ClusterRole") if "health" in r["metadata"]["name"]]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    health = sorted(
        p["metadata"]["name"] for p in objects(plan, "NetworkPolicy") if p["metadata"]["namespace"] == "gpucluster-health"
    )
    assert health == ["gpucluster-api-server", "gpucluster-default-deny", "gpucluster-dns"]
    # The sweep waits for its policy: the DaemonSet depends on the policy and its binding.
    ds = next(r for r in plan.resources if r.type == "kubernetes:apps/v1:DaemonSet")
    guards = {r.urn for r in plan.resources if r.type.startswith(VAP) and "health" in r.name}
    assert len(guards) == 2 and guards <= set(ds.dependencies)


@pytest.mark.parametrize("stack", sorted(TEAM_STACKS))
def test_the_vpc_cni_enforces_network_policies(plans, stack):
    (cni,) = [r for r in plans[stack].resources if r.type == "aws:eks/addon:Addon" and r.inputs["addonName"] == "vpc-cni"]
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
