"""The plan of ``eks-p5`` shows the cluster, system and GPU node groups (the launch
template with every EFA interface), the GPU Operator with EKS-correct values, the EFA device plugin,
Kueue with topology-aware scheduling, and team namespaces with quotas."""

from __future__ import annotations

import pytest
import yaml

from gpucluster.tools.plan.show.report import render_text
from tests.plans import shipped_plan


@pytest.fixture(scope="module")
def plan():
    plan = shipped_plan("eks-p5")
    assert plan.ok, plan.error
    return plan


@pytest.fixture(scope="module")
def text(plan):
    return render_text(plan, files="full")


def test_cluster_and_node_groups(plan, text):
    assert "Kubernetes 1.33 · endpoint private · authentication API" in text
    assert "Secrets encrypted with (arn of eks-p5-eks-secrets, assigned at create)" in text
    assert "AL2023_x86_64_STANDARD · ON_DEMAND · min 2 · max 4 · desired 2" in text
    assert "AL2023_x86_64_NVIDIA · CAPACITY_BLOCK · min 0 · max 8 · desired 8" in text
    assert "taints nvidia.com/gpu=true:NO_SCHEDULE" in text
    assert "33 network interfaces (32 EFA): card 0 dev 0 interface; card 0 dev 1 efa-only; cards 1–31 dev 0 efa-only" in text
    assert "capacity block cr-0a1b2c3d4e5f60718 targeted" in text
    assert "vpc-cni v1.20.1-eksbuild.3 · Pod Identity aws-node" in text
    assert "aws-fsx-csi-driver (EKS default for the cluster version)" in text
    lt = plan.by_name("eks-p5-eks-p5-lt")
    mng = plan.by_name("eks-p5-eks-p5-mng")
    assert mng.inputs["launchTemplate"]["id"] == lt.id
    assert plan.outputs["kubernetes"]["nodeGroups"] == {"system": "eks-p5-system", "p5": "eks-p5-p5"}


def test_gpu_operator_with_eks_values(plan, text):
    assert "chart https://helm.ngc.nvidia.com/nvidia/gpu-operator v26.7.0 · release gpu-operator" in text
    values = yaml.safe_load(plan.files["eks-p5-k8s-gpu-operator-release/values.yaml"])
    assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
    assert values["dcgmExporter"] == {"enabled": True, "config": {"name": "gpucluster-dcgm-metrics"}}


def test_efa_device_plugin(plan, text):
    assert "chart https://aws.github.io/eks-charts/aws-efa-k8s-device-plugin v0.5.30" in text
    values = yaml.safe_load(plan.files["eks-p5-k8s-efa-release/values.yaml"])
    assert values["nodeSelector"] == {"gpucluster/efa": "true"}


def test_kueue_with_topology_aware_scheduling(plan, text):
    assert "chart oci://registry.k8s.io/kueue/charts/kueue 0.19.2" in text
    assert (
        "levels topology.k8s.aws/network-node-layer-1 → topology.k8s.aws/network-node-layer-2 → "
        "topology.k8s.aws/network-node-layer-3 → kubernetes.io/hostname"
    ) in text
    assert "nodes gpucluster/gpu=h100 · topology network · tolerates nvidia.com/gpu" in text
    config = yaml.safe_load(
        yaml.safe_load(plan.files["eks-p5-k8s-kueue-release/values.yaml"])["managerConfig"]["controllerManagerConfigYaml"]
    )
    assert config["waitForPodsReady"]["timeout"] == "10m"


def test_team_namespaces_with_quotas(plan, text):
    assert "flavor h100: 960 cpu, 10240Gi memory, 40 nvidia.com/gpu, 160 vpc.amazonaws.com/efa" in text
    assert "flavor h100: 576 cpu, 6144Gi memory, 24 nvidia.com/gpu, 96 vpc.amazonaws.com/efa" in text
    assert "cohort eks-p5" in text
    assert "research/research → ClusterQueue research" in text
    assert "research/gpucluster-team-members → gpucluster-team for Group research" in text
    assert "fsx.csi.aws.com (id of eks-p5-lustre-fs, assigned at create)" in text and "for research/lustre" in text
    assert "--- eks-p5-k8s-team-research-examples/training-job.yaml" in text


def test_only_finding_is_the_block_not_started(plan):
    """The example block starts 2026-12-01 and the group wants 8 nodes: as of the pinned test clock
    (2026-11-01) that is the one warning; nothing else is wrong with the stack."""
    assert [(f["level"], f["code"], f["path"]) for f in plan.findings] == [
        ("warning", "capacity-block-not-started", "gpucluster:nodeGroups[0].capacity.startTime")
    ]
