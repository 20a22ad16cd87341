"""The Kubernetes validators, table-tested: each row is a config and the finding it must produce."""

from __future__ import annotations

import pytest

from gpucluster.config.checks.cluster import validate_cluster
from gpucluster.config.errors import Level
from gpucluster.config.kubernetes import VPC_CNI_VERSION, eks_ami_type, flavor_name, version_tuple
from tests.conftest import assert_finding, group, make_config
from tests.conftest import parse_spec as parse

TWO_ZONES = {"availabilityZones": ["us-east-1a", "us-east-1b"]}


def k8s(*groups, network=TWO_ZONES, **section):
    return make_config(*(groups or (group(),)), network=network, kubernetes=section)


NO_ADMIN = (
    "no entry is a cluster admin: EKS makes nobody one behind the config's back (no bootstrap admin for the "
    "cluster's creator), and Pulumi creates the GPU Operator, Kueue and team namespaces with the credentials of "
    "whoever runs `pulumi up`, which EKS then refuses"
)

# (id, config, level, path, expected_message, code)
CASES = [
    (
        "eks-version",
        k8s(version="1.27"),
        Level.ERROR,
        "gpucluster:kubernetes.version",
        "EKS does not offer Kubernetes '1.27'",
        "eks-version",
    ),
    (
        "endpoint-open-to-internet",
        k8s(endpoint={"publicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}),
        Level.WARNING,
        "gpucluster:kubernetes.endpoint.publicAccessCidrs",
        "the public API endpoint accepts connections from 0.0.0.0/0: anyone on the internet can reach the API server "
        "(authentication still applies)",
        "endpoint-open",
    ),
    (
        "endpoint-public-without-cidrs",
        k8s(endpoint={"publicAccess": True}),
        Level.WARNING,
        "gpucluster:kubernetes.endpoint.publicAccessCidrs",
        "the public API endpoint accepts connections from 0.0.0.0/0: anyone on the internet can reach the API server "
        "(authentication still applies)",
        "endpoint-open",
    ),
    (
        "endpoint-cidrs-while-private",
        k8s(endpoint={"publicAccessCidrs": ["203.0.113.0/24"]}),
        Level.ERROR,
        "gpucluster:kubernetes.endpoint.publicAccessCidrs",
        "publicAccessCidrs is set but the endpoint is private (publicAccess is false)",
        "endpoint-cidrs-private",
    ),
    (
        "endpoint-unreachable",
        k8s(endpoint={"privateAccess": False}),
        Level.ERROR,
        "gpucluster:kubernetes.endpoint",
        "the API server is reachable neither inside the VPC nor from the internet",
        "endpoint-unreachable",
    ),
    (
        "endpoint-no-private",
        k8s(endpoint={"privateAccess": False, "publicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}),
        Level.WARNING,
        "gpucluster:kubernetes.endpoint.privateAccess",
        "nodes reach the API server over the internet (through NAT) because the private endpoint is off",
        "endpoint-no-private",
    ),
    (
        "vpc-cni-below-efa-only",
        k8s(addonVersions={"vpc-cni": "v1.18.3-eksbuild.1"}),
        Level.ERROR,
        "gpucluster:kubernetes.addonVersions.vpc-cni",
        "vpc-cni v1.18.3-eksbuild.1 is older than v1.18.5, which EKS requires for efa-only interfaces (the current EFA layout)",
        "vpc-cni-efa",
    ),
    (
        "vpc-cni-below-multi-efa",
        k8s(group(efaLayout="legacy"), addonVersions={"vpc-cni": "v1.7.5-eksbuild.1"}),
        Level.ERROR,
        "gpucluster:kubernetes.addonVersions.vpc-cni",
        "vpc-cni v1.7.5-eksbuild.1 is older than v1.7.10, which EKS requires for nodes with several EFA interfaces",
        "vpc-cni-efa",
    ),
    (
        "kube-proxy-other-minor",
        k8s(addonVersions={"kube-proxy": "v1.32.6-eksbuild.2"}),
        Level.ERROR,
        "gpucluster:kubernetes.addonVersions.kube-proxy",
        "kube-proxy v1.32.6-eksbuild.2 does not match the cluster's Kubernetes 1.33",
        "kube-proxy-version",
    ),
    (
        "one-zone",
        k8s(network={}),
        Level.ERROR,
        "gpucluster:network.availabilityZones",
        "an EKS cluster needs subnets in at least two Availability Zones; the network has ['us-east-1a']",
        "eks-two-zones",
    ),
    (
        "custom-ami",
        k8s(group(imageId="ami-0123456789abcdef0")),
        Level.ERROR,
        "gpucluster:nodeGroups[0].imageId",
        "an EKS node group boots the EKS-optimized Amazon Linux 2023 AMI of its accelerator (AL2023 NVIDIA or Neuron), "
        "chosen by EKS; a custom AMI is not supported here",
        "kubernetes-custom-ami",
    ),
    (
        "spot-price-cap",
        k8s(group(capacity={"type": "spot", "spotMaxPrice": 40.0})),
        Level.ERROR,
        "gpucluster:nodeGroups[0].capacity.spotMaxPrice",
        "EKS managed node groups buy Spot at the current price and cannot cap it",
        "kubernetes-spot-price",
    ),
    (
        "no-kubernetes-groups",
        k8s(group(scheduler="none")),
        Level.WARNING,
        "gpucluster:kubernetes",
        "no node group runs on Kubernetes: the EKS cluster would have only its system nodes",
        "kubernetes-no-groups",
    ),
    (
        "mig-on-l40s",
        k8s(group(instanceType="g6e.48xlarge"), gpuOperator={"migStrategy": "single"}),
        Level.ERROR,
        "gpucluster:kubernetes.gpuOperator.migStrategy",
        "MIG strategy 'single' needs Multi-Instance GPU, which L40S does not have",
        "mig-unsupported",
    ),
    (
        "quota-unknown-flavor",
        k8s(teams=[{"name": "research", "gpuQuota": {"h200": 8}}]),
        Level.ERROR,
        "gpucluster:kubernetes.teams[0].gpuQuota",
        "team 'research' has a quota of 8 'h200' GPUs, but no Kubernetes node group provides GPU flavor 'h200'",
        "quota-unknown-flavor",
    ),
    (
        "quota-above-capacity",
        k8s(teams=[{"name": "a", "gpuQuota": {"h100": 16}}, {"name": "b", "gpuQuota": {"h100": 8}}]),
        Level.WARNING,
        "gpucluster:kubernetes.teams",
        "teams are guaranteed 24 h100 GPUs in total, but the Kubernetes node groups hold at most 16: some quota can never be used",
        "quota-above-capacity",
    ),
    (
        "namespace-clash",
        k8s(teams=[{"name": "a", "namespace": "ml"}, {"name": "b", "namespace": "ml"}]),
        Level.ERROR,
        "gpucluster:kubernetes.teams[1].namespace",
        "teams 'a' and 'b' both use namespace 'ml'; a namespace holds one team's queue and RBAC",
        "team-namespace-clash",
    ),
    (
        "namespace-reserved",
        k8s(teams=[{"name": "ops", "namespace": "kube-system"}]),
        Level.ERROR,
        "gpucluster:kubernetes.teams[0].namespace",
        "team 'ops' would use namespace 'kube-system', which Kubernetes or gpucluster owns",
        "team-namespace-reserved",
    ),
    (
        "system-type-unknown",
        k8s(systemNodeGroup={"instanceType": "m7i.xlarg"}),
        Level.ERROR,
        "gpucluster:kubernetes.systemNodeGroup.instanceType",
        "instance type 'm7i.xlarg' is not in the instance catalog",
        "unknown-instance-type",
    ),
    (
        "system-sizes",
        k8s(systemNodeGroup={"minSize": 3, "maxSize": 2}),
        Level.ERROR,
        "gpucluster:kubernetes.systemNodeGroup.minSize",
        "minSize 3 is greater than maxSize 2",
        "sizes",
    ),
    (
        "topology-level-twice",
        k8s(kueue={"topologyLevels": ["topology.k8s.aws/network-node-layer-3", "topology.k8s.aws/network-node-layer-3"]}),
        Level.ERROR,
        "gpucluster:kubernetes.kueue.topologyLevels",
        "topology level 'topology.k8s.aws/network-node-layer-3' is listed twice; each level is a distinct node label",
        "topology-levels",
    ),
    (
        "cohort-name",
        k8s(kueue={"cohort": "GPU_pool"}),
        Level.ERROR,
        "gpucluster:kubernetes.kueue.cohort",
        "cohort 'GPU_pool' is not a DNS subdomain (lowercase letters, digits, '-' and '.')",
        "cohort-name",
    ),
    (
        "example-job-group",
        k8s(exampleJob={"nodeGroup": "a100"}),
        Level.ERROR,
        "gpucluster:kubernetes.exampleJob.nodeGroup",
        "node group 'a100' is not run by Kubernetes",
        "example-job-group",
    ),
    (
        "example-job-too-big",
        k8s(exampleJob={"nodes": 4}),
        Level.WARNING,
        "gpucluster:kubernetes.exampleJob.nodes",
        "the example job spans 4 nodes but node group 'gpu' has at most 2: it would never be admitted",
        "example-job-size",
    ),
    (
        "access-entry-twice",
        k8s(
            accessEntries=[
                {"principalArn": "arn:aws:iam::123456789012:role/admins"},
                {"principalArn": "arn:aws:iam::123456789012:role/admins"},
            ]
        ),
        Level.ERROR,
        "gpucluster:kubernetes.accessEntries[1].principalArn",
        "arn:aws:iam::123456789012:role/admins has two access entries; EKS allows one per principal",
        "access-entry-twice",
    ),
    (
        "no-cluster-admin",
        k8s(accessEntries=[{"principalArn": "arn:aws:iam::123456789012:role/ops", "policies": ["AmazonEKSAdminPolicy"]}]),
        Level.WARNING,
        "gpucluster:kubernetes.accessEntries",
        NO_ADMIN,
        "no-cluster-admin",
    ),
    (
        "namespaced-admin-is-no-cluster-admin",
        k8s(
            accessEntries=[
                {
                    "principalArn": "arn:aws:iam::123456789012:role/ops",
                    "policies": ["AmazonEKSClusterAdminPolicy"],
                    "namespaces": ["research"],
                }
            ]
        ),
        Level.WARNING,
        "gpucluster:kubernetes.accessEntries",
        NO_ADMIN,
        "no-cluster-admin",
    ),
    (
        "access-scope-without-policy",
        k8s(accessEntries=[{"principalArn": "arn:aws:iam::123456789012:role/dev", "namespaces": ["research"]}]),
        Level.WARNING,
        "gpucluster:kubernetes.accessEntries[0].namespaces",
        "namespaces only scope access policies, and this entry has none",
        "access-entry-scope",
    ),
]


@pytest.mark.parametrize(
    ("config", "level", "path", "expected_message", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_kubernetes_finding(catalog, config, level, path, expected_message, code):
    assert_finding(validate_cluster(parse(config), catalog), level, path, expected_message, code)


def test_a_good_kubernetes_config_has_no_findings(catalog):
    config = k8s(
        group(maxSize=8, capacity={"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"}),
        endpoint={"publicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]},
        teams=[{"name": "a", "gpuQuota": {"h100": 40}}, {"name": "b", "gpuQuota": {"h100": 24}}],
        gpuOperator={"migStrategy": "mixed"},
        accessEntries=[{"principalArn": "arn:aws:iam::123456789012:role/deployer", "policies": ["AmazonEKSClusterAdminPolicy"]}],
    )
    config["gpucluster:monitoring"] = {"alarmEmails": ["oncall@example.com"]}  # somebody receives the alerts
    assert validate_cluster(parse(config), catalog) == []


def test_no_kubernetes_section_no_kubernetes_findings(catalog):
    findings = validate_cluster(parse(make_config(group())), catalog)
    assert not [f for f in findings if "kubernetes" in f.path]


def test_the_pinned_vpc_cni_handles_efa_only_interfaces():
    assert version_tuple(VPC_CNI_VERSION) >= (1, 18, 5)


@pytest.mark.parametrize(
    ("itype", "ami", "flavor"),
    [
        ("p5.48xlarge", "AL2023_x86_64_NVIDIA", "h100"),
        ("p4d.24xlarge", "AL2023_x86_64_NVIDIA", "a100"),
        ("g6e.48xlarge", "AL2023_x86_64_NVIDIA", "l40s"),
        ("trn1.32xlarge", "AL2023_x86_64_NEURON", "trainium"),
        ("m7i.xlarge", "AL2023_x86_64_STANDARD", "m7i-xlarge"),
    ],
)
def test_ami_type_and_flavor_follow_the_accelerator(catalog, itype, ami, flavor):
    assert eks_ami_type(catalog[itype]) == ami
    assert flavor_name(catalog[itype]) == flavor
