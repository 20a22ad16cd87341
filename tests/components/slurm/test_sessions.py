"""Session documents, policies and attachments of a Slurm cluster's people, under mocks (docs/people.md)."""

from __future__ import annotations

import json

import pulumi
import pytest

from gpucluster.components._shared.build import part
from gpucluster.components.slurm._sessions import (
    SHARED,
    SHARED_RUN_AS,
    SHELL_PROFILE,
    SessionWiring,
    session_access,
    session_document_content,
)
from gpucluster.resolve.slurm.identity import (
    DeclaredIdentity,
    DirectoryIdentity,
    PosixGroup,
    PosixUser,
    ResolvedIdentity,
    SessionGrant,
)

DOCUMENT = "aws:ssm/document:Document"
POLICY = "aws:iam/policy:Policy"
ROLE_ATTACH = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
USER_ATTACH = "aws:iam/userPolicyAttachment:UserPolicyAttachment"
ACCOUNT = "123456789012"


def _user(name: str, uid: int, *, admin: bool = False, session: SessionGrant | None = None) -> PosixUser:
    return PosixUser(
        name=name,
        uid=uid,
        gid=uid,
        groups=("hpc-admins",) if admin else (),
        shell="/bin/bash",
        home=f"/home/{name}",
        ssh_public_keys=(),
        admin=admin,
        home_quota_gib=50,
        session=session,
    )


def _grant(kind: str, name: str, attach: bool = True) -> SessionGrant:
    return SessionGrant(
        principal_arn=f"arn:aws:iam::{ACCOUNT}:{kind}/{name}",
        principal_kind=kind,  # type: ignore[arg-type]
        principal_name=name,
        attach=attach,
    )


DECLARED = ResolvedIdentity(
    source=DeclaredIdentity(
        users=(
            _user("alice", 10001, admin=True, session=_grant("role", "alice")),
            _user("bob", 10002, session=_grant("user", "bob")),
            _user("carol", 10003, session=_grant("role", "carol-sso", attach=False)),
            _user("dave", 10004),
        ),
        # with each user's private group, as resolution makes them (users.json holds every primary group)
        groups=(
            PosixGroup("hpc-admins", 5000, ("alice",)),
            *(PosixGroup(n, gid, ()) for n, gid in (("alice", 10001), ("bob", 10002), ("carol", 10003), ("dave", 10004))),
        ),
    ),
    admin_group="hpc-admins",
)
DIRECTORY = ResolvedIdentity(
    source=DirectoryIdentity(
        domain="directory",
        uris=("ldaps://ad.corp.example.com",),
        search_base="dc=corp,dc=example,dc=com",
        user_search_base="dc=corp,dc=example,dc=com",
        group_search_base="dc=corp,dc=example,dc=com",
        schema="ad",
        bind_dn="cn=ro,dc=corp,dc=example,dc=com",
        bind_password_secret_arn=f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:bind-AbCdEf",
        ca_certificate_pem="-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
        tls_reqcert="demand",
        start_tls=False,
        access_filter="(memberOf=cn=hpc-users,dc=corp,dc=example,dc=com)",
        id_mapping=True,
        idmap_range=(200000, 2000200000, 200000),
        ssh_public_key_attribute=None,
        id_range=(200000, 2000199999),
    ),
    admin_group=None,
)


def _run(run_components, identity: ResolvedIdentity):
    out = {}

    def program() -> None:
        parent = part("gpucluster:index:SlurmCluster", "p5-slurm")
        wiring = SessionWiring(
            cluster="p5",
            region="us-east-1",
            partition="aws",
            account=ACCOUNT,
            tags={"gpucluster:cluster": "p5"},
            opts=pulumi.ResourceOptions(parent=parent),
        )
        out["parts"] = session_access("p5-slurm", identity, wiring)

    plan = run_components(program)
    return plan, out["parts"]


def _content(plan, name: str) -> dict:
    return json.loads(plan.by_name(name, DOCUMENT).inputs["content"])


def test_documents_run_as_the_user_never_elevated(run_components) -> None:
    plan, parts = _run(run_components, DECLARED)
    docs = {r.inputs["name"]: r for r in plan.of_type(DOCUMENT)}
    assert set(docs) == {"p5-session", "p5-session-alice", "p5-session-bob", "p5-session-carol"}  # dave: no principal
    for doc in docs.values():
        assert doc.inputs["documentType"] == "Session"
        assert doc.inputs["documentFormat"] == "JSON"
        assert doc.inputs["tags"]["gpucluster:cluster"] == "p5"
        assert isinstance(doc.inputs["content"], str)  # plain text in the plan: the policy rule reads it
    for user in ("alice", "bob", "carol"):
        content = _content(plan, f"p5-slurm-session-{user}")
        assert content["sessionType"] == "Standard_Stream"
        assert content["inputs"]["runAsEnabled"] is True
        assert content["inputs"]["runAsDefaultUser"] == user
        assert "runAsElevated" not in json.dumps(content)
    assert _content(plan, "p5-slurm-session")["inputs"]["runAsDefaultUser"] == SHARED_RUN_AS
    assert parts.documents == {
        SHARED: "p5-session",
        "alice": "p5-session-alice",
        "bob": "p5-session-bob",
        "carol": "p5-session-carol",
    }


def test_document_content_exact() -> None:
    assert session_document_content(cluster="p5", run_as="bob") == {
        "schemaVersion": "1.0",
        "description": "Shell on Slurm cluster p5 as yourself (Run As); never as ssm-user or root",
        "sessionType": "Standard_Stream",
        "inputs": {
            "runAsEnabled": True,
            "runAsDefaultUser": "bob",
            "s3EncryptionEnabled": True,
            "cloudWatchEncryptionEnabled": True,
            "idleSessionTimeout": "20",
            "shellProfile": {"linux": SHELL_PROFILE, "windows": ""},
        },
    }
    assert "sudo" not in SHELL_PROFILE and "su " not in SHELL_PROFILE


def _policy(plan, name: str) -> dict:
    text = plan.by_name(name, POLICY).inputs["policy"]
    assert isinstance(text, str)
    return json.loads(text)


def test_policies_name_their_document_and_check_it_on_every_start(run_components) -> None:
    plan, parts = _run(run_components, DECLARED)
    names = {r.inputs["name"] for r in plan.of_type(POLICY)}
    assert names == {"p5-login-sessions", "p5-admin-sessions", "p5-session-alice", "p5-session-bob", "p5-session-carol"}
    expect = {
        "p5-slurm-session-alice": ("p5-session-alice", ["head", "login", "compute"]),
        "p5-slurm-session-bob": ("p5-session-bob", "login"),
        "p5-slurm-login-sessions": ("p5-session", "login"),
        "p5-slurm-admin-sessions": ("p5-session", ["head", "login", "compute"]),
    }
    for resource, (document, roles) in expect.items():
        statements = _policy(plan, resource)["Statement"]
        starts = [s for s in statements if s["Action"] == "ssm:StartSession" and s["Effect"] == "Allow"]
        assert len(starts) == 2
        for s in starts:
            assert s["Condition"]["BoolIfExists"] == {"ssm:SessionDocumentAccessCheck": "true"}
        assert starts[0]["Condition"]["StringEquals"] == {
            "ssm:resourceTag/gpucluster:cluster": "p5",
            "ssm:resourceTag/gpucluster:role": roles,
        }
        assert starts[1]["Resource"] == [f"arn:aws:ssm:us-east-1:{ACCOUNT}:document/{document}"]
    assert set(parts.policy_arns) == {"login", "admin", "alice", "bob", "carol"}


def test_m4_each_users_policy_pins_the_run_as_tag_to_that_user(run_components) -> None:
    """The principal's SSMSessionRunAs tag wins over the user's own document: each user's policy allows only while the
    tag is absent or theirs and denies every StartSession otherwise; the exported shared-document policies leave the
    tag to the trust policy (the tag is the choice there)."""
    plan, _ = _run(run_components, DECLARED)
    key = "aws:PrincipalTag/SSMSessionRunAs"
    for user in ("alice", "bob"):
        statements = _policy(plan, f"p5-slurm-session-{user}")["Statement"]
        allows = [s for s in statements if s["Action"] == "ssm:StartSession" and s["Effect"] == "Allow"]
        assert [s["Condition"]["StringEqualsIfExists"] for s in allows] == [{key: user}] * 2
        [deny] = [s for s in statements if s["Effect"] == "Deny"]
        assert deny["Action"] == "ssm:StartSession" and deny["Resource"] == "*"
        assert deny["Condition"] == {"StringNotEquals": {key: user}, "Null": {key: "false"}}
    for shared in ("p5-slurm-login-sessions", "p5-slurm-admin-sessions"):
        assert key not in json.dumps(_policy(plan, shared))


def test_attachments_only_where_attach(run_components) -> None:
    plan, _ = _run(run_components, DECLARED)
    roles = {(r.inputs["role"], r.name) for r in plan.of_type(ROLE_ATTACH)}
    users = {(r.inputs["user"], r.name) for r in plan.of_type(USER_ATTACH)}
    assert roles == {("alice", "p5-slurm-session-alice-attach")}  # carol: attach false (exported only)
    assert users == {("bob", "p5-slurm-session-bob-attach")}
    alice_policy = plan.by_name("p5-slurm-session-alice", POLICY).state["arn"]
    assert plan.by_name("p5-slurm-session-alice-attach").inputs["policyArn"] == alice_policy


def test_directory_identity_shared_document_and_login_policy_only(run_components) -> None:
    plan, parts = _run(run_components, DIRECTORY)
    assert [r.inputs["name"] for r in plan.of_type(DOCUMENT)] == ["p5-session"]
    assert [r.inputs["name"] for r in plan.of_type(POLICY)] == ["p5-login-sessions"]  # no admin group: no admin policy
    assert not plan.of_type(ROLE_ATTACH) and not plan.of_type(USER_ATTACH)
    assert parts.commands == {
        SHARED: "aws ssm start-session --document-name p5-session --target $(aws ec2 describe-instances --filters "
        "Name=tag:gpucluster:cluster,Values=p5 Name=tag:gpucluster:role,Values=login "
        "Name=instance-state-name,Values=running --query 'Reservations[0].Instances[0].InstanceId' --output text)"
    }


@pytest.mark.parametrize("identity", [DECLARED, DIRECTORY])
def test_every_child_tagged(run_components, identity) -> None:
    plan, _ = _run(run_components, identity)
    for r in [*plan.of_type(DOCUMENT), *plan.of_type(POLICY)]:
        assert r.inputs["tags"]["gpucluster:cluster"] == "p5", r.name


# --- the first-session key pair for SSH inside the cluster (docs/people.md) -----------------------------------------


def _as_nobody(command: str, home, uid: int | None = None) -> None:
    import grp
    import os
    import pwd
    import subprocess

    if os.geteuid() != 0:
        pytest.fail("the key pair test runs the step as nobody: run it as root")
    user = pwd.getpwnam("nobody")
    try:
        gid = grp.getgrnam("nogroup").gr_gid
    except KeyError:
        gid = user.pw_gid
    uid = user.pw_uid if uid is None else uid
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid if uid else 0}", "--clear-groups", "sh", "-c", command]
    done = subprocess.run(argv, env={"PATH": "/usr/bin:/bin", "HOME": str(home)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_first_session_makes_one_key_pair_authorised_only_from_the_vpc():
    """docs/people.md promises a key pair at the first login for SSH to a job's node (before: nothing made one). The
    Session documents' shell profile makes it as the person: 0600 in a 0700 ~/.ssh, the public half authorised with
    from="<VPC CIDR>" (ssh-keygen reads the line back), once; never for a uid below 1000."""
    import os
    import pwd
    import shutil
    import stat
    import subprocess
    import tempfile
    from pathlib import Path

    from gpucluster.components.slurm._sessions import cluster_key_step, shell_profile

    step = cluster_key_step("c1", "10.0.0.0/16")
    assert shell_profile("c1", "10.0.0.0/16") == SHELL_PROFILE.replace("exec bash -l", step + "exec bash -l")
    assert shell_profile("c1", None) == SHELL_PROFILE
    with pytest.raises(ValueError):
        cluster_key_step("c1", "10.0.0.0/16 ; id")
    base = Path(tempfile.mkdtemp(prefix="gpucluster-key-"))  # pytest's own temp root is root's alone (0700)
    try:
        os.chmod(base, 0o755)
        home = base / "home"
        home.mkdir(mode=0o700)
        os.chown(home, pwd.getpwnam("nobody").pw_uid, -1)
        _as_nobody(step, home)
        ssh = home / ".ssh"
        assert stat.S_IMODE(ssh.stat().st_mode) == 0o700
        assert stat.S_IMODE((ssh / "id_ed25519").stat().st_mode) == 0o600
        public = (ssh / "id_ed25519.pub").read_text().strip()
        assert public.startswith("ssh-ed25519 ") and public.endswith("@c1")
        authorized = (ssh / "authorized_keys").read_text()
        assert authorized == f'from="10.0.0.0/16" {public}\n'
        listed = subprocess.run(["ssh-keygen", "-l", "-f", str(ssh / "authorized_keys")], capture_output=True, text=True)
        assert listed.returncode == 0 and "(ED25519)" in listed.stdout, listed.stderr
        _as_nobody(step, home)  # the second session keeps the pair and adds nothing
        assert (ssh / "authorized_keys").read_text() == authorized
        assert (ssh / "id_ed25519.pub").read_text().strip() == public
        root_home = base / "root-home"
        root_home.mkdir()
        _as_nobody(step, root_home, uid=0)
        assert not (root_home / ".ssh").exists()
    finally:
        shutil.rmtree(base)
