"""Resources for the ``no-root-sessions`` rule (gpucluster/policy/session_rules.py): Session documents, session
policies and node user data, each as gpucluster makes it (passing) or as one mistake would make it (failing)."""

from __future__ import annotations

import gzip
import json
from typing import Any

from tests.tools.policy.fixtures import ACCOUNT, b64, lt, res

DOCUMENT = "aws:ssm/document:Document"
# As gpucluster.render.slurm.identity.session_lockdown_bootcmd writes it: the directory and the name apart.
LOCKDOWN = [
    "sh",
    "-c",
    'set -e\nd="$r/etc/sudoers.d"\nput() { printf \'%s\' "$2" >"$d/.$1.new"; mv -f "$d/.$1.new" "$d/$1"; }\n'
    "put ssm-agent-users '#User rules for ssm-user\n'\n",
    "gpucluster-session-lockdown",
]
ADMINS = {
    "path": "/etc/sudoers.d/60-gpucluster-admins",
    "permissions": "0440",
    "content": "%hpc-admins ALL=(ALL:ALL) NOPASSWD: ALL\n",
}
SLURM_CONF = {"path": "/etc/slurm/slurm.conf", "content": "PartitionName=p5 Nodes=ALL Default=YES MaxTime=INFINITE\n"}
PROFILE = (
    '[ -d "$HOME" ] || dbus-send --system --print-reply --dest=com.redhat.oddjob_mkhomedir / '
    'com.redhat.oddjob_mkhomedir.mkmyhomedir >/dev/null 2>&1; cd "$HOME"; exec bash -l'
)


def session_content(**inputs: Any) -> dict[str, Any]:
    base = {
        "runAsEnabled": True,
        "runAsDefaultUser": "alice",
        "s3EncryptionEnabled": True,
        "cloudWatchEncryptionEnabled": True,
        "idleSessionTimeout": "20",
        "shellProfile": {"linux": PROFILE, "windows": ""},
    }
    return {"schemaVersion": "1.0", "description": "x", "sessionType": "Standard_Stream", "inputs": {**base, **inputs}}


def document(name: str, content: Any, *, kind: str = "Session", fmt: str = "JSON", doc_name: Any = None) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return res(DOCUMENT, name, {"name": doc_name or name, "documentType": kind, "documentFormat": fmt, "content": text})


def doc_arn(name: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:ssm:us-east-1:{account}:document/{name}"


INSTANCES = f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/*"
CHECKED = {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}
AS_ALICE = {"StringEqualsIfExists": {"aws:PrincipalTag/SSMSessionRunAs": "alice"}}
"""A statement naming alice's document holds only while the principal's Run As tag is absent or alice's."""
PASSING = {**CHECKED, **AS_ALICE}


def start(*resources: str, condition: dict[str, Any] | None = PASSING, action: Any = "ssm:StartSession") -> dict[str, Any]:
    st: dict[str, Any] = {"Effect": "Allow", "Action": action, "Resource": list(resources)}
    if condition is not None:
        st["Condition"] = condition
    return st


def policy(name: str, *statements: dict[str, Any]) -> dict[str, Any]:
    return res("aws:iam/policy:Policy", name, {"policy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})})


def user_data(
    files: list[dict[str, Any]], bootcmd: list[Any] | None = None, runcmd: list[Any] | None = None, **extra: Any
) -> str:
    """A cloud-config, gzipped and base64-encoded as a launch template's ``userData`` (the files gz+b64 as well)."""
    import yaml

    encoded = [{**f, "encoding": "gz+b64", "content": b64(gzip.compress(f["content"].encode()))} for f in files]
    doc = {"bootcmd": bootcmd or [], "write_files": encoded, "runcmd": runcmd or [], **extra}
    return b64(gzip.compress(("#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False)).encode()))


def node_lt(name: str, role: Any, ud: Any, *, where: str = "tagSpecifications") -> dict[str, Any]:
    tags = {"gpucluster:cluster": "demo", "gpucluster:role": role} if role is not None else {"gpucluster:cluster": "demo"}
    if where == "tagSpecifications":
        return lt(name, userData=ud, tagSpecifications=[{"resourceType": "instance", "tags": tags}])
    return lt(name, userData=ud, tags=tags)


GOOD_USER_DATA = user_data([ADMINS, SLURM_CONF], bootcmd=[["/usr/local/sbin/imds-guard"], LOCKDOWN])


def fixture_plan() -> tuple[list[dict[str, Any]], set[tuple[str, str, str]]]:
    """The rule's failing fixture for tests/tools/policy/test_rules.py: one failure per clause beside passing twins."""
    resources = [
        document("demo-session-alice", session_content()),
        document("root-session", session_content(runAsDefaultUser="root")),
        policy("demo-session-alice", start(INSTANCES, doc_arn("demo-session-alice"))),
        policy("default-doc", start(INSTANCES, doc_arn("SSM-SessionManagerRunShell", ""))),
        node_lt("login", "login", GOOD_USER_DATA),
        node_lt("compute-open", "compute", user_data([ADMINS], bootcmd=[["/usr/local/sbin/imds-guard"]])),
    ]
    expected = {
        ("no-root-sessions", "root-session", "inputs.runAsDefaultUser"),
        ("no-root-sessions", "default-doc", "policy"),
        ("no-root-sessions", "compute-open", "userData"),
    }
    return resources, expected
