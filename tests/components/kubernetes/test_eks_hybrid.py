"""EKS Hybrid Nodes on the AWS side, through the real stack program under mocks (the hybrid-eks stack and variants of
its hybrid section): remote networks on the cluster, the API opened to them, the hybrid node role with its trust
(Roles Anywhere or SSM) and least-privilege policies, the HYBRID_LINUX access entry, the CNI on hybrid nodes only,
and the node files rendered with the ARNs the stack creates."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pulumi
import pytest
import yaml

from gpucluster.components._shared.build import part as component_part
from gpucluster.components.kubernetes.eks_cluster import TOKEN, build_eks_cluster, from_args
from gpucluster.config.errors import ConfigError
from gpucluster.policy.iam_eval import Request, evaluate
from gpucluster.render.hybrid.eks_nodes import cni_values
from gpucluster.render.iam import session_manager_policy
from gpucluster.tools.plan.run.engine import Plan, run_plan
from tests.components.kubernetes.test_eks_cluster import args_of
from tests.plans import shipped_plan
from tests.render.hybrid.eks_fixtures import hybrid_eks_spec, stack_config

ROLE = "aws:iam/role:Role"
ATTACH = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
ACCESS = "aws:eks/accessEntry:AccessEntry"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_ROLE = "hybrid-eks-eks-hybrid-node-role"


def plan_with(**hybrid_changes: Any) -> Plan:
    section = copy.deepcopy(stack_config()["gpucluster:hybrid"])
    for key, value in hybrid_changes.items():
        section[key] = {**section[key], **value} if isinstance(value, dict) else value
    plan = run_plan("hybrid-eks", config_overrides={"gpucluster:hybrid": section})
    assert plan.error is None, plan.error
    return plan


@pytest.fixture(scope="module")
def plan() -> Plan:
    result = shipped_plan("hybrid-eks")
    assert result.error is None, result.error
    return result


def hybrid_role(plan: Plan):
    return plan.by_name(NODE_ROLE)


def attached(plan: Plan) -> set[str]:
    role = hybrid_role(plan).state["name"]
    return {r.inputs["policyArn"].rsplit("/", 1)[-1] for r in plan.of_type(ATTACH) if r.inputs["role"] == role}


def test_cluster_gets_the_sites_remote_networks_and_keeps_one_endpoint(plan):
    cluster = plan.by_name("hybrid-eks-eks-eks").inputs
    assert cluster["remoteNetworkConfig"] == {
        "remoteNodeNetworks": {"cidrs": ["10.20.0.0/16"]},
        "remotePodNetworks": {"cidrs": ["10.96.0.0/16"]},
    }
    # Hybrid nodes cannot join an endpoint that is public and private at once.
    vpc = cluster["vpcConfig"]
    assert vpc["endpointPrivateAccess"] != vpc["endpointPublicAccess"]


def test_api_opened_to_the_remote_networks_on_443_only(plan):
    cluster_sg = {r.inputs["securityGroupId"] for r in plan.of_type(INGRESS) if r.name.startswith("hybrid-eks-eks-hybrid-api-")}
    assert len(cluster_sg) == 1
    rules = {r.inputs["cidrIpv4"]: r.inputs for r in plan.of_type(INGRESS) if r.inputs["securityGroupId"] in cluster_sg}
    assert set(rules) == {"10.20.0.0/16", "10.96.0.0/16"}
    for rule in rules.values():
        assert (rule["ipProtocol"], rule["fromPort"], rule["toPort"]) == ("tcp", 443, 443)
    # It is the cluster security group EKS made (the one the GPU node groups' templates carry), not a node group's.
    lt = plan.by_name("hybrid-eks-eks-p5-lt").inputs
    assert cluster_sg <= set(str(lt["networkInterfaces"]).split("'"))


def test_roles_anywhere_trust_is_the_sites_anchor_and_the_certificates_name(plan):
    anchor = plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor")
    assert len(anchor) == 1
    assert anchor[0].inputs["source"] == {
        "sourceType": "AWS_ACM_PCA",
        "sourceData": {
            "acmPcaArn": "arn:aws:acm-pca:us-east-1:123456789012:certificate-authority/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
        },
    }
    anchor_arn = anchor[0].state["arn"]
    trust = json.loads(hybrid_role(plan).inputs["assumeRolePolicy"])
    for statement in trust["Statement"]:
        assert statement["Principal"] == {"Service": "rolesanywhere.amazonaws.com"}
        assert statement["Condition"]["ArnEquals"] == {"aws:SourceArn": anchor_arn}
        # only the site's GPU nodes: certificates named <certificateCn>-<node>
        assert statement["Condition"]["StringLike"] == {"aws:PrincipalTag/x509Subject/CN": "gpu-node-?*"}
    (assume,) = [s for s in trust["Statement"] if s["Action"] == "sts:AssumeRole"]
    assert assume["Condition"]["StringEquals"] == {"sts:RoleSessionName": "${aws:PrincipalTag/x509Subject/CN}"}

    def session(cn: str, name: str | None = None, anchor: str = anchor_arn) -> dict[str, bool]:
        tags = {"aws:SourceArn": anchor, "aws:PrincipalTag/x509Subject/CN": cn, "sts:RoleSessionName": name or cn}
        requests = [
            Request(action, NODE_ROLE, tags, {"Service": "rolesanywhere.amazonaws.com"})
            for action in ("sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity")
        ]
        return {r.action: evaluate([trust], r).allowed for r in requests}

    everything = {"sts:AssumeRole": True, "sts:TagSession": True, "sts:SetSourceIdentity": True}
    assert session("gpu-node-01") == everything
    nothing = dict.fromkeys(everything, False)
    # another certificate of the same CA (the Slurm controller's, a user's), the bare prefix, another anchor
    assert session("slurmctld") == session("gpu-node") == session("gpu-node-01", anchor=anchor_arn + "x") == nothing
    # a node may only be itself
    assert session("gpu-node-01", name="gpu-node-02")["sts:AssumeRole"] is False
    (profile,) = plan.of_type("aws:rolesanywhere/profile:Profile")
    assert profile.inputs["roleArns"] == [hybrid_role(plan).state["arn"]]
    assert profile.inputs["acceptRoleSessionName"] is True and profile.inputs["durationSeconds"] == 3600


def test_node_role_is_least_privilege(plan):
    assert attached(plan) == {"AmazonEC2ContainerRegistryPullOnly"}
    (inline,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "hybrid-eks-eks-hybrid-node"]
    policy = json.loads(inline.inputs["policy"])
    assert policy["Statement"] == [
        {
            "Sid": "DescribeThisCluster",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": "arn:aws:eks:us-east-1:123456789012:cluster/hybrid-eks",
        }
    ]


def test_access_entry_lets_the_role_join_as_hybrid_nodes(plan):
    entries = {r.inputs["type"]: r.inputs for r in plan.of_type(ACCESS)}
    hybrid = entries["HYBRID_LINUX"]
    assert hybrid["principalArn"] == hybrid_role(plan).state["arn"] and hybrid["clusterName"] == "hybrid-eks"
    # No Kubernetes groups or access policies: EKS maps HYBRID_LINUX to system:node:{{SessionName}} itself.
    assert "kubernetesGroups" not in hybrid
    assert not [
        r
        for r in plan.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
        if r.inputs["principalArn"] == hybrid["principalArn"]
    ]


def test_cilium_pinned_and_on_hybrid_nodes_only(plan):
    releases = {r.inputs["name"]: r.inputs for r in plan.of_type(RELEASE)}
    cilium = releases["cilium"]
    assert (cilium["chart"], cilium["version"], cilium["namespace"]) == ("cilium", "1.16.7", "kube-system")
    assert cilium["repositoryOpts"] == {"repo": "https://helm.cilium.io"}
    values = cilium["values"]
    hybrid_only = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "eks.amazonaws.com/compute-type", "operator": "In", "values": ["hybrid"]}]}
                ]
            }
        }
    }
    assert values["affinity"] == hybrid_only and values["operator"]["affinity"] == hybrid_only
    assert values["ipam"] == {
        "mode": "cluster-pool",
        "operator": {"clusterPoolIPv4PodCIDRList": ["10.96.0.0/16"], "clusterPoolIPv4MaskSize": 25},
    }
    # The VPC CNI stays the managed add-on (its DaemonSet's own anti-affinity keeps it off hybrid nodes).
    assert any(r.inputs["addonName"] == "vpc-cni" for r in plan.of_type("aws:eks/addon:Addon"))


def test_ssm_variant_trusts_ssm_in_this_account_and_makes_no_anchor():
    plan = plan_with(credentials={"type": "ssm", "acmPcaArn": None})
    assert not plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor")
    assert not plan.of_type("aws:rolesanywhere/profile:Profile")
    (statement,) = json.loads(hybrid_role(plan).inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "ssm.amazonaws.com"}
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnLike": {"aws:SourceArn": "arn:aws:ssm:us-east-1:123456789012:*"},
    }
    # Session Manager's rights without AmazonSSMManagedInstanceCore's ssm:GetParameter* on "*"
    assert attached(plan) == {"AmazonEC2ContainerRegistryPullOnly"}
    (ssm,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "hybrid-eks-eks-hybrid-node-ssm"]
    assert json.loads(ssm.inputs["policy"]) == session_manager_policy()
    (inline,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "hybrid-eks-eks-hybrid-node"]
    deregister = [s for s in json.loads(inline.inputs["policy"])["Statement"] if s["Action"] == "ssm:DeregisterManagedInstance"]
    assert deregister == [
        {
            "Sid": "DeregisterThisClustersNodes",
            "Effect": "Allow",
            "Action": "ssm:DeregisterManagedInstance",
            "Resource": "arn:aws:ssm:us-east-1:123456789012:managed-instance/*",
            "Condition": {"ArnLike": {"ssm:resourceTag/EKSClusterARN": "arn:aws:eks:us-east-1:123456789012:cluster/hybrid-eks"}},
        }
    ]


def test_calico_variant_keeps_every_component_on_hybrid_nodes():
    plan = plan_with(kubernetes={"cni": "calico"})
    releases = {r.inputs["name"]: r.inputs for r in plan.of_type(RELEASE)}
    assert "cilium" not in releases
    calico = releases["calico"]
    assert (calico["chart"], calico["version"], calico["namespace"]) == ("tigera-operator", "v3.29.2", "tigera-operator")
    installation = calico["values"]["installation"]
    (pool,) = installation["calicoNetwork"]["ipPools"]
    assert (pool["cidr"], pool["encapsulation"]) == ("10.96.0.0/16", "VXLAN")
    assert pool["nodeSelector"] == 'eks.amazonaws.com/compute-type == "hybrid"'
    for part in ("calicoNodeDaemonSet", "csiNodeDriverDaemonSet", "calicoKubeControllersDeployment", "typhaDeployment"):
        assert installation[part]["spec"]["template"]["spec"]["nodeSelector"] == {"eks.amazonaws.com/compute-type": "hybrid"}


def test_cni_without_pod_networks_is_refused_with_the_fix():
    # The render-time guard; refusing it at load, before any resource, is the hybrid config checks' job.
    spec = hybrid_eks_spec(kubernetes={"remotePodCidrs": []})
    assert spec.hybrid is not None and spec.hybrid.kubernetes is not None
    with pytest.raises(ConfigError) as refused:
        cni_values(spec.hybrid.kubernetes)
    (finding,) = refused.value.findings
    assert finding.path == "gpucluster:hybrid.kubernetes.remotePodCidrs" and "10.96.0.0/16" in finding.fix


def test_stacks_without_a_site_get_none_of_it():
    plan = shipped_plan("eks-p5")
    assert plan.error is None
    assert "remoteNetworkConfig" not in plan.by_name("eks-p5-eks-eks").inputs
    assert {r.inputs["type"] for r in plan.of_type(ACCESS)} == {"STANDARD"}
    assert not [r for r in plan.resources if "hybrid" in r.name or r.type.startswith("aws:rolesanywhere")]
    assert "hybridNodes" not in plan.outputs


def test_node_files_carry_the_arns_the_stack_creates(run_components):
    spec = hybrid_eks_spec()
    seen: dict[str, Any] = {}

    def program():
        # The stack's path: the hybrid section is GpuCluster's, so the builder gets it (EksClusterArgs has none).
        args = args_of(spec)
        adapted = from_args(args)
        wiring = replace(adapted.wiring, hybrid=spec.hybrid)
        eks = build_eks_cluster(component_part(TOKEN, "k-eks"), "k-eks", adapted.resolved, wiring)
        assert eks.hybrid_nodes is not None and eks.hybrid_nodes.profile is not None
        pulumi.Output.all(eks.hybrid_nodes.bundle, eks.hybrid_nodes.role.arn, eks.hybrid_nodes.profile.arn).apply(
            lambda v: seen.update(bundle=v[0], role=v[1], profile=v[2])
        )

    plan = run_components(program)
    config = yaml.safe_load(seen["bundle"]["nodeConfig.yaml"])
    ra = config["spec"]["hybrid"]["iamRolesAnywhere"]
    (anchor,) = plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor")
    assert (ra["roleArn"], ra["profileArn"], ra["trustAnchorArn"]) == (seen["role"], seen["profile"], anchor.state["arn"])
    assert config["spec"]["cluster"] == {"name": "k", "region": "us-east-1"}
    assert "nodeadm install 1.33 --credential-provider iam-ra" in seen["bundle"]["install.sh"]


def test_stack_output_hands_the_site_its_node_files(plan):
    out = plan.outputs["hybridNodes"]
    assert out["roleArn"] == hybrid_role(plan).state["arn"]
    (profile,) = plan.of_type("aws:rolesanywhere/profile:Profile")
    assert out["profileArn"] == profile.state["arn"]
    assert set(out["files"]) == {"nodeConfig.yaml", "install.sh"}
    ra = yaml.safe_load(out["files"]["nodeConfig.yaml"])["spec"]["hybrid"]["iamRolesAnywhere"]
    assert (ra["roleArn"], ra["profileArn"]) == (out["roleArn"], out["profileArn"])
