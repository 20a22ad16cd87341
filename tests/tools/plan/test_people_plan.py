"""The people's promises (docs/people.md), on the shipped stacks' plans (the golden plans, which tests/tools/plan/test_plan.py keeps
equal to ``gpucluster plan --stack …``, and the text plans beside them):

- ``slurm-p5``: an Auto Scaling group named ``…-login``; the declared users; ``pam_slurm_adopt`` in the compute
  nodes' decoded user data; no ``ssm-user`` sudo grant and the lockdown in every node's user data (head, login,
  compute); the Run As documents and the policies that name them; no load balancer (no SSH);
- ``slurm-directory``: the rendered ``sssd.conf`` passes the real ``sssctl config-check`` and holds no
  ``ldap_default_authtok`` (nor does anything in the plan); the load balancer admits TCP 22 from its CIDR only;
- the ``no-root-sessions`` rule passes both plans and fails a copy whose login template lost its lockdown.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.policy.evaluate import from_plan
from gpucluster.policy.session_rules import no_root_sessions
from gpucluster.policy.userdata import decode
from tests.conftest import IN_CI, ROOT

GOLDEN = ROOT / "tests" / "golden" / "plans"
ASG, LT, NLB = "aws:autoscaling/group:Group", "aws:ec2/launchTemplate:LaunchTemplate", "aws:lb/loadBalancer:LoadBalancer"
DOCUMENT = "aws:ssm/document:Document"


def plan(stack: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{stack}.json").read_text())


def of_type(doc: dict[str, Any], token: str) -> list[dict[str, Any]]:
    return [r for r in doc["resources"] if r["type"] == token]


def role_of(r: dict[str, Any]) -> str | None:
    i = r["inputs"]
    for tags in [i.get("tags"), *[s.get("tags") for s in i.get("tagSpecifications") or []]]:
        if isinstance(tags, dict) and "gpucluster:role" in tags:
            return str(tags["gpucluster:role"])
    return None


def user_data_texts(r: dict[str, Any]) -> list[tuple[str, str]]:
    i = r["inputs"]
    if r["type"] == LT:
        return decode(i["userData"], base64_encoded=True)
    return decode(i.get("userData") or i.get("userDataBase64"), base64_encoded="userData" not in i)


def nodes(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Launch templates and instances by their gpucluster:role (head/slurm-head, login, compute)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in doc["resources"]:
        if r["type"] in (LT, "aws:ec2/instance:Instance") and role_of(r):
            out.setdefault(str(role_of(r)).replace("slurm-head", "head"), []).append(r)
    return out


# --- slurm-p5 ----------------------------------------------------------------------------------------------------------


def test_slurm_p5_has_a_login_group_and_shows_it_with_the_users():
    doc = plan("slurm-p5")
    [group] = [g for g in of_type(doc, ASG) if "login" in g["inputs"].get("name", "")]
    assert group["inputs"]["name"] == "slurm-p5-login" and group["inputs"]["desiredCapacity"] == 2
    text = (GOLDEN / "slurm-p5.txt").read_text()
    assert re.search(r"login\s+slurm-p5-login: 2 × m7i\.2xlarge · Session Manager only · no-root-sessions: pass", text)
    assert re.search(r"users\s+alice \(10001, admin\), bob \(10002\), carol \(10003\) · /home on FSx for OpenZFS", text)
    people = doc["people"]
    assert [(u["name"], u["uid"], u["admin"]) for u in people["users"]] == [
        ("alice", 10001, True),
        ("bob", 10002, False),
        ("carol", 10003, False),
    ]
    assert people["login"]["ssh"] is None and people["noRootSessions"] == []


def test_slurm_p5_compute_nodes_run_pam_slurm_adopt():
    compute = nodes(plan("slurm-p5"))["compute"]
    assert compute, "no launch template tagged gpucluster:role=compute"
    for template in compute:
        texts = "\n".join(text for _, text in user_data_texts(template))
        assert re.search(r"^-?account\s+required\s+pam_slurm_adopt\.so .*action_adopt_failure=deny", texts, re.M), template[
            "name"
        ]


@pytest.mark.parametrize("stack", ["slurm-p5", "slurm-directory"])
def test_every_node_locks_ssm_user_out_of_sudo(stack: str):
    doc = plan(stack)
    by_role = nodes(doc)
    assert {"head", "login", "compute"} <= set(by_role), sorted(by_role)
    for role, resources in by_role.items():
        for r in resources:
            texts = user_data_texts(r)
            bootcmd = [t for where, t in texts if ", bootcmd[" in where]
            assert any("#User rules for ssm-user" in t and "ssm-agent-users" in t for t in bootcmd), (role, r["name"])
            # ssm-user appears only in a deny (`ssm-user ALL=(ALL:ALL) !ALL`, render's last-read file), never a grant
            grants = [m for _, t in texts for m in re.findall(r"ssm-user\s+ALL\s*=\s*\([^)]*\)\s*(\S+)", t)]
            assert grants and set(grants) == {"!ALL"}, (role, r["name"], grants)
    assert no_root_sessions(from_plan(doc)) == []


def test_slurm_p5_has_run_as_documents_and_the_policies_that_name_them():
    doc = plan("slurm-p5")
    documents = {d["inputs"]["name"]: json.loads(d["inputs"]["content"]) for d in of_type(doc, DOCUMENT)}
    assert {"slurm-p5-session", "slurm-p5-session-alice", "slurm-p5-session-bob"} <= set(documents)
    for user in ("alice", "bob"):
        inputs = documents[f"slurm-p5-session-{user}"]["inputs"]
        assert inputs["runAsEnabled"] is True and inputs["runAsDefaultUser"] == user
    grants = {}
    for p in of_type(doc, "aws:iam/policy:Policy"):
        for st in json.loads(p["inputs"]["policy"])["Statement"]:
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            if "ssm:StartSession" in actions and st["Effect"] == "Allow" and ":document/" in json.dumps(st["Resource"]):
                grants[p["inputs"].get("name", p["name"])] = st  # the Allow naming the documents (not the Run As deny)
    for user in ("alice", "bob"):
        [st] = [st for name, st in grants.items() if name.endswith(f"session-{user}")]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        assert any(r.endswith(f":document/slurm-p5-session-{user}") for r in resources)
        assert st["Condition"]["BoolIfExists"]["ssm:SessionDocumentAccessCheck"] == "true"


def test_slurm_p5_has_no_load_balancer():
    assert of_type(plan("slurm-p5"), NLB) == []


# --- slurm-directory -------------------------------------------------------------------------------------------------


def test_slurm_directory_admits_ssh_from_its_cidr_only():
    doc = plan("slurm-directory")
    [nlb] = of_type(doc, NLB)
    assert nlb["inputs"]["internal"] is True and nlb["inputs"]["loadBalancerType"] == "network"
    assert doc["people"]["login"]["ssh"]["allowedCidrs"] == ["10.20.0.0/16"]
    cidr_rules = [
        r["inputs"]
        for r in of_type(doc, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r["inputs"].get("cidrIpv4") or r["inputs"].get("cidrIpv6")
    ]
    port_22 = [i for i in cidr_rules if i.get("fromPort") == 22]
    assert [(i["cidrIpv4"], i["toPort"]) for i in port_22] == [("10.20.0.0/16", 22)]


def test_slurm_directory_sssd_conf_passes_sssctl_and_holds_no_password(tmp_path: Path):
    doc = plan("slurm-directory")
    confs = {path: text for path, text in doc["files"].items() if path.endswith("/etc/gpucluster/sssd.conf.in")}
    assert confs, "no rendered sssd.conf template in the plan"
    assert len(set(confs.values())) == 1  # head, login and compute nodes read the same directory
    text = next(iter(confs.values()))
    assert "ldap_uri = ldaps://ad.corp.example.com" in text and "ldap_id_mapping = true" in text
    assert "ldap_default_authtok" not in json.dumps(doc)  # not in any resource, output or file of the plan
    sssctl = shutil.which("sssctl")
    if sssctl is None:
        if IN_CI:
            pytest.fail("sssctl (sssd-tools) is missing: .ci/run installs it")
        pytest.skip("needs sssctl (apt-get install sssd-tools sssd-ldap)")
    conf = tmp_path / "sssd.conf"
    conf.write_text(text)
    conf.chmod(0o600)
    (tmp_path / "conf.d").mkdir()
    checked = subprocess.run([sssctl, "config-check", "-c", str(conf)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # and it would refuse a wrong option: the check reads the file
    conf.write_text(text + "ldap_no_such_option = 1\n")
    refused = subprocess.run([sssctl, "config-check", "-c", str(conf)], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0


def test_the_bind_secret_is_named_never_valued():
    doc = plan("slurm-directory")
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/ad-bind-AbCdEf"
    text = json.dumps(doc)
    assert arn in text  # the nodes' roles may read it, by name
    assert not re.search(r"ldap_default_authtok|obfuscated_password", text)


# --- the rule bites ---------------------------------------------------------------------------------------------------


def _without_lockdown(user_data: str) -> str:
    raw = base64.b64decode(user_data)
    zipped = raw[:2] == b"\x1f\x8b"
    text = (gzip.decompress(raw) if zipped else raw).decode()
    head, body = text.split("\n", 1) if text.startswith("#cloud-config") else ("", text)
    config = yaml.safe_load(body)
    before = len(config.get("bootcmd") or [])
    config["bootcmd"] = [c for c in config.get("bootcmd") or [] if "ssm-agent-users" not in json.dumps(c)]
    assert len(config["bootcmd"]) == before - 1
    out = ((head + "\n") if head else "") + yaml.safe_dump(config, sort_keys=False)
    data = gzip.compress(out.encode()) if zipped else out.encode()
    return base64.b64encode(data).decode()


def test_the_rule_fails_a_plan_whose_login_template_lost_the_lockdown():
    doc = copy.deepcopy(plan("slurm-p5"))
    [template] = [r for r in doc["resources"] if r["type"] == LT and role_of(r) == "login"]
    template["inputs"]["userData"] = _without_lockdown(template["inputs"]["userData"])
    found = no_root_sessions(from_plan(doc))
    assert [(v.name, v.property) for v in found] == [(template["name"], "userData")]
    assert "lacks the bootcmd" in found[0].message
    assert no_root_sessions(from_plan(plan("slurm-p5"))) == []  # the golden itself is unchanged and passes


def test_slurm_p5_connect_names_documents_the_session_policies_allow_on_the_head_node():
    """The ``slurm.connect`` output opened the head node with Session Manager's default document, which every session
    policy refuses (SessionDocumentAccessCheck): now one command per document that reaches the head node, the shared
    one (principals tagged SSMSessionRunAs, the exported admin policy) and each declared admin's own (alice)."""
    doc = plan("slurm-p5")
    connect = doc["outputs"]["slurm"]["connect"]
    assert set(connect) == {"*", "alice"}  # bob and carol administer nothing
    documents = {"*": "slurm-p5-session", "alice": "slurm-p5-session-alice"}
    for key, command in connect.items():
        assert command.startswith(f"aws ssm start-session --document-name {documents[key]} --target i-")
        assert command.endswith(" --region us-east-1")
    policies = {p["inputs"]["name"]: json.loads(p["inputs"]["policy"]) for p in of_type(doc, "aws:iam/policy:Policy")}
    for name, document in (("slurm-p5-admin-sessions", "slurm-p5-session"), ("slurm-p5-session-alice", "slurm-p5-session-alice")):
        statements = policies[name]["Statement"]
        nodes = [s for s in statements if s.get("Sid") == "StartSessionsOnTheClustersNodes"]
        assert nodes and "head" in nodes[0]["Condition"]["StringEquals"]["ssm:resourceTag/gpucluster:role"]
        assert any(
            str(r).endswith(f":document/{document}")
            for s in statements
            for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
        )
