"""OnPremCredentials under mocks, and the site's rights in the hybrid-slurm stack: the role trusts only the
site's certificate through the anchor, its rights are the node agent's plus writing the munge key, and the
cloud nodes may only read that key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucluster.components._shared.agent_iam import LaunchScope, slurm_agent_policy
from gpucluster.components.hybrid.onprem_credentials import OnPremCredentials, OnPremCredentialsArgs
from gpucluster.render.iam import session_manager_policy
from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.run.stackfile import SECRET
from tests.plans import shipped_plan

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
PCA = "arn:aws:acm-pca:us-east-1:123456789012:certificate-authority/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/c/munge-key-abcdef"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
NODE_ROLE = "arn:aws:iam::123456789012:role/c-node"
NODE_PROFILE = "arn:aws:iam::123456789012:instance-profile/c-node"


def credentials(creds: dict) -> OnPremCredentials:
    return OnPremCredentials("site", credentials_args(creds))


def credentials_args(creds: dict) -> OnPremCredentialsArgs:
    args: OnPremCredentialsArgs = {
        "cluster_name": "c",
        "region": "us-east-1",
        "hybrid": {  # type: ignore[typeddict-item]
            "site": "lab",
            "on_prem_cidrs": ["10.20.0.0/16"],
            "controller": {"host": "ctl", "address": "10.20.0.10", "slurm_version": "23.11"},
            "connectivity": {"type": "existing-tgw", "transit_gateway_id": "tgw-0123456789abcdef0"},
            "credentials": creds,
        },
        "munge_secret_arn": SECRET_ARN,
        "munge_key_arn": KEY_ARN,
        "burst_node_groups": ["p5"],
        "launch_template_ids": ["lt-0123456789abcdef0"],
        "instance_types": ["p5.48xlarge"],
        "subnet_ids": [["subnet-0aaa1111"]],
        "security_group_ids": ["sg-0efa0000000000001"],
        "node_role_arn": NODE_ROLE,
        "node_instance_profile_arn": NODE_PROFILE,
        "tags": {"team": "ml"},
    }
    return args


def policies(plan: Plan, role_name: str) -> dict[str, dict[str, Any]]:
    role = plan.by_name(role_name)
    return {r.name: json.loads(r.inputs["policy"]) for r in plan.of_type(ROLE_POLICY) if r.inputs["role"] == role.id}


def actions(policy: dict[str, Any], effect: str = "Allow") -> set[str]:
    out: set[str] = set()
    for statement in policy["Statement"]:
        if statement["Effect"] == effect:
            acts = statement["Action"]
            out |= {acts} if isinstance(acts, str) else set(acts)
    return out


@pytest.mark.parametrize("source", [{"acm_pca_arn": PCA}, {"ca_certificate_pem": PEM}], ids=["acm-pca", "pem"])
def test_roles_anywhere_trusts_only_the_sites_certificate_through_the_anchor(run_components, source):
    plan = run_components(lambda: credentials({"type": "rolesanywhere", "certificate_cn": "slurmctl01", **source}))
    anchor = plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor")[0]
    if "acm_pca_arn" in source:
        assert anchor.inputs["source"] == {"sourceType": "AWS_ACM_PCA", "sourceData": {"acmPcaArn": PCA}}
    else:
        assert anchor.inputs["source"]["sourceType"] == "CERTIFICATE_BUNDLE"
        assert anchor.inputs["source"]["sourceData"]["x509CertificateData"] == PEM + "\n"
    role = plan.by_name("site-role")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert len(trust) == 1 and trust[0]["Principal"] == {"Service": "rolesanywhere.amazonaws.com"}
    assert trust[0]["Condition"] == {
        "ArnEquals": {"aws:SourceArn": anchor.state["arn"]},
        "StringEquals": {"aws:PrincipalTag/x509Subject/CN": "slurmctl01"},
    }
    profile = plan.of_type("aws:rolesanywhere/profile:Profile")[0].inputs
    assert profile["roleArns"] == [role.state["arn"]] and profile["durationSeconds"] == 3600 and profile["enabled"] is True


def test_the_role_has_the_agents_policy_and_may_write_only_the_munge_secret(run_components):
    plan = run_components(lambda: credentials({"type": "rolesanywhere", "acm_pca_arn": PCA}))
    docs = policies(plan, "site-role")
    assert set(docs) == {"site-agent", "site-munge"}
    # the agent's policy itself (the head node's function), not a copy of it
    assert docs["site-agent"] == slurm_agent_policy(
        LaunchScope(
            partition="aws",
            region="us-east-1",
            account="123456789012",
            cluster="c",
            groups=("p5",),
            instance_types=("p5.48xlarge",),
            launch_template_ids=("lt-0123456789abcdef0",),
            subnet_ids=("subnet-0aaa1111",),
            security_group_ids=("sg-0efa0000000000001",),
            node_role_arn=NODE_ROLE,
            node_profile_arn=NODE_PROFILE,
        )
    )
    munge = docs["site-munge"]["Statement"]
    secrets_statement = [s for s in munge if any(a.startswith("secretsmanager:") for a in s["Action"])]
    assert secrets_statement == [
        {
            "Sid": "WriteTheSitesMungeKey",
            "Effect": "Allow",
            "Action": ["secretsmanager:PutSecretValue", "secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            "Resource": SECRET_ARN,
        }
    ]
    kms = [s for s in munge if s not in secrets_statement]
    assert kms[0]["Resource"] == KEY_ARN
    assert kms[0]["Condition"] == {"StringEquals": {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}}
    # nothing is granted on "*" but the describe calls the agent's own policy has
    for doc in docs.values():
        for statement in doc["Statement"]:
            if statement["Resource"] == "*" and statement["Effect"] == "Allow":
                assert statement["Sid"] == "Describe", statement
    assert not any("*" in a for doc in docs.values() for a in actions(doc))


def test_ssm_activation_with_a_secret_code(run_components):
    plan = run_components(lambda: credentials({"type": "ssm"}))
    assert plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor") == []
    role = plan.by_name("site-role")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "ssm.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    activation = plan.of_type("aws:ssm/activation:Activation")[0].inputs
    assert activation["iamRole"] == role.state["name"] and activation["registrationLimit"] == 1
    # Session Manager's rights without reading the account's SSM parameters (no managed policy)
    assert plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") == []
    docs = policies(plan, "site-role")
    assert set(docs) == {"site-agent", "site-munge", "site-ssm"} and docs["site-ssm"] == session_manager_policy()


@pytest.fixture(scope="module")
def slurm_plan() -> Plan:
    plan = shipped_plan("hybrid-slurm")
    assert plan.error is None, plan.error
    return plan


def test_cloud_nodes_only_read_the_munge_key(slurm_plan):
    docs = policies(slurm_plan, "hybrid-slurm-slurm-node-role")
    doc = docs["hybrid-slurm-slurm-node-munge"]
    secret = slurm_plan.of_type("aws:secretsmanager/secret:Secret")[0]
    reads = [s for s in doc["Statement"] if s["Resource"] == secret.state["arn"]]
    assert [s["Action"] for s in reads] == ["secretsmanager:GetSecretValue"]
    assert "secretsmanager:PutSecretValue" not in actions(doc)
    key = slurm_plan.by_name("hybrid-slurm-slurm-munge-kms", "aws:kms/key:Key")
    decrypt = [s for s in doc["Statement"] if s["Resource"] == key.state["arn"]]
    assert [s["Action"] for s in decrypt] == [["kms:Decrypt"]]


def test_munge_secret_is_under_its_own_key_and_kept(slurm_plan):
    secret = slurm_plan.of_type("aws:secretsmanager/secret:Secret")[0]
    key = slurm_plan.by_name("hybrid-slurm-slurm-munge-kms", "aws:kms/key:Key")
    assert secret.inputs["kmsKeyId"] == key.state["arn"] and secret.inputs["recoveryWindowInDays"] == 30
    assert key.inputs["enableKeyRotation"] is True
    assert secret.protect and secret.retain_on_delete and key.protect and key.retain_on_delete
    site = slurm_plan.outputs["hybrid"]
    assert site["slurm"]["mungeKeySecretArn"] == secret.state["arn"]
    assert site["credentials"]["roleArn"] == slurm_plan.by_name("hybrid-slurm-onprem-agent-role").state["arn"]


def test_stack_activation_code_is_secret():
    from gpucluster.tools.plan.run.stackfile import read_stack_file
    from tests.conftest import plan_config

    config = dict(read_stack_file("hybrid-slurm")["config"])
    hybrid = dict(config["gpucluster:hybrid"])
    hybrid["credentials"] = {"type": "ssm"}
    config["gpucluster:hybrid"] = hybrid
    plan = plan_config(config)
    assert plan.error is None, plan.error
    code = plan.of_type("aws:ssm/activation:Activation")[0].state["activationCode"]
    assert plan.outputs["hybridActivationCode"] == SECRET
    assert code not in json.dumps(plan.outputs)
    assert plan.outputs["hybrid"]["credentials"]["type"] == "ssm"
