"""Networking add-ons: the EFA device plugin on EKS, the Network Operator and its NicClusterPolicy on-prem."""

from __future__ import annotations

import json

import jsonschema
import pulumi
import pulumi_kubernetes as k8s
import pytest

from gpucluster.components.kubernetes.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpucluster.components.kubernetes.network_operator import NetworkOperator, NetworkOperatorArgs
from gpucluster.render.core import to_yaml
from gpucluster.render.kubernetes import efa_device_plugin_values, network_operator_values
from gpucluster.render.kubernetes.objects import nic_cluster_policy
from tests.components.kubernetes.test_gpu_operator import ON_PREM_KUBECONFIG
from tests.conftest import GOLDEN, check_golden
from tests.render.kubernetes.schemas import chart_defaults, unknown_values, validate_object

RELEASE = "kubernetes:helm.sh/v3:Release"


def test_efa_device_plugin_on_efa_nodes_tolerating_the_gpu_taint(run_components, update_golden):
    plan = run_components(lambda: EfaDevicePlugin("efa", EfaDevicePluginArgs()))
    (release,) = plan.of_type(RELEASE)
    i = release.inputs
    assert (i["chart"], i["version"], i["repositoryOpts"]["repo"]) == (
        "aws-efa-k8s-device-plugin",
        "v0.5.30",
        "https://aws.github.io/eks-charts",
    )
    assert i["namespace"] == "kube-system"
    assert i["values"]["nodeSelector"] == {"gpucluster/efa": "true"}
    assert i["values"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "gpucluster.io/health-boot", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert unknown_values(efa_device_plugin_values(), chart_defaults("aws-efa-k8s-device-plugin")) == []
    check_golden(GOLDEN / "kubernetes" / "efa-device-plugin.values.yaml", plan.files["efa-release/values.yaml"], update_golden)


def test_network_operator_with_a_roce_nic_cluster_policy(run_components, update_golden):
    def program():
        provider = k8s.Provider("dc1", kubeconfig=ON_PREM_KUBECONFIG)
        NetworkOperator(
            "net", NetworkOperatorArgs(rdma_interfaces=["ens1f0np0", "ens2f0np0"]), opts=pulumi.ResourceOptions(provider=provider)
        )

    plan = run_components(program)
    (release,) = plan.of_type(RELEASE)
    assert (release.inputs["chart"], release.inputs["version"]) == ("network-operator", "26.4.1")
    assert unknown_values(network_operator_values(), chart_defaults("network-operator")) == []
    (policy,) = plan.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert release.urn in policy.dependencies, "the policy waits for the operator's CRD"
    assert policy.provider is not None and policy.provider.startswith(plan.by_name("dc1").urn)
    validate_object(policy.inputs)
    config = json.loads(policy.inputs["spec"]["rdmaSharedDevicePlugin"]["config"])
    (entry,) = config["configList"]
    assert entry["selectors"] == {"vendors": ["15b3"], "linkTypes": ["ether"], "ifNames": ["ens1f0np0", "ens2f0np0"]}
    assert entry["resourceName"] == "rdma_shared_device_a"
    check_golden(
        GOLDEN / "kubernetes" / "nic-cluster-policy.yaml",
        to_yaml(nic_cluster_policy(["ens1f0np0", "ens2f0np0"])) + "\n",
        update_golden,
    )


def test_the_crd_check_rejects_what_the_api_server_would():
    """Strictness proof: an unknown field, and a wrong type, in a NicClusterPolicy fail validation."""
    policy = nic_cluster_policy([])
    with pytest.raises(jsonschema.ValidationError, match="rdmaSharedDevicePlugins"):
        validate_object({**policy, "spec": {**policy["spec"], "rdmaSharedDevicePlugins": {}}})
    bad = json.loads(json.dumps(policy))
    bad["spec"]["nvIpam"]["enableWebhook"] = "no"
    with pytest.raises(jsonschema.ValidationError):
        validate_object(bad)
