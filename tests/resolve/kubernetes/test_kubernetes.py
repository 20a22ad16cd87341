"""resolve_kubernetes: every choice the Kubernetes section leaves open, decided once."""

from __future__ import annotations

from gpucluster.config.kubernetes import KubernetesSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.resolve.kubernetes import resolve_kubernetes
from tests.conftest import eks_spec, group


def resolved(*groups, lustre=False, **kubernetes):
    spec = eks_spec(*groups, **kubernetes)
    return resolve_kubernetes(spec.kubernetes, spec.groups_for("kubernetes"), load_catalog(), cluster_name="k", lustre=lustre)


def test_addon_versions_per_kubernetes_version_and_storage():
    assert resolved().addon_versions == {
        "vpc-cni": "v1.20.1-eksbuild.3",
        "coredns": "v1.12.3-eksbuild.1",
        "kube-proxy": None,
        "eks-pod-identity-agent": None,
        "eks-node-monitoring-agent": None,  # no sourced pin: EKS's default
    }
    assert "eks-node-monitoring-agent" not in resolved(health={"nodeMonitoringAgent": False, "autoRepair": False}).addon_versions
    newest = resolved(version="1.34", lustre=True).addon_versions
    assert newest["vpc-cni"] is None and newest["coredns"] is None, "no sourced pin for 1.34: EKS's default"
    assert "aws-fsx-csi-driver" in newest
    assert resolved(addonVersions={"kube-proxy": "v1.33.3-eksbuild.6"}).addon_versions["kube-proxy"] == "v1.33.3-eksbuild.6"


def test_system_node_group_size_and_ami():
    system = resolved().system_node_group
    assert (system.min_size, system.desired_size, system.ami_type) == (2, 2, "AL2023_x86_64_STANDARD")
    assert resolved(systemNodeGroup={"minSize": 1, "desiredSize": 3}).system_node_group.desired_size == 3


def test_gpu_groups_capacity_types_and_spot_template():
    (spot,) = resolved(group(capacity={"type": "spot"})).node_groups
    assert spot.capacity_type == "SPOT" and spot.template.spec.capacity.type == "on-demand"
    assert spot.group.capacity.type == "spot", "the group itself keeps what the user asked for"
    (p5,) = resolved().node_groups
    assert (p5.capacity_type, p5.ami_type, p5.efa, p5.desired_size) == ("ON_DEMAND", "AL2023_x86_64_NVIDIA", True, 0)


def test_teams_cohort_and_efa():
    r = resolved(teams=[{"name": "a", "namespace": "team-a"}, {"name": "b"}], kueue={"cohort": "shared"})
    assert r.team_namespaces == {"a": "team-a", "b": "b"} and r.cohort == "shared"
    assert resolved().cohort == "k" and resolved().efa
    assert not resolved(group(instanceType="g6e.xlarge", availabilityZones=["us-east-1a"])).efa


def test_example_job_node_group_and_topology():
    r = resolved(
        group(name="small", instanceType="g6e.xlarge"),
        group(name="big", maxSize=4),
        exampleJob={"nodeGroup": "big"},
    )
    assert r.example_job is not None and r.example_job.node_group.group.name == "big"
    assert r.example_job.preferred_topology == "topology.k8s.aws/network-node-layer-3"
    first = resolved(group(name="small", instanceType="g6e.xlarge"), group(name="big", maxSize=4))
    assert first.example_job is not None and first.example_job.node_group.group.name == "small"
    flat = resolved(kueue={"topologyLevels": ["kubernetes.io/hostname"]})
    assert flat.example_job is not None and flat.example_job.preferred_topology is None


def test_defaults_of_a_bare_section():
    spec = KubernetesSpec()
    r = resolve_kubernetes(spec, [], load_catalog(), cluster_name="c")
    assert r.example_job is None and r.node_groups == () and not r.efa and r.cohort == "c"
