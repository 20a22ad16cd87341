"""EksCluster and KubernetesPlatform from their typed-dict Args: plain dicts, Outputs of other resources,
the stack's defaults, and errors naming the field before any resource."""

from __future__ import annotations

from gpucluster.components.kubernetes._args import resolve_section
from gpucluster.components.kubernetes.eks_cluster import EksClusterArgs
from gpucluster.facts.catalog import load_catalog
from gpucluster.resolve.kubernetes import resolve_kubernetes
from tests.components.kubernetes import typed_usage_kubernetes as usage
from tests.conftest import eks_spec, group

MNG = "aws:eks/nodeGroup:NodeGroup"
CLUSTER = "aws:eks/cluster:Cluster"


def test_from_plain_dicts(run_components):
    plan = run_components(lambda: usage.platform_on(usage.plain_eks()))
    cluster = plan.of_type(CLUSTER)[0].inputs
    assert cluster["name"] == "plain" and cluster["vpcConfig"]["subnetIds"] == usage.SUBNETS
    mngs = {r.name: r.inputs for r in plan.of_type(MNG)}
    assert mngs["plain-system"]["scalingConfig"] == {"minSize": 3, "maxSize": 4, "desiredSize": 3}
    gpu = mngs["plain-gpu-mng"]
    assert gpu["subnetIds"] == usage.SUBNETS[:1] and gpu["amiType"] == "AL2023_x86_64_NVIDIA"
    nics = plan.by_name("plain-gpu-lt").inputs["networkInterfaces"]
    assert len(nics) == 33, "the group was resolved: EFA on every card of a p5"
    cluster_sg = plan.of_type(CLUSTER)[0].state["vpcConfig"]["clusterSecurityGroupId"]
    assert nics[0]["securityGroups"] == ["sg-0123456789abcdef0", cluster_sg]
    queues = {r.name for r in plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")}
    assert queues == {"platform-kueue-clusterqueue-research"}
    provider = plan.by_name("plain-k8s").urn
    k8s_children = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")]
    assert k8s_children and all(r.provider and r.provider.startswith(provider) for r in k8s_children)


def test_outputs_of_other_resources_reach_the_resources(run_components):
    plan = run_components(usage.wired_eks)
    key = plan.by_name("secrets")
    cluster = plan.of_type(CLUSTER)[0]
    assert cluster.inputs["encryptionConfig"]["provider"]["keyArn"] == key.state["arn"]
    assert [r.name for r in plan.of_type("aws:kms/key:Key")] == ["secrets"], "no key of its own when one is given"
    subnets = [plan.by_name(f"s{i}").id for i in range(2)]
    assert cluster.inputs["vpcConfig"]["subnetIds"] == subnets
    (entry,) = plan.of_type("aws:eks/accessEntry:AccessEntry")
    assert entry.inputs["principalArn"] == plan.by_name("admins").state["arn"]
    assert plan.by_name("wired-gpu-mng").inputs["subnetIds"] == subnets[:1]
    sg = plan.by_name("nodes").id
    nics = plan.by_name("wired-gpu-lt").inputs["networkInterfaces"]
    assert nics[0]["securityGroups"] == [sg, cluster.state["vpcConfig"]["clusterSecurityGroupId"]]


def stack_and_args(**kubernetes):
    """The stack's resolution of a config, and the Args path's resolution of the same section."""
    spec = eks_spec(group(maxSize=4), **kubernetes)
    catalog = load_catalog()
    groups = spec.groups_for("kubernetes")
    stack = resolve_kubernetes(spec.kubernetes, groups, catalog, cluster_name="k")
    raw_groups = [{"name": "gpu", "instance_type": "p5.48xlarge", "availability_zones": ["us-east-1a"], "max_size": 4}]
    raw_kubernetes = spec.kubernetes.model_dump(exclude_defaults=True)
    args = {**raw_kubernetes, "cluster_name": "k", "region": "us-east-1", "node_groups": raw_groups}
    from_args, _ = resolve_section("EksCluster", args, catalog, args_type=EksClusterArgs, region="us-east-1", lustre=False)
    return stack, from_args


def test_the_same_defaults_as_the_stack():
    stack, from_args = stack_and_args(teams=[{"name": "research", "gpuQuota": {"h100": 16}}])
    assert from_args == stack
    assert from_args.node_groups[0].group.enable_efa_support is True
    assert from_args.cohort == "k" and from_args.team_namespaces == {"research": "research"}
    assert from_args.example_job is not None and from_args.example_job.node_group.group.name == "gpu"
