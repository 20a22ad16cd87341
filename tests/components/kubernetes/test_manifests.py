"""Every Kubernetes object gpucluster renders, validated offline and strictly — on EKS and on-prem —
and the example training job pinned by a golden file."""

from __future__ import annotations

from collections.abc import Callable

import jsonschema
import kubernetes_validate
import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform, KubernetesPlatformArgs
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.kubernetes import TeamSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.efa import efa_interface_count, interface_layout
from gpucluster.facts.nccl import nccl_environment
from tests.components.kubernetes.test_gpu_operator import ON_PREM_KUBECONFIG
from tests.conftest import GOLDEN, check_golden, eks_spec
from tests.plans import shipped_plan
from tests.render.kubernetes.schemas import CRDS, crd_schema, plan_objects, validate_object

LUSTRE = SharedStorage("fsx", "lustre", "/fsx", "noatime,flock", "fs-0123.fsx.example", "abcdefgh", "fs-0123456789abcdef0", 2400)


@pytest.fixture(scope="module")
def eks_plan():
    plan = shipped_plan("eks-p5")
    assert plan.ok, plan.error
    return plan


def on_prem_program(protect: bool = False) -> Callable[[], None]:
    """A program of KubernetesPlatform on a cluster of your own (team vision, Lustre, one RDMA interface) through
    its own provider; ``protect`` in its options when asked."""
    spec = eks_spec(teams=[{"name": "vision", "gpuQuota": {"h100": 8}, "groups": ["vision"]}])

    def program() -> None:
        provider = k8s.Provider("dc1", kubeconfig=ON_PREM_KUBECONFIG)
        KubernetesPlatform(
            "dc1",
            KubernetesPlatformArgs(
                **spec.kubernetes.model_dump(exclude_none=True),
                cluster_name="dc1",
                node_groups=[
                    g.model_dump(exclude_none=True, exclude={"image_ssm_parameter"}) for g in spec.groups_for("kubernetes")
                ],
                platform="on-prem",
                shared_storage=[LUSTRE],
                rdma_interfaces=["ens1f0np0"],
            ),
            opts=pulumi.ResourceOptions(provider=provider, protect=True)
            if protect
            else pulumi.ResourceOptions(provider=provider),
        )

    return program


def on_prem_plan(run_components):
    return run_components(on_prem_program())


def test_every_object_of_the_eks_stack_is_valid(eks_plan):
    checked = {name: validate_object(doc) for name, doc in plan_objects(eks_plan)}
    kinds = {doc["kind"] for _, doc in plan_objects(eks_plan)}
    assert kinds >= {"Namespace", "Role", "RoleBinding", "PersistentVolume", "PersistentVolumeClaim", "ConfigMap"}
    assert kinds >= {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Topology", "JobSet"}
    assert "jobset/v0.12.0/jobset.x-k8s.io_jobsets.yaml" in checked.values()
    assert len(checked) >= 20


def test_every_object_on_prem_is_valid(run_components):
    plan = on_prem_plan(run_components)
    kinds = set()
    for _, doc in plan_objects(plan):
        validate_object(doc)
        kinds.add(doc["kind"])
    assert "NicClusterPolicy" in kinds and "ClusterQueue" in kinds
    provider = plan.by_name("dc1", "pulumi:providers:kubernetes").urn
    assert all(
        r.provider and r.provider.startswith(provider) for r in plan.resources if r.custom and r.type.startswith("kubernetes:")
    )
    operator = next(r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "gpu-operator")
    assert operator.inputs["values"]["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
    assert plan.of_type("kubernetes:helm.sh/v3:Release") and not [
        r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "aws-efa-k8s-device-plugin"
    ], "no EFA device plugin on-prem"


def test_strict_validation_rejects_unknown_fields():
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}, "spec": {"finalizer": []}})
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "n"}}
    validate_object({**queue, "spec": {"clusterQueue": "q"}})
    with pytest.raises(jsonschema.ValidationError, match="clusterQueues"):
        validate_object({**queue, "spec": {"clusterQueues": "q"}})
    with pytest.raises(AssertionError, match="not a DNS subdomain"):
        validate_object({**queue, "metadata": {"name": "Q_1"}, "spec": {}})


@pytest.mark.slow  # loads and compiles every pinned CRD schema
def test_every_pinned_crd_loads():
    for api_version, kind in CRDS:
        assert crd_schema(api_version, kind)["type"] == "object"


def test_example_training_job(eks_plan, update_golden):
    text = eks_plan.files["eks-p5-k8s-team-research-examples/training-job.yaml"]
    check_golden(GOLDEN / "kubernetes" / "eks-p5-training-job.yaml", text, update_golden)
    job = yaml.safe_load(text)
    validate_object(job)
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "research"}
    (workers,) = job["spec"]["replicatedJobs"]
    pod = workers["template"]["spec"]["template"]
    assert workers["template"]["spec"]["parallelism"] == 2 == workers["template"]["spec"]["completions"]
    assert pod["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}
    spec = pod["spec"]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in spec["tolerations"]
    (container,) = spec["containers"]
    facts = load_catalog()["p5.48xlarge"]
    limits = container["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == facts.gpu_count
    assert limits["vpc.amazonaws.com/efa"] == efa_interface_count(interface_layout(facts, True, "current")) == 32
    assert {e["name"]: e["value"] for e in container["env"]} == {**nccl_environment(facts, True), "HOME": "/tmp"}
    # Pod Security "restricted", as the team's first user and its group (research's derived identity)
    research = TeamSpec(name="research").effective_posix
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": research.uid_first,
        "runAsGroup": research.gid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert {"name": "shared", "mountPath": "/fsx"} in container["volumeMounts"]
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "lustre"}} in spec["volumes"]
    assert "--nnodes=2 --nproc-per-node=8" in container["command"][2]
