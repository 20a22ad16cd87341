"""The plan's people (gpucluster/tools/plan/show/people.py) from a plan document: the login group with or without
SSH, the declared users with the admin flag, a directory, the home and its quotas, the no-root-sessions verdict; and
nothing for a plan without people (the older stacks' plans keep their shape)."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.tools.plan.show.people import people, rows
from tests.tools.policy.fixtures import lt, plan, res
from tests.tools.policy.session_fixtures import GOOD_USER_DATA, document, session_content

USERS_FILE = json.dumps(
    {
        "schema": 1,
        "groups": [{"name": "hpc-admins", "gid": 5000}, {"name": "vision", "gid": 5001}]
        + [{"name": n, "gid": g} for n, g in (("alice", 10001), ("bob", 10002))],
        "users": [
            {"name": "alice", "uid": 10001, "gid": 10001, "groups": ["hpc-admins", "vision"], "shell": "/bin/bash",
             "home": "/home/alice", "ssh_public_keys": []},
            {"name": "bob", "uid": 10002, "gid": 10002, "groups": [], "shell": "/bin/bash", "home": "/home/bob",
             "ssh_public_keys": []},
        ],
    }
)  # fmt: skip
"""The users file as the plan carries it (``<cluster>-slurm-users/etc/gpucluster/users.json``)."""
SSSD = """[sssd]
services = nss, pam
domains = directory

[domain/directory]
ldap_uri = ldaps://ad.corp.example.com, ldaps://ad2.corp.example.com
ldap_access_filter = (memberOf=cn=hpc-users,ou=Groups,dc=corp,dc=example,dc=com)
ldap_id_mapping = true
"""


def login_resources(ssh: bool) -> list[dict[str, Any]]:
    tags = [{"resourceType": "instance", "tags": {"gpucluster:role": "login"}}]
    out = [
        lt("demo-login", userData=GOOD_USER_DATA, instanceType="m7i.2xlarge", tagSpecifications=tags),
        res("aws:autoscaling/group:Group", "demo-login", {"name": "demo-login", "desiredCapacity": 2, "minSize": 2}),
    ]
    if ssh:
        out += [
            res("aws:lb/loadBalancer:LoadBalancer", "demo-login-nlb", {"name": "demo-login", "internal": True}),
            res(
                "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                "ssh-in",
                {"fromPort": 22, "toPort": 22, "ipProtocol": "tcp", "cidrIpv4": "10.20.0.0/16"},
            ),
        ]
    return out


def doc(*resources: dict[str, Any], files: dict[str, str] | None = None) -> dict[str, Any]:
    return {**plan(*resources), "files": files or {}}


HOME = [
    res("aws:fsx/openZfsFileSystem:OpenZfsFileSystem", "home-fs", {"storageCapacity": 128, "deploymentType": "SINGLE_AZ_1", "throughputCapacity": 64}),
    res(
        "aws:fsx/openZfsVolume:OpenZfsVolume",
        "home",
        {"userAndGroupQuotas": [{"id": 10002, "storageCapacityQuotaGib": 50, "type": "USER"}, {"id": 10001, "storageCapacityQuotaGib": 200, "type": "USER"}]},
    ),
]  # fmt: skip
DECLARED_FILES = {
    "demo-slurm-users/etc/gpucluster/users.json": USERS_FILE,
    "demo-login/etc/sudoers.d/60-gpucluster-admins": "%hpc-admins ALL=(ALL:ALL) NOPASSWD: ALL\n",
}


def test_declared_users_login_without_ssh_and_home():
    found = people(doc(*login_resources(False), *HOME, document("demo-session-alice", session_content()), files=DECLARED_FILES))
    assert found is not None
    assert found["login"] == {"asgName": "demo-login", "count": 2, "instanceType": "m7i.2xlarge", "ssh": None}
    assert found["users"] == [
        {"name": "alice", "uid": 10001, "gid": 10001, "groups": ["hpc-admins", "vision"], "admin": True},
        {"name": "bob", "uid": 10002, "gid": 10002, "groups": [], "admin": False},
    ]
    assert found["directory"] is None and found["noRootSessions"] == []
    assert found["home"]["quotas"] == [{"uid": 10001, "gib": 200}, {"uid": 10002, "gib": 50}]
    text = dict(rows(found))
    assert list(text) == ["login", "users"]
    assert text["login"] == "demo-login: 2 × m7i.2xlarge · Session Manager only · no-root-sessions: pass"
    assert text["users"] == (
        "alice (10001, admin), bob (10002) · /home on FSx for OpenZFS SINGLE_AZ_1 128 GiB, 64 MB/s, quotas 50 GiB, 200 GiB"
    )


def test_a_directory_with_ssh_and_a_broken_rule():
    root_doc = document("demo-session", session_content(runAsDefaultUser="root"))
    found = people(doc(*login_resources(True), root_doc, files={"demo-login/etc/gpucluster/sssd.conf.in": SSSD}))
    assert found is not None and found["users"] == []
    assert found["login"]["ssh"] == {"loadBalancer": "demo-login", "scheme": "internal", "allowedCidrs": ["10.20.0.0/16"]}
    assert found["directory"] == {
        "domain": "directory",
        "uris": ["ldaps://ad.corp.example.com", "ldaps://ad2.corp.example.com"],
        "accessFilter": "(memberOf=cn=hpc-users,ou=Groups,dc=corp,dc=example,dc=com)",
        "idMapping": True,
    }
    assert len(found["noRootSessions"]) == 1 and "runAsDefaultUser" in found["noRootSessions"][0]
    text = dict(rows(found))
    assert text["login"] == (
        "demo-login: 2 × m7i.2xlarge · SSH through internal NLB demo-login from 10.20.0.0/16 · "
        "no-root-sessions: 1 violations (see policy)"
    )
    assert text["directory"].startswith("ldaps://ad.corp.example.com, ldaps://ad2.corp.example.com · who may log in: (memberOf=")
    assert text["directory"].endswith("ids from AD SIDs · no shared /home")
    json.dumps(found)  # plain JSON, as the plan document holds it


def test_a_plan_without_people_has_none():
    assert people(doc(*HOME)) is None
    assert list(rows(None)) == []
