"""The node agent's IAM policy against the exact requests the agent builds, in the shipped stacks
that launch (slurm-p5: the head node's role; hybrid-slurm: the site controller's role).

The agent's CreateFleet request comes from its own builder (``gpucluster_agents.power.ec2.fleet_request``) and the config
the stack gives it; ``tests/components/launch_requests.py`` expands it into the authorization contexts EC2
evaluates, and :mod:`gpucluster.policy.iam_eval` evaluates them against the role's documents from the plan. What
this cannot prove: that AWS's evaluator and the contexts EC2 really builds agree with that model (IAM is not
evaluated offline; docs/iam.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pytest

from gpucluster.components._shared.agent_iam import LaunchScope, slurm_agent_policy
from gpucluster.load import load_spec
from gpucluster.policy.iam_eval import DENY, IMPLICIT_DENY, Request, evaluate
from gpucluster.render.hybrid.bundle import AwsValues, agent_json
from gpucluster.render.hybrid.bundle_slurm import site_of
from gpucluster.tools.plan.run.engine import Plan
from gpucluster_agents.contract import AgentConfig, NodeGroup, parse
from gpucluster_agents.power.ec2 import fleet_request
from tests.components.launch_requests import Launch, Template, but, create_fleet, fleet_launches, run_instances
from tests.plans import shipped_plan
from tests.render.hybrid.bundle_site import stack_config

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
FOREIGN_SUBNET = "subnet-0f0f0f0f0f0f0f0f0"


@dataclass(frozen=True)
class Agent:
    """A shipped stack's agent: the plan, its role's documents, its config."""

    stack: str
    plan: Plan
    role: str
    config: AgentConfig

    @property
    def policies(self) -> list[dict[str, Any]]:
        role = self.plan.by_name(self.role)
        return [json.loads(r.inputs["policy"]) for r in self.plan.of_type(ROLE_POLICY) if r.inputs["role"] == role.id]

    def template(self, group: NodeGroup) -> Template:
        (lt,) = [r for r in self.plan.of_type(LT) if r.id == group.launch_template_id]
        return Template.from_inputs(str(lt.id), lt.inputs)

    @property
    def dynamic(self) -> list[NodeGroup]:
        groups = [g for g in self.config.node_groups if g.mode == "dynamic"]
        assert groups
        return groups

    def launches(self) -> list[tuple[dict[str, Any], Launch]]:
        out = []
        for group in self.dynamic:
            request = fleet_request(self.config, group, 2, "launch-token-1")
            out += [(request, launch) for launch in fleet_launches(request, self.template(group))]
        return out


def _config(plan: Plan, stack: str) -> AgentConfig:
    if stack == "hybrid-slurm":
        site = site_of(load_spec(stack_config(stack), stack=stack).cluster)
        return parse(json.loads(agent_json(site, AwsValues.from_output(plan.outputs["hybrid"]))))
    return parse(json.loads(plan.files[f"{stack}-slurm-head-files/etc/gpucluster/agent.json"]))


@pytest.fixture(scope="module", params=["slurm-p5", "hybrid-slurm"])
def agent(request: pytest.FixtureRequest) -> Agent:
    stack = str(request.param)
    plan = shipped_plan(stack)
    assert plan.error is None, plan.error
    role = "slurm-p5-slurm-head-role" if stack == "slurm-p5" else "hybrid-slurm-onprem-agent-role"
    return Agent(stack, plan, role, _config(plan, stack))


def _refused(policies: list[dict[str, Any]], requests: list[Request]) -> dict[str, str]:
    """The contexts of one call that are not allowed: resource → decision."""
    decisions = {r.resource: evaluate(policies, r) for r in requests}
    return {res: d.result for res, d in decisions.items() if not d.allowed}


def test_the_policy_is_the_agent_policy_of_the_stacks_own_values(agent: Agent):
    """The exact statements: the agent policy function of the dynamic groups' templates, types and subnets, the
    compute nodes' security groups and instance profile, as the plan made them."""
    plan = agent.plan
    (doc,) = [d for d in agent.policies if d["Statement"][0]["Sid"] == "LaunchOnlyTheClustersInstances"]
    templates = [agent.template(g) for g in agent.dynamic]
    prefix = agent.stack
    scope = LaunchScope(
        partition="aws",
        region="us-east-1",
        account="123456789012",
        cluster=agent.config.cluster_name,
        groups=tuple(g.name for g in agent.dynamic),
        instance_types=tuple(g.instance_type for g in agent.dynamic),
        launch_template_ids=tuple(t.id for t in templates),
        subnet_ids=tuple(s for g in agent.dynamic for s in g.subnet_ids),
        security_group_ids=tuple(sg for t in templates for sg in t.security_groups),
        node_role_arn=plan.by_name(f"{prefix}-slurm-node-role").state["arn"],
        node_profile_arn=plan.by_name(f"{prefix}-slurm-node-profile").state["arn"],
    )
    assert doc == slurm_agent_policy(scope)
    assert all(t.profile_arn == scope.node_profile_arn and t.http_tokens == "required" for t in templates)


def test_the_agents_own_launches_are_allowed(agent: Agent):
    """CreateFleet and every RunInstances the instant fleet makes, context by context."""
    launches = agent.launches()
    assert launches
    for request, launch in launches:
        assert _refused(agent.policies, create_fleet(request)) == {}
        contexts = run_instances(launch)
        assert {r.resource.split(":")[-1].split("/")[0] for r in contexts} >= {
            "instance",
            "volume",
            "network-interface",
            "subnet",
            "security-group",
            "image",
            "launch-template",
        }
        assert _refused(agent.policies, contexts) == {}
        (instance,) = [r for r in contexts if ":instance/" in r.resource]
        assert evaluate(agent.policies, instance).allowed_by == ("LaunchOnlyTheClustersInstances",)


def _forbidden(agent: Agent, launch: Launch) -> dict[str, Launch]:
    template = launch.template
    assert template is not None
    no_tags = replace(template, tags={k: {} for k in template.tags})
    return {
        "a foreign subnet": but(launch, subnet=FOREIGN_SUBNET),
        "a foreign security group": but(launch, security_groups=["sg-0bad0bad0bad0bad0"]),
        "no cluster tags": but(launch, template=no_tags, tags={}),
        "another cluster's tag": but(launch, tags={**launch.tags, "gpucluster:cluster": "someone-else"}),
        "a static group's tag": but(launch, tags={**launch.tags, "gpucluster:node-group": "not-a-dynamic-group"}),
        "IMDSv1": but(launch, http_tokens="optional"),
        "another instance type": but(launch, instance_type="p4d.24xlarge"),
        "another instance profile": but(launch, profile_arn="arn:aws:iam::123456789012:instance-profile/admin"),
        "no launch template": but(launch, template=None),
        "another launch template": but(launch, template=replace(template, id="lt-0ffffffffffffffff")),
        "another image": but(launch, image_id="ami-0bad0bad0bad0bad0"),
    }


# Which resource of the launch each forbidden request is refused on, and how (no allowing statement, or a deny).
REFUSED_ON = {
    "a foreign subnet": ({"subnet", "network-interface"}, IMPLICIT_DENY),
    "a foreign security group": ({"security-group"}, IMPLICIT_DENY),
    "no cluster tags": ({"instance", "volume", "network-interface"}, IMPLICIT_DENY),
    "another cluster's tag": ({"instance"}, IMPLICIT_DENY),
    "a static group's tag": ({"instance"}, IMPLICIT_DENY),
    "IMDSv1": ({"instance"}, IMPLICIT_DENY),
    "another instance type": ({"instance"}, IMPLICIT_DENY),
    "another instance profile": ({"instance"}, IMPLICIT_DENY),
    "no launch template": ({"instance", "volume", "network-interface"}, IMPLICIT_DENY),
    "another launch template": ({"instance"}, IMPLICIT_DENY),
    "another image": ({"image"}, DENY),
}


@pytest.mark.parametrize("case", sorted(REFUSED_ON))
def test_a_forbidden_launch_falls_outside_every_allowing_statement(agent: Agent, case: str):
    (_, launch), *_ = agent.launches()
    contexts = run_instances(_forbidden(agent, launch)[case])
    refused = _refused(agent.policies, contexts)
    kinds, how = REFUSED_ON[case]
    assert {r.split(":")[-1].split("/")[0] for r in refused} == kinds, refused
    assert set(refused.values()) == {how}


def test_a_fleet_from_another_template_or_untagged_is_refused_at_createfleet(agent: Agent):
    (request, _), *_ = agent.launches()
    other = json.loads(json.dumps(request))
    other["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateId"] = "lt-0ffffffffffffffff"
    assert set(_refused(agent.policies, create_fleet(other)).values()) == {IMPLICIT_DENY}
    untagged = {**request, "TagSpecifications": [{"ResourceType": "instance", "Tags": []}]}
    assert {r.split(":")[-1].split("/")[0] for r in _refused(agent.policies, create_fleet(untagged))} == {"instance"}


def test_the_policy_before_issue_18_let_these_through(agent: Agent):
    """The evaluator tells the two documents apart: the old grant (RunInstances on "*" with the template
    condition only) allowed a launch into a foreign subnet, with IMDSv1, another type and another profile."""
    (_, launch), *_ = agent.launches()
    assert launch.template is not None
    template = f"arn:aws:ec2:us-east-1:123456789012:launch-template/{launch.template.id}"
    old = [
        {
            "Statement": [
                {
                    "Sid": "LaunchOnlyFromTheClustersTemplates",
                    "Effect": "Allow",
                    "Action": "ec2:RunInstances",
                    "Resource": "*",
                    "Condition": {"ArnLike": {"ec2:LaunchTemplate": [template]}},
                }
            ]
        }
    ]
    forbidden = _forbidden(agent, launch)
    for case in ("a foreign subnet", "IMDSv1", "another instance type", "another instance profile", "no cluster tags"):
        assert _refused(old, run_instances(forbidden[case])) == {}, case
        assert _refused(agent.policies, run_instances(forbidden[case])) != {}, case
