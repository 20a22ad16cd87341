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
    # --- tenancy: the teams' POSIX identities, the sweep's image, what enforces the NetworkPolicies ---
    (
        "team-uid-below-1000",
        k8s(teams=[{"name": "a", "posix": {"uidFirst": 0}}]),
        "gpucluster:kubernetes.teams[0].posix.uidFirst",
        "greater than or equal to 1000",
    ),
    (
        "team-gid-nogroup",
        k8s(teams=[{"name": "a", "posix": {"gid": 65534}}]),
        "gpucluster:kubernetes.teams[0].posix",
        "gid 65534 is nobody/nogroup",
    ),
    (
        "team-range-holds-nobody",
        k8s(teams=[{"name": "a", "posix": {"uidFirst": 60000, "uidCount": 10000}}]),
        "gpucluster:kubernetes.teams[0].posix",
        "user IDs 60000–69999 include 65534 (nobody/nogroup), 65535",
    ),
    (
        "team-range-past-kubernetes",
        k8s(teams=[{"name": "a", "posix": {"uidFirst": 2147480000, "uidCount": 10000}}]),
        "gpucluster:kubernetes.teams[0].posix",
        "above 2147483647, the largest user ID Kubernetes accepts",
    ),
    (
        "team-uid-count-zero",
        k8s(teams=[{"name": "a", "posix": {"uidCount": 0}}]),
        "gpucluster:kubernetes.teams[0].posix.uidCount",
        "greater than or equal to 1",
    ),
    (
        "team-ranges-overlap-explicit",
        k8s(teams=[{"name": "a", "posix": {"uidFirst": 100000}}, {"name": "b", "posix": {"uidFirst": 105000}}]),
        "gpucluster:kubernetes.teams[1].posix.uidFirst",
        "team 'b' user IDs 105000–114999 overlap team 'a''s 100000–109999",
    ),
    (
        # team7 and team80 hash to the same slot of the band (tests/config/kubernetes/test_team_posix.py)
        "team-default-ranges-collide",
        k8s(teams=[{"name": "team7"}, {"name": "team80"}]),
        "gpucluster:kubernetes.teams[1].posix.uidFirst",
        "(both derived from the team names: they fell in the same slot)",
    ),
    (
        "teams-share-a-group",
        k8s(teams=[{"name": "a", "posix": {"gid": 5000}}, {"name": "b", "posix": {"gid": 5000}}]),
        "gpucluster:kubernetes.teams[1].posix.gid",
        "teams 'a' and 'b' both have group ID 5000",
    ),
    (
        "sweep-image-by-tag",
        k8s(health={"sweepImage": "public.ecr.aws/docker/library/python:3.12-slim"}),
        "gpucluster:kubernetes.health.sweepImage",
        "names the sweep's image by tag only; it runs privileged on every GPU node",
    ),
    (
        "vpc-cni-without-network-policy",
        k8s(addonVersions={"vpc-cni": "v1.13.4-eksbuild.1"}),
        "gpucluster:kubernetes.addonVersions.vpc-cni",
        "older than v1.14.0, the first that enforces Kubernetes NetworkPolicies",
    ),
    ("eks-1.29-gone", k8s(version="1.29"), "gpucluster:kubernetes.version", "EKS does not offer Kubernetes '1.29'"),
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
