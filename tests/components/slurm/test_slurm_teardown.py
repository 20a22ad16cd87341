"""SlurmCluster's teardown under mocks: the AgentTeardown component carries the cluster and region, is
deleted before the launch templates, the node profile and the network it names, and its before_delete
hook runs the agent's teardown for this cluster (the teardown itself is tested against moto in
tests/agents/test_teardown.py)."""

from __future__ import annotations

import pulumi

from gpucluster.components.slurm._teardown import TOKEN, AgentTeardown
from tests.components.slurm.test_slurm_cluster import LT, SG, SUBNETS, build, spec_of


def test_teardown_component_is_deleted_before_what_the_instances_use(run_components):
    spec = spec_of()
    built = {}
    plan = run_components(lambda: built.setdefault("c", build(spec)))
    (comp,) = plan.of_type(TOKEN)
    assert comp.name == "s-slurm-agent-teardown" and comp.parent == plan.by_name("s-slurm").urn
    assert comp.inputs["clusterName"] == spec.name and comp.inputs["region"] == "us-east-1"
    assert comp.inputs["securityGroupIds"] == SG and comp.inputs["subnetIds"] == {"p5": SUBNETS}
    deps = set(comp.dependencies)
    (lt,) = plan.of_type(LT)
    # the SDK records a dependency on a component as one on its children: the launch template itself
    assert lt.urn in deps and lt.parent == plan.by_name("s-slurm-p5").urn
    assert plan.by_name("s-slurm-node-profile").urn in deps
    assert isinstance(built["c"]._teardown, AgentTeardown)


def test_the_hook_runs_the_agents_teardown_for_this_cluster(run_components, monkeypatch):
    calls = []
    import gpucluster.components.slurm.agent_teardown as td

    monkeypatch.setattr(td, "teardown", lambda cluster, region, **kw: calls.append((cluster, region, kw)) or ["i-1"])
    built = {}
    run_components(lambda: built.setdefault("c", build(spec_of())))
    hook = built["c"]._teardown.hook
    assert hook.name == "s-slurm-agent-teardown"
    hook.callback(pulumi.ResourceHookArgs(urn="urn", id="", name="s-slurm-agent-teardown", type=TOKEN))
    assert calls == [("s", "us-east-1", {"profile": None})]
