"""Bad Kubernetes configs: each fails naming the field, and the program registers nothing.

Every case runs the real stack program (``__main__.py``) under the plan's mock engine, so this also
proves the error comes before the first resource.
"""

from __future__ import annotations

import pytest

from tests.conftest import assert_refused, group, make_config

TWO_ZONES = {"availabilityZones": ["us-east-1a", "us-east-1b"]}


def k8s(*groups, network=TWO_ZONES, **section):
    return make_config(*(groups or (group(),)), network=network, kubernetes=section)


# (id, config, field path named, message fragment)
BAD_KUBERNETES = [
    (
        "vpc-cni-pin-on-1.34",
        k8s(version="1.34", addonVersions={"vpc-cni": "v1.20.1-eksbuild.3"}),
        "gpucluster:kubernetes.addonVersions.vpc-cni",
        "is gpucluster's pin for Kubernetes 1.27–1.33, not for 1.34",
    ),
    (
        "quota-as-boolean",
        k8s(teams=[{"name": "a", "gpuQuota": {"h100": True}}]),
        "gpucluster:kubernetes.teams[0].gpuQuota",
        "whole number, not the boolean true",
    ),
    (
        "secrets-key-other-region",
        k8s(secretsKmsKeyArn="arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
        "gpucluster:kubernetes.secretsKmsKeyArn",
        "is in eu-west-1, but the cluster is in us-east-1",
    ),
    ("eks-version", k8s(version="1.25"), "gpucluster:kubernetes.version", "EKS does not offer Kubernetes '1.25'"),
    (
        "public-cidrs-on-private-endpoint",
        k8s(endpoint={"publicAccessCidrs": ["203.0.113.0/24"]}),
        "gpucluster:kubernetes.endpoint.publicAccessCidrs",
        "the endpoint is private",
    ),
    (
        "cidr-malformed",
        k8s(endpoint={"publicAccess": True, "publicAccessCidrs": ["203.0.113.7/24"]}),
        "gpucluster:kubernetes.endpoint.publicAccessCidrs",
        "is not a network CIDR",
    ),
    (
        "vpc-cni-too-old-for-efa-only",
        k8s(addonVersions={"vpc-cni": "v1.18.4-eksbuild.1"}),
        "gpucluster:kubernetes.addonVersions.vpc-cni",
        "older than v1.18.5",
    ),
    (
        "unknown-addon",
        k8s(addonVersions={"aws-ebs-csi": "v1.30.0-eksbuild.1"}),
        "gpucluster:kubernetes.addonVersions",
        "add-on 'aws-ebs-csi' is not one gpucluster installs",
    ),
    (
        "quota-flavor-not-provided",
        k8s(teams=[{"name": "research", "gpuQuota": {"a100": 16}}]),
        "gpucluster:kubernetes.teams[0].gpuQuota",
        "no Kubernetes node group provides GPU flavor 'a100'",
    ),
    (
        "negative-quota",
        k8s(teams=[{"name": "research", "gpuQuota": {"h100": -8}}]),
        "gpucluster:kubernetes.teams[0].gpuQuota",
        "a quota is a number of GPUs, 0 or more",
    ),
    (
        "team-namespaces-clash",
        k8s(teams=[{"name": "a", "namespace": "train"}, {"name": "b", "namespace": "train"}]),
        "gpucluster:kubernetes.teams[1].namespace",
        "both use namespace 'train'",
    ),
    (
        "duplicate-teams",
        k8s(teams=[{"name": "a"}, {"name": "a"}]),
        "gpucluster:kubernetes.teams[1].name",
        "team name 'a' is already used by entry [0]",
    ),
    (
        "mig-without-mig-gpus",
        k8s(group(instanceType="g6e.48xlarge"), gpuOperator={"migStrategy": "mixed"}),
        "gpucluster:kubernetes.gpuOperator.migStrategy",
        "which L40S does not have",
    ),
    (
        "unknown-mig-strategy",
        k8s(gpuOperator={"migStrategy": "all"}),
        "gpucluster:kubernetes.gpuOperator.migStrategy",
        "'none', 'single' or 'mixed'",
    ),
    (
        "custom-ami-on-eks",
        k8s(group(imageId="ami-0123456789abcdef0")),
        "gpucluster:nodeGroups[0].imageId",
        "a custom AMI is not supported here",
    ),
    (
        "eks-in-one-zone",
        k8s(network={}),
        "gpucluster:network.availabilityZones",
        "needs subnets in at least two Availability Zones",
    ),
    (
        "access-policy-misspelt",
        k8s(accessEntries=[{"principalArn": "arn:aws:iam::123456789012:role/admins", "policies": ["AmazonEKSAdmin"]}]),
        "gpucluster:kubernetes.accessEntries[0].policies[0]",
        "'AmazonEKSClusterAdminPolicy'",
    ),
    (
        "principal-not-an-iam-arn",
        k8s(accessEntries=[{"principalArn": "admins"}]),
        "gpucluster:kubernetes.accessEntries[0].principalArn",
        "should match pattern",
    ),
    ("misspelt-field", k8s(teamz=[]), "gpucluster:kubernetes.teamz", "unknown field 'teamz'"),
    (
        "scheduler-kubernetes-without-section",
        make_config(group(scheduler="kubernetes")),
        "gpucluster:nodeGroups[0].scheduler",
        "the cluster configures no kubernetes",
    ),
    (
        "pods-ready-timeout-format",
        k8s(kueue={"podsReadyTimeout": "ten minutes"}),
        "gpucluster:kubernetes.kueue.podsReadyTimeout",
        "should match pattern",
    ),
    (
        "image-yaml-injection",
        k8s(exampleJob={"image": "busybox\n              securityContext:\n                privileged: true"}),
        "gpucluster:kubernetes.exampleJob.image",
        "contains a control character (U+000A at position 7)",
    ),
    (
        "image-with-comment",
        k8s(exampleJob={"image": "registry.example.com/team/pytorch:2.7 # pinned"}),
        "gpucluster:kubernetes.exampleJob.image",
        "'registry.example.com/team/pytorch:2.7 # pinned' is not a container image reference",
    ),
    (
        "image-uppercase-repository",
        k8s(exampleJob={"image": "registry.example.com/Team/PyTorch:2.7"}),
        "gpucluster:kubernetes.exampleJob.image",
        "is not a container image reference",
    ),
    (
        "image-flow-mapping",
        k8s(exampleJob={"image": "{privileged: true}"}),
        "gpucluster:kubernetes.exampleJob.image",
        "'{privileged: true}' is not a container image reference",
    ),
    (
        "topology-level-yaml-injection",
        k8s(kueue={"topologyLevels": ["a.example.com/l1", "x: y", "kubernetes.io/hostname"]}),
        "gpucluster:kubernetes.kueue.topologyLevels",
        "topology level 'x: y' is not a Kubernetes label key",
    ),
    (
        "topology-level-newline",
        k8s(
            kueue={"topologyLevels": ["topology.k8s.aws/network-node-layer-3\n  priorityClassName: x", "kubernetes.io/hostname"]}
        ),
        "gpucluster:kubernetes.kueue.topologyLevels[0]",
        "contains a control character (U+000A at position 37)",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), [c[1:] for c in BAD_KUBERNETES], ids=[c[0] for c in BAD_KUBERNETES])
def test_bad_kubernetes_config_fails_before_any_resource(config, path, fragment):
    assert_refused(config, path, fragment)


def test_there_are_at_least_ten():
    assert len(BAD_KUBERNETES) >= 10
