"""The head node's own security group (``components/slurm/_head_network.py``) through the real stack program: the rules
follow what the cluster has (accounting, login nodes' ``SrunPortRange``, the collector, a Lustre mount), the head node
leaves the compute nodes' all-members group, and a standalone ``SlurmCluster`` keeps the groups it was given
(tests/components/slurm/test_slurm_people.py)."""

from __future__ import annotations

from tests.conftest import group, make_config, plan_config

SG, IN = "aws:ec2/securityGroup:SecurityGroup", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
ENI = "aws:ec2/networkInterface:NetworkInterface"


def rules(plan, group_id: str) -> set[tuple[str, int, int, str]]:
    """(protocol, from, to, peer group id) of every ingress rule on ``group_id``."""
    return {
        (
            str(r.inputs["ipProtocol"]),
            r.inputs.get("fromPort", 0),
            r.inputs.get("toPort", 0),
            r.inputs.get("referencedSecurityGroupId"),
        )
        for r in plan.of_type(IN)
        if r.inputs["securityGroupId"] == group_id
    }


def plan_of(stack: str, **keys):
    plan = plan_config(make_config(group(name="p5", maxSize=2), slurm={}, **keys), stack=stack)
    assert plan.error is None, plan.error
    return plan, {r.name: r.state["id"] for r in plan.of_type(SG)}


def test_h1_a_plain_cluster_head_admits_slurmctld_only_and_compute_nodes_admit_its_calls():
    """No accounting, no login nodes, no monitoring, no Lustre: the head node's group admits 6817 from the compute
    nodes' group and nothing else; the compute nodes' group admits slurmd and srun's ephemeral range from it (no
    scrape rule without a collector); the head node carries its group and the outbound group, not the EFA group."""
    plan, sg = plan_of("h1", monitoring={"enabled": False})
    head, efa, node = sg["h1-slurm-head-sg"], sg["h1-network-efa"], sg["h1-network-node"]
    assert plan.by_name("h1-slurm-head-eni", ENI).inputs["securityGroups"] == [head, node]
    assert rules(plan, head) == {("tcp", 6817, 6817, efa)}
    assert rules(plan, efa) == {("-1", 0, 0, efa), ("tcp", 6818, 6818, head), ("tcp", 32768, 60999, head)}
    assert rules(plan, node) == set()
    # the interface leaves the EFA group only once the rules that replace it exist (no moment without slurmctld)
    eni = plan.by_name("h1-slurm-head-eni", ENI)
    made = {r.urn for r in plan.of_type(IN) if r.name.startswith(("h1-slurm-head-sg-", "h1-slurm-compute-in-"))}
    assert len(made) == 3 and made <= set(eni.dependencies), sorted(made - set(eni.dependencies))


def test_h1_with_the_collector_compute_nodes_admit_its_scrapes_from_the_head_node_only():
    plan, sg = plan_of("h1m")
    head, efa = sg["h1m-slurm-head-sg"], sg["h1m-network-efa"]
    assert {("tcp", 9400, 9400, head), ("tcp", 9100, 9100, head)} <= rules(plan, efa)
    assert rules(plan, head) == {("tcp", 6817, 6817, efa)}
