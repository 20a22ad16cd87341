"""GpuOperator: the same component on EKS and on an on-prem cluster reached through a kubeconfig."""

from __future__ import annotations

import json

import jsonschema
import pulumi
import pulumi_kubernetes as k8s
import pytest

from gpucluster.components.kubernetes.gpu_operator import GpuOperator, GpuOperatorArgs
from gpucluster.render.kubernetes import gpu_operator_values
from gpucluster.render.kubernetes.health import DCGM_CONFIGMAP
from tests.conftest import GOLDEN, check_golden
from tests.render.kubernetes.schemas import chart_defaults, crd_schema, unknown_values

RELEASE = "kubernetes:helm.sh/v3:Release"
ON_PREM_KUBECONFIG = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dc1", "cluster": {"server": "https://k8s.dc1.example.internal:6443"}}],
        "contexts": [{"name": "dc1", "context": {"cluster": "dc1", "user": "ops"}}],
        "current-context": "dc1",
        "users": [{"name": "ops", "user": {"token": "not-a-real-token"}}],
    }
)


def test_eks_values_leave_driver_and_toolkit_to_the_ami(run_components, update_golden):
    plan = run_components(lambda: GpuOperator("gpu-operator", GpuOperatorArgs(platform="eks")))
    (release,) = plan.of_type(RELEASE)
    i = release.inputs
    assert (i["chart"], i["version"], i["repositoryOpts"]["repo"]) == (
        "gpu-operator",
        "v26.7.0",
        "https://helm.ngc.nvidia.com/nvidia",
    )
    assert (i["name"], i["namespace"], i["createNamespace"]) == ("gpu-operator", "gpu-operator", True)
    values = i["values"]
    assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
    assert values["dcgmExporter"] == {"enabled": True, "config": {"name": DCGM_CONFIGMAP}}
    assert values["mig"] == {"strategy": "none"} and values["migManager"] == {"enabled": False}
    # The plan shows the values as a file (keys sorted): pinned by a golden file.
    check_golden(
        GOLDEN / "kubernetes" / "gpu-operator-eks.values.yaml", plan.files["gpu-operator-release/values.yaml"], update_golden
    )


def test_on_prem_kubeconfig_provider_with_driver_and_rdma(run_components, update_golden):
    """Done-when: the same GpuOperator planned against an on-prem cluster's kubeconfig provider, with the
    operator managing the driver and GPUDirect RDMA on."""

    def program():
        provider = k8s.Provider("dc1", kubeconfig=ON_PREM_KUBECONFIG)
        GpuOperator(
            "gpu-operator",
            GpuOperatorArgs(platform="on-prem", driver_version="580.95.05"),
            opts=pulumi.ResourceOptions(provider=provider),
        )

    plan = run_components(program)
    provider = plan.by_name("dc1")
    assert provider.type == "pulumi:providers:kubernetes"
    assert json.loads(provider.inputs["kubeconfig"])["clusters"][0]["cluster"]["server"].startswith("https://k8s.dc1")
    (release,) = plan.of_type(RELEASE)
    assert release.provider is not None and release.provider.startswith(provider.urn + "::")
    values = release.inputs["values"]
    assert values["driver"] == {"enabled": True, "version": "580.95.05", "rdma": {"enabled": True, "useHostMofed": True}}
    assert values["toolkit"] == {"enabled": True}
    assert values["dcgmExporter"] == {"enabled": True, "config": {"name": DCGM_CONFIGMAP}}
    check_golden(
        GOLDEN / "kubernetes" / "gpu-operator-on-prem.values.yaml", plan.files["gpu-operator-release/values.yaml"], update_golden
    )


def test_without_health_counters_the_exporter_keeps_its_own_list(run_components):
    plan = run_components(lambda: GpuOperator("g", GpuOperatorArgs(platform="eks", dcgm_health_counters=False)))
    assert plan.of_type(RELEASE)[0].inputs["values"]["dcgmExporter"] == {"enabled": True}
    assert not plan.of_type("kubernetes:core/v1:ConfigMap")
    plan = run_components(lambda: GpuOperator("g", GpuOperatorArgs(platform="eks", enable_dcgm_exporter=False)))
    assert not plan.of_type("kubernetes:core/v1:ConfigMap")


def test_eks_ignores_rdma(run_components):
    plan = run_components(lambda: GpuOperator("g", GpuOperatorArgs(platform="eks", enable_rdma=True)))
    assert "rdma" not in json.dumps(plan.of_type(RELEASE)[0].inputs["values"])


VARIANTS = [
    gpu_operator_values("eks"),
    gpu_operator_values("eks", mig_strategy="single"),
    gpu_operator_values("eks", mig_strategy="mixed", enable_dcgm_exporter=False),
    gpu_operator_values("on-prem", enable_rdma=True, use_host_mofed=False, driver_version="580.95.05"),
    gpu_operator_values("on-prem", enable_rdma=False),
]


@pytest.mark.parametrize("values", VARIANTS, ids=range(len(VARIANTS)))
def test_every_value_is_a_key_of_the_pinned_chart(values):
    assert unknown_values(values, chart_defaults("gpu-operator")) == []


SUBCHARTS = {"node-feature-discovery"}


@pytest.mark.parametrize("values", VARIANTS, ids=range(len(VARIANTS)))
def test_values_fit_the_cluster_policy_they_become(values):
    """The chart copies these sections into the ClusterPolicy (nvidia.com/v1): each must fit its schema."""
    spec = crd_schema("nvidia.com/v1", "ClusterPolicy")["properties"]["spec"]["properties"]
    for section, value in values.items():
        if section in SUBCHARTS:  # a subchart's values, not the ClusterPolicy's (test_boot_gate.py checks them)
            continue
        jsonschema.Draft7Validator(spec[section]).validate(value)


def test_a_misspelt_value_is_caught():
    values = {**gpu_operator_values("eks"), "dcgmExporter": {"enable": True}}
    assert unknown_values(values, chart_defaults("gpu-operator")) == ["dcgmExporter.enable"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(
            crd_schema("nvidia.com/v1", "ClusterPolicy")["properties"]["spec"]["properties"]["mig"]
        ).validate({"strategy": "all"})
