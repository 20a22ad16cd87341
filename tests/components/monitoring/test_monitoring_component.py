"""The Monitoring part through the real stack program (mocked engine): what a Slurm and an EKS cluster get, that
``enabled: false`` leaves nothing behind, and that a given key replaces the key gpucluster would create."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.conftest import GOLDEN, TWO_ZONES, check_golden, group, identity_declared_config, make_config, plan_config

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
MONITORING_TYPES = ("aws:amp/", "aws:sns/", "aws:grafana/")


def slurm(**monitoring):
    return make_config(group(desiredSize=1), slurm={"nodeGroups": [{"name": "gpu", "mode": "static"}]}, monitoring=monitoring)


def _ok(config):
    plan = plan_config(config)
    assert plan.error is None, plan.error
    return plan


@pytest.fixture(scope="module")
def slurm_plan():
    return _ok(slurm(alarmEmails=["oncall@example.com"]))


def test_slurm_cluster_gets_store_rules_alerts_logs_and_rights(slurm_plan):
    types = [r.type for r in slurm_plan.resources]
    for token in (
        "aws:amp/workspace:Workspace",
        "aws:amp/ruleGroupNamespace:RuleGroupNamespace",
        "aws:amp/alertManagerDefinition:AlertManagerDefinition",
        "aws:sns/topic:Topic",
        "aws:sns/topicPolicy:TopicPolicy",
        "aws:sns/topicSubscription:TopicSubscription",
    ):
        assert token in types, token
    assert "aws:amp/scraper:Scraper" not in types and "aws:grafana/workspace:Workspace" not in types
    groups = {r.inputs["name"]: r.inputs for r in slurm_plan.of_type("aws:cloudwatch/logGroup:LogGroup")}
    for name in ("/gpucluster/test", "/gpucluster/test/amp"):
        assert groups[name]["retentionInDays"] == 180 and groups[name]["kmsKeyId"].startswith("arn:aws:kms:")
    key = next(r for r in slurm_plan.of_type("aws:kms/key:Key") if "monitoring" in r.name)
    assert key.inputs["enableKeyRotation"] is True
    topic = slurm_plan.by_name("test-monitoring-alerts", "aws:sns/topic:Topic")
    assert topic.inputs["kmsMasterKeyId"] == groups["/gpucluster/test"]["kmsKeyId"]
    policies = {
        r.name: json.loads(r.inputs["policy"])
        for r in slurm_plan.of_type("aws:iam/rolePolicy:RolePolicy")
        if "monitoring" in r.name
    }
    assert set(policies) == {"test-monitoring-head-logs", "test-monitoring-node-logs", "test-monitoring-head-remote-write"}
    puts = {who: policies[f"test-monitoring-{who}-logs"]["Statement"][1]["Resource"] for who in ("head", "node")}
    assert any(r.endswith(":log-stream:*/slurmctld") for r in puts["head"])
    assert not any("slurmctld" in r or "slurmdbd" in r for r in puts["node"])  # L4: compute writes its own logs only
    write = policies["test-monitoring-head-remote-write"]["Statement"][0]
    assert write["Action"] == "aps:RemoteWrite" and write["Resource"].startswith("arn:aws:aps:us-east-1:")
    # The rules and the Alertmanager definition AMP gets are the rendered ones, the topic's ARN filled in.
    assert any(p.endswith("/rules.yaml") for p in slurm_plan.files)
    definition = slurm_plan.by_name("test-monitoring-alertmanager").inputs["definition"]
    assert f"topic_arn: {topic.state['arn']}" in definition
    assert slurm_plan.by_name("test-monitoring-alerts-policy").inputs["arn"] == topic.state["arn"]


def test_login_nodes_ship_into_their_own_streams_only():
    """A Slurm cluster with login nodes: the login role (and only it) gets a log shipping policy whose events go to the
    login logs' streams (auth.log, syslog, SSSD, Session Manager's agent) and none of the head's or compute's."""
    plan = _ok(identity_declared_config())
    login_role = plan.by_name("test-slurm-login-role").state["id"]
    policy = plan.by_name("test-monitoring-login-logs", "aws:iam/rolePolicy:RolePolicy")
    assert policy.inputs["role"] == login_role
    [make, put] = json.loads(policy.inputs["policy"])["Statement"]
    assert make["Action"] == ["logs:CreateLogStream", "logs:DescribeLogStreams"]
    streams = {r.rsplit(":log-stream:", 1)[1] for r in put["Resource"]}
    assert {"*/auth", "*/syslog", "*/sssd/*", "*/ssm-agent", "*/cloud-init"} <= streams
    assert not {"*/slurmctld", "*/slurmdbd", "*/gpucluster-agent", "*/slurmd", "*/health"} & streams
    shipping = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-logs")]
    assert [r.name for r in shipping if r.inputs["role"] == login_role] == ["test-monitoring-login-logs"]
    # the shipper runs from the node package: the login role reads that object of the artifact bucket and the
    # declared users' object, nothing else
    bucket = plan.by_name("test-slurm-artifacts", "aws:s3/bucket:Bucket").state["arn"]
    package = plan.by_name("test-slurm-agent-package").inputs["key"]
    access = json.loads(plan.by_name("test-slurm-login-access").inputs["policy"])["Statement"]
    reads = [st["Resource"] for st in access if str(st["Action"]).startswith("s3:")]
    users = plan.by_name("test-slurm-users").inputs["key"]
    assert reads == [[f"{bucket}/{package}", f"{bucket}/{users}"]] and users == "users/users.json"
    assert package.startswith("agent/gpucluster_agents-")


@pytest.fixture(scope="module")
def off_plan():
    return _ok(slurm(enabled=False))


def test_enabled_false_leaves_no_monitoring_resource(off_plan):
    plan = off_plan
    assert [r.name for r in plan.resources if r.type.startswith(MONITORING_TYPES) or "monitoring" in r.name] == []
    assert not [p for p in plan.files if p.endswith(("/rules.yaml", "/alertmanager.yaml"))]


def test_eks_gets_a_scraper_and_grafana_behind_a_vpc_endpoint_with_the_given_key():
    config = make_config(
        group(maxSize=2), network=TWO_ZONES, kubernetes={}, monitoring={"kmsKeyArn": KEY, "grafana": {"enabled": True}}
    )
    plan = _ok(config)
    scraper = plan.of_type("aws:amp/scraper:Scraper")
    assert len(scraper) == 1 and "nvidia-dcgm-exporter" in scraper[0].inputs["scrapeConfiguration"]
    entry = plan.by_name("test-monitoring-scraper-access")
    assert entry.inputs["userName"] == "aps-collector-user"
    binding = plan.by_name("test-monitoring-scraper-binding")
    assert binding.inputs["subjects"][0]["name"] == "aps-collector-user"
    assert plan.by_name("test-monitoring-workspace").inputs["kmsKeyArn"] == KEY
    assert not [r for r in plan.of_type("aws:kms/key:Key") if "monitoring" in r.name], "a given key: none created"
    grafana = plan.by_name("test-monitoring-grafana", "aws:grafana/workspace:Workspace").inputs
    assert grafana["permissionType"] == "SERVICE_MANAGED" and grafana["authenticationProviders"] == ["AWS_SSO"]
    assert grafana["networkAccessControl"]["prefixListIds"] == [] and len(grafana["networkAccessControl"]["vpceIds"]) == 1
    assert set(grafana["dataSources"]) == {"PROMETHEUS", "CLOUDWATCH"}


COLLECTOR_CONFIG = "/etc/gpucluster/collector/prometheus.yml"
COLLECTOR_UNIT = "/etc/systemd/system/gpucluster-collector.service"
SIGNER_UNIT = "/etc/systemd/system/gpucluster-collector-signer.service"
GUARD = "/usr/local/sbin/gpucluster-imds-guard"
SETUP = "/usr/local/sbin/gpucluster-slurm-head"


def head_files(plan) -> dict[str, str]:
    """The head node's files by path on the node (the plan names them under the head node's resource: its user data's
    part, ``test-slurm-head/``, or its files bundle's, ``test-slurm-head-files/``)."""
    files = {}
    for key, text in plan.files.items():
        owner, _, path = key.partition("/")
        if owner in ("test-slurm-head", "test-slurm-head-files") and path != "user-data":
            assert "/" + path not in files, f"{path} twice"
            files["/" + path] = text
    return files


def test_slurm_head_node_collects_into_the_clusters_workspace(slurm_plan):
    """The workspace is built before Slurm, so the head node's user data names it: the collector's config writes to
    that workspace, its unit runs Prometheus in agent mode, the package's own server is masked, and the IMDS guard
    lets the collector's user through."""
    files = head_files(slurm_plan)
    workspace = slurm_plan.by_name("test-monitoring-workspace", "aws:amp/workspace:Workspace")
    assert workspace.id.startswith("ws-")
    config = yaml.safe_load(files[COLLECTOR_CONFIG])
    # through the signer on 127.0.0.1, which signs and forwards that workspace's writes to AMP in the region
    assert config["remote_write"][0]["url"] == f"http://127.0.0.1:9091/workspaces/{workspace.id}/api/v1/remote_write"
    assert f"--region us-east-1 --workspace {workspace.id}" in files[SIGNER_UNIT]
    unit = files[COLLECTOR_UNIT]
    assert "--enable-feature=agent" in unit and "--config.file=/etc/gpucluster/collector/prometheus.yml" in unit
    setup = files[SETUP]
    assert "systemctl mask --now prometheus.service" in setup
    assert "systemctl enable --now gpucluster-collector-signer.service gpucluster-collector.service" in setup
    assert "--uid-owner prometheus" in files[GUARD]


def test_no_collector_and_no_prometheus_user_through_the_guard_when_monitoring_is_off(off_plan):
    files = head_files(off_plan)
    assert not {COLLECTOR_CONFIG, COLLECTOR_UNIT, SIGNER_UNIT} & set(files)
    # no package prometheus (the node exporter's package stays), no unit of it, no pass through the guard
    assert re.search(r"(?<![\w-])prometheus(?![\w-])", files[SETUP]) is None, files[SETUP]
    assert "--uid-owner prometheus" not in files[GUARD]
    assert "--uid-owner slurm" in files[GUARD]  # the guard itself is still there


def test_eks_nodes_ship_into_the_cluster_group_through_a_pod_identity_role(update_golden):
    """EKS alone still gets the cluster's log group (kept, encrypted like the Slurm nodes'), and Fluent Bit's release
    in the namespace and with the service account that the Pod Identity association binds and that the role's trust
    names; the role's one policy writes only the EKS streams of that group; the Pod Identity agent add-on is there.
    A Slurm-only cluster gets none of it."""
    plan = _ok(make_config(group(maxSize=2), network=TWO_ZONES, kubernetes={}, monitoring={}))
    group_inputs = plan.by_name("test-monitoring-logs", "aws:cloudwatch/logGroup:LogGroup").inputs
    assert group_inputs["name"] == "/gpucluster/test" and group_inputs["retentionInDays"] == 180 and group_inputs["kmsKeyId"]
    (association,) = plan.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "fluent-bit"]
    assert release.inputs["chart"] == "aws-for-fluent-bit" and release.inputs["version"] == "0.2.0"
    assert release.inputs["repositoryOpts"]["repo"] == "https://aws.github.io/eks-charts"
    values = yaml.safe_load(plan.files["test-monitoring-fluent-bit/values.yaml"])
    namespace, account = association.inputs["namespace"], association.inputs["serviceAccount"]
    assert (
        (release.inputs["namespace"], values["serviceAccount"]["name"])
        == (namespace, account)
        == ("gpucluster-logs", "fluent-bit")
    )
    role = plan.by_name("test-monitoring-fluent-bit", "aws:iam/role:Role").inputs
    trust = json.loads(role["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == namespace
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == account
    policies = [p for p in plan.of_type("aws:iam/rolePolicy:RolePolicy") if p.name.startswith("test-monitoring-fluent-bit")]
    (policy,) = [json.loads(p.inputs["policy"]) for p in policies]
    write = next(s for s in policy["Statement"] if s["Action"] == "logs:PutLogEvents")
    assert [r.rsplit(":log-stream:", 1)[1] for r in write["Resource"]] == ["*/kubelet", "*/containerd", "*/containers"]
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not {"logs:CreateLogGroup", "logs:PutRetentionPolicy", "logs:DeleteLogGroup"} & actions
    assert "eks-pod-identity-agent" in {a.inputs["addonName"] for a in plan.of_type("aws:eks/addon:Addon")}
    check_golden(
        GOLDEN / "kubernetes" / "fluent-bit.values.yaml", plan.files["test-monitoring-fluent-bit/values.yaml"], update_golden
    )
    slurm_only = _ok(slurm())
    assert not slurm_only.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert not [r for r in slurm_only.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "fluent-bit"]
