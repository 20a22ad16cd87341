"""EksCluster under mocks: the control plane, access, add-ons, and node groups on GpuNodeGroup's template."""

from __future__ import annotations

import base64
import email
import json

import pulumi
import yaml

from gpucluster.components.kubernetes.eks_cluster import EksCluster, EksClusterArgs
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.kubernetes import KubernetesSpec
from gpucluster.config.naming import CLUSTER_TAG
from gpucluster.render.iam import session_manager_policy
from tests.conftest import eks_spec, group
from tests.render.kubernetes.schemas import chart_defaults, unknown_values

SUBNETS = ["subnet-0aaa1111", "subnet-0bbb2222"]
SG = ["sg-0efa0000000000001", "sg-0node000000000002"]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
MNG = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
LUSTRE = SharedStorage(
    "fsx", "lustre", "/fsx", "noatime,flock", "fs-0123.fsx.us-east-1.amazonaws.com", "abcdefgh", "fs-0123", 4800
)


def args_of(spec, *, storage=(), user_data=None, **kwargs) -> EksClusterArgs:
    """EksClusterArgs as a Python user writes them, from a loaded spec's Kubernetes section and groups."""
    groups = spec.groups_for("kubernetes")
    args: EksClusterArgs = {
        **spec.kubernetes.model_dump(exclude_none=True),
        "cluster_name": "k",
        "region": "us-east-1",
        "cluster_subnet_ids": SUBNETS,
        # What the user wrote: resolution's choice of image is not an input (EKS picks the AMI).
        "node_groups": [g.model_dump(exclude_none=True, exclude={"image_ssm_parameter"}) for g in groups],
        "node_group_subnet_ids": {g.name: SUBNETS[:1] for g in groups},
        "security_group_ids": SG,
        "user_data": user_data or {g.name: "#cloud-config\nruncmd: []\n" for g in groups},
        "shared_storage": list(storage),
        "tags": {CLUSTER_TAG: "k", "team": "ml"},
    }
    args.update(kwargs)
    return args


def build(spec, **kwargs):
    return EksCluster("k-eks", args_of(spec, **kwargs))


def test_private_endpoint_api_access_and_kms_encryption(run_components, p5_spec):
    plan = run_components(lambda: build(p5_spec))
    cluster = plan.of_type("aws:eks/cluster:Cluster")[0].inputs
    assert cluster["name"] == "k" and cluster["version"] == "1.33"
    vpc = cluster["vpcConfig"]
    assert (vpc["endpointPrivateAccess"], vpc["endpointPublicAccess"]) == (True, False)
    assert "publicAccessCidrs" not in vpc and vpc["subnetIds"] == SUBNETS
    # no hidden admin for whoever creates the cluster (the admins are the access entries), and a cluster made
    # before keeps its flag instead of being replaced
    assert cluster["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert plan.of_type("aws:eks/cluster:Cluster")[0].ignore_changes == ["accessConfig.bootstrapClusterCreatorAdminPermissions"]
    key = plan.of_type("aws:kms/key:Key")[0]
    assert key.inputs["enableKeyRotation"] is True
    assert key.protect and key.retain_on_delete  # deleting it would leave every Secret unreadable
    assert cluster["encryptionConfig"] == {"provider": {"keyArn": key.state["arn"]}, "resources": ["secrets"]}
    assert cluster["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]
    assert cluster["bootstrapSelfManagedAddons"] is False
    role = plan.by_name("k-eks-cluster-role").inputs
    assert '"eks.amazonaws.com"' in role["assumeRolePolicy"]


def test_secrets_key_unprotected_only_when_data_is(run_components, p5_spec):
    plan = run_components(lambda: build(p5_spec, protect_data=False))
    (key,) = plan.of_type("aws:kms/key:Key")
    assert not key.protect and not key.retain_on_delete


def test_public_endpoint_only_with_its_cidrs_and_a_brought_key(run_components):
    key = "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d-0000-1111-2222-333344445555"
    spec = eks_spec(endpoint={"publicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}, secretsKmsKeyArn=key)
    plan = run_components(lambda: build(spec))
    cluster = plan.of_type("aws:eks/cluster:Cluster")[0].inputs
    assert cluster["vpcConfig"]["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert cluster["encryptionConfig"]["provider"]["keyArn"] == key
    assert plan.of_type("aws:kms/key:Key") == []


def test_access_entries_and_policies(run_components):
    spec = eks_spec(
        accessEntries=[
            {"principalArn": "arn:aws:iam::123456789012:role/admins", "policies": ["AmazonEKSClusterAdminPolicy"]},
            {
                "principalArn": "arn:aws:iam::123456789012:role/research",
                "kubernetesGroups": ["research"],
                "policies": ["AmazonEKSEditPolicy"],
                "namespaces": ["research"],
            },
        ]
    )
    plan = run_components(lambda: build(spec))
    entries = {r.inputs["principalArn"]: r.inputs for r in plan.of_type("aws:eks/accessEntry:AccessEntry")}
    assert entries["arn:aws:iam::123456789012:role/research"]["kubernetesGroups"] == ["research"]
    assocs = {r.inputs["policyArn"]: r.inputs for r in plan.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")}
    admin = assocs["arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"]
    assert admin["accessScope"] == {"type": "cluster"}
    edit = assocs["arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy"]
    assert edit["accessScope"] == {"type": "namespace", "namespaces": ["research"]}


def test_addons_pinned_and_cni_through_pod_identity(run_components, p5_spec):
    plan = run_components(lambda: build(p5_spec))
    addons = {r.inputs["addonName"]: r for r in plan.of_type(ADDON)}
    assert set(addons) == {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "eks-node-monitoring-agent"}
    assert addons["vpc-cni"].inputs["addonVersion"] == "v1.20.1-eksbuild.3"
    assert addons["coredns"].inputs["addonVersion"] == "v1.12.3-eksbuild.1"
    assert "addonVersion" not in addons["kube-proxy"].inputs  # EKS's default for 1.33
    (assoc,) = addons["vpc-cni"].inputs["podIdentityAssociations"]
    cni_role = plan.by_name("k-eks-vpc-cni", "aws:iam/role:Role")
    assert assoc == {"roleArn": cni_role.state["arn"], "serviceAccount": "aws-node"}
    # Pod Identity of this account only (aws:SourceAccount), for kube-system/aws-node of this cluster only
    trust = json.loads(cni_role.inputs["assumeRolePolicy"])
    cluster_arn = plan.of_type("aws:eks/cluster:Cluster")[0].state["arn"]
    assert trust["Statement"] == [
        {
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {
                "StringEquals": {
                    "aws:SourceAccount": "123456789012",
                    "aws:RequestTag/eks-cluster-arn": cluster_arn,
                    "aws:RequestTag/kubernetes-namespace": "kube-system",
                    "aws:RequestTag/kubernetes-service-account": "aws-node",
                }
            },
        }
    ]
    policies = sorted(
        r.inputs["policyArn"].rsplit("/", 1)[-1] for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    )
    assert policies == [
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonEKSClusterPolicy",
        "AmazonEKSWorkerNodePolicy",
        "AmazonEKS_CNI_Policy",
    ]
    # Session Manager on the nodes without the managed policy's ssm:GetParameter* on "*"
    (ssm,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "k-eks-node-ssm"]
    assert json.loads(ssm.inputs["policy"]) == session_manager_policy()
    # vpc-cni needs the Pod Identity agent; nodes need vpc-cni and kube-proxy; CoreDNS needs nodes.
    urn = {r.name: r.urn for r in plan.resources if r.type in (ADDON, MNG)}
    assert urn["k-eks-eks-pod-identity-agent"] in addons["vpc-cni"].dependencies
    gpu_mng = plan.by_name("k-eks-gpu-mng")
    assert {urn["k-eks-vpc-cni"], urn["k-eks-kube-proxy"]} <= set(gpu_mng.dependencies)
    assert {urn["k-eks-system"], urn["k-eks-gpu-mng"]} <= set(addons["coredns"].dependencies)


def test_fsx_csi_driver_only_with_lustre(run_components, p5_spec):
    scratch = SharedStorage("scratch", "nvme", "/scratch", "noatime")
    without = run_components(lambda: build(p5_spec, storage=[scratch]))
    assert "aws-fsx-csi-driver" not in {r.inputs["addonName"] for r in without.of_type(ADDON)}
    with_lustre = run_components(lambda: build(p5_spec, storage=[LUSTRE]))
    fsx = next(r.inputs for r in with_lustre.of_type(ADDON) if r.inputs["addonName"] == "aws-fsx-csi-driver")
    config = json.loads(fsx["configurationValues"])
    assert config == {"controller": {"region": "us-east-1"}}
    assert unknown_values(config, chart_defaults("aws-fsx-csi-driver")) == [], "add-on configuration = the chart's values"


def test_gpu_managed_node_group_on_the_efa_launch_template(run_components, p5_spec):
    plan = run_components(lambda: build(p5_spec))
    lt = plan.by_name("k-eks-gpu-lt")
    tmpl = lt.inputs
    nics = tmpl["networkInterfaces"]
    assert len(nics) == 33 and sum(n["interfaceType"] == "efa-only" for n in nics) == 32
    assert all("subnetId" not in n for n in nics), "EKS rejects multi-interface templates that name subnets"
    cluster_sg = plan.of_type("aws:eks/cluster:Cluster")[0].state["vpcConfig"]["clusterSecurityGroupId"]
    assert all(n["securityGroups"] == [*SG, cluster_sg] for n in nics)
    assert "imageId" not in tmpl and "iamInstanceProfile" not in tmpl
    assert tmpl["blockDeviceMappings"][0]["deviceName"] == "/dev/xvda"
    assert tmpl["metadataOptions"]["httpTokens"] == "required"
    assert plan.of_type("aws:ec2/placementGroup:PlacementGroup")[0].state["name"] == tmpl["placement"]["groupName"]
    assert plan.of_type("aws:autoscaling/group:Group") == []
    mng = plan.by_name("k-eks-gpu-mng").inputs
    assert mng["amiType"] == "AL2023_x86_64_NVIDIA" and mng["capacityType"] == "ON_DEMAND"
    assert mng["launchTemplate"] == {"id": lt.id, "version": "1"}
    assert mng["subnetIds"] == SUBNETS[:1]
    assert "instanceTypes" not in mng  # the template names it
    assert mng["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 0}
    assert mng["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert mng["labels"] == {"gpucluster/node-group": "gpu", "gpucluster/gpu": "h100", "gpucluster/efa": "true"}
    node_role = plan.by_name("k-eks-node-role")
    assert mng["nodeRoleArn"] == node_role.state["arn"]


def test_capacity_block_reservation_and_spot(run_components):
    block = eks_spec(group(maxSize=4, capacity={"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"}))
    plan = run_components(lambda: build(block))
    assert plan.by_name("k-eks-gpu-mng").inputs["capacityType"] == "CAPACITY_BLOCK"
    lt = plan.by_name("k-eks-gpu-lt").inputs
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == "cr-0123456789abcdef0"
    spot = run_components(lambda: build(eks_spec(group(capacity={"type": "spot"}))))
    assert spot.by_name("k-eks-gpu-mng").inputs["capacityType"] == "SPOT"
    assert "instanceMarketOptions" not in spot.by_name("k-eks-gpu-lt").inputs, "EKS buys Spot itself"


def test_user_data_is_mime_multipart_for_nodeadm(run_components, p5_spec):
    plan = run_components(lambda: build(p5_spec))
    text = base64.b64decode(plan.by_name("k-eks-gpu-lt").inputs["userData"]).decode()
    message = email.message_from_string(text)
    assert message.get_content_type() == "multipart/mixed"
    parts = {p.get_content_type(): p.get_payload() for p in message.get_payload()}
    assert parts["text/cloud-config"].startswith("#cloud-config\n")
    node_config = yaml.safe_load(parts["application/node.eks.aws"])
    assert node_config == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "instance": {"localStorage": {"strategy": "RAID0"}},
            # the GPU taint and the boot taint the health sweep's boot check takes off (test_boot_gate.py)
            "kubelet": {
                "flags": ["--register-with-taints=nvidia.com/gpu=true:NoSchedule,gpucluster.io/health-boot=pending:NoSchedule"]
            },
        },
    }
    no_raid = run_components(lambda: build(p5_spec, instance_store_for_pods=False))
    text = base64.b64decode(no_raid.by_name("k-eks-gpu-lt").inputs["userData"]).decode()
    assert "localStorage" not in text


def test_system_node_group(run_components, p5_spec):
    plan = run_components(lambda: build(p5_spec))
    mng = plan.by_name("k-eks-system").inputs
    assert mng["amiType"] == "AL2023_x86_64_STANDARD" and mng["subnetIds"] == SUBNETS
    assert mng["scalingConfig"] == {"minSize": 2, "maxSize": 4, "desiredSize": 2}
    assert "taints" not in mng
    lt = plan.by_name("k-eks-system-lt").inputs
    assert lt["instanceType"] == "m7i.xlarge" and lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"


def test_outputs_and_kubernetes_provider(run_components, p5_spec):
    seen = {}

    def program():
        eks = build(p5_spec)
        pulumi.Output.all(eks.endpoint, eks.oidc_issuer, eks.kubeconfig, eks.cluster_security_group_id).apply(
            lambda v: seen.update(endpoint=v[0], issuer=v[1], kubeconfig=v[2], sg=v[3])
        )

    plan = run_components(program)
    assert seen["endpoint"].startswith("https://") and seen["endpoint"].endswith(".eks.amazonaws.com")
    assert seen["issuer"].startswith("https://oidc.eks.us-east-1.amazonaws.com/id/")
    assert seen["sg"].startswith("sg-")
    config = json.loads(seen["kubeconfig"])
    assert config["clusters"][0]["cluster"]["server"] == seen["endpoint"]
    assert config["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "k"]
    provider = plan.by_name("k-eks-k8s")
    assert provider.type == "pulumi:providers:kubernetes" and json.loads(provider.inputs["kubeconfig"]) == config


def test_tags_reach_every_taggable_child(run_components, p5_spec):
    from tests.components.test_contracts import _taggable, _tags

    plan = run_components(lambda: build(p5_spec))
    taggable = [r for r in plan.resources if r.custom and _taggable(r.type)]
    assert len(taggable) > 10
    assert [r.name for r in taggable if _tags(r.inputs).get(CLUSTER_TAG) != "k" or _tags(r.inputs).get("team") != "ml"] == []


def test_kubernetes_spec_defaults_are_secure():
    spec = KubernetesSpec()
    assert spec.endpoint.private_access and not spec.endpoint.public_access
    assert spec.secrets_kms_key_arn is None  # a new key, with rotation, is created
    assert "audit" in spec.enabled_log_types
