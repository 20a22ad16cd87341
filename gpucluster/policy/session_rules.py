"""``no-root-sessions`` (a stack rule; docs/people.md, "Who is root"): nobody becomes root by opening a Session Manager
session on a node of the cluster.

Three clauses, each over the resources of the stack:

1. Session documents (``aws:ssm/document:Document``, ``documentType: Session``). A ``Standard_Stream`` document runs
   sessions as a named user (``inputs.runAsEnabled: true``; without it the agent opens them as ``ssm-user``, which
   the agent itself may give sudo), its ``runAsDefaultUser``, if any, is not an account that is root or has sudo
   on the image (root, ubuntu, ssm-user, ec2-user, admin), and its shell profile starts no ``sudo``/``su``. An
   ``InteractiveCommands`` / ``NonInteractiveCommands`` document never sets ``runAsElevated: true`` (root).
2. IAM policy documents that allow ``ssm:StartSession``: the statement requires ``ssm:SessionDocumentAccessCheck``
   true (``Bool`` or ``BoolIfExists``; without it the default ``SSM-SessionManagerRunShell`` document is usable,
   and it runs sessions as ``ssm-user``), and every document it names is a Session document of this stack — no
   ``*``, no wildcard document, no ``SSM-SessionManagerRunShell`` (AWS Systems Manager user guide,
   "Enforce a session document permission check for the AWS CLI"). A policy that allows a stack document whose
   ``runAsDefaultUser`` is a person (not the shared document's locked ``gpucluster-nobody``) refuses it to a
   principal whose ``SSMSessionRunAs`` tag names somebody else: the tag wins over the document's default user, so
   without that refusal whoever can tag the principal (a session tag of ``sts:AssumeRole``) picks the user. Checked
   with the offline evaluator: the document's StartSession with another user's tag must not be allowed.
3. Launch templates and instances tagged ``gpucluster:role`` = head (or ``slurm-head``), login or compute: their decoded user data
   carries, in ``bootcmd``, the comment-only ``/etc/sudoers.d/ssm-agent-users`` write (``#User rules for
   ssm-user``: the agent adds no sudo grant where that file exists) and no sudoers grant other than
   the admin group's ``%<group>`` line in ``/etc/sudoers.d/60-gpucluster-admins``.

A value not known yet (a preview) is "cannot tell": no violation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml

from gpucluster.policy import types as t
from gpucluster.policy.iam_eval import Request, UnsupportedPolicy, evaluate, statement_matches
from gpucluster.policy.iam_rules import _documents, _statements  # the IAM rules' readers of policy documents
from gpucluster.policy.model import UNKNOWN, Resource, Violation, items, truthy, violation
from gpucluster.policy.userdata import decode

NO_ROOT_SESSIONS = "no-root-sessions"
DOCUMENT = "aws:ssm/document:Document"
TAG_ROLE = "gpucluster:role"  # = gpucluster_agents.contract.TAG_ROLE (the policy imports no node package)
NODE_ROLES = ("head", "slurm-head", "login", "compute")  # older head instances carry "slurm-head"
ROOT_USERS = ("root", "ubuntu", "ssm-user", "ec2-user", "admin")
LOCKDOWN_FILE = "/etc/sudoers.d/ssm-agent-users"
LOCKDOWN_TEXT = "#User rules for ssm-user"
ADMINS_FILE = "/etc/sudoers.d/60-gpucluster-admins"
ACCESS_CHECK = "ssm:sessiondocumentaccesscheck"
RUN_AS_KEY = "aws:PrincipalTag/SSMSessionRunAs"
SHARED_RUN_AS = "gpucluster-nobody"  # = components/slurm/_sessions.py's: the shared document, where the tag chooses

_ESCALATES = re.compile(r"(?<![\w.-])(sudo|su|doas|pkexec)(?![\w.-])")
# A sudoers user specification with its Runas list: `who host = (runas) [TAG:] command`, e.g. `ssm-user ALL=(ALL)
# NOPASSWD:ALL` (the Runas list keeps `PartitionName=p Nodes=ALL`-like lines of other files out); and cloud-init's
# `users: [{sudo: ALL=(ALL) NOPASSWD:ALL}]`.
_GRANT = re.compile(
    r"(?:^|(?<=[\s\"'>]))(?P<who>%?[A-Za-z_][\w.-]*|#\d+)[ \t]+[\w.,!-]+[ \t]*=[ \t]*\([^)\n]*\)[ \t]*(?:[A-Z_]+:[ \t]*)*(?:ALL\b|/\S+)"
)
_CLOUD_INIT_SUDO = re.compile(r"(?m)^\s*(?:-\s*)?sudo:\s*\[?\s*[\"']?[^\s\"'\]]*ALL\s*=")


def no_root_sessions(resources: Sequence[Resource]) -> list[Violation]:
    """The three clauses of the module over the stack's resources."""
    documents = [r for r in resources if r.type == DOCUMENT and r.get("documentType") == "Session"]
    out = [v for r in documents for v in _document_violations(r)]
    names = {r.get("name") for r in documents}
    names_known = UNKNOWN not in names and None not in names
    personal = _personal_documents(documents)
    for r in resources:
        out += _start_session_violations(r, {str(n) for n in names if isinstance(n, str)}, names_known)
        out += _impersonation_violations(r, personal)
        out += _node_violations(r)
    return out


# --- 1. session documents ------------------------------------------------------------------------------------------


def _content(r: Resource) -> Mapping[str, Any] | str | None:
    """The document's content, parsed; None when not known yet; an error text when it cannot be read."""
    text = r.get("content")
    if text is UNKNOWN:
        return None
    if isinstance(text, Mapping):
        return text  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(text, str):
        return "has no content"
    try:
        doc = json.loads(text) if str(r.get("documentFormat") or "JSON").upper() == "JSON" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        return f"cannot be read ({exc.__class__.__name__})"
    return doc if isinstance(doc, Mapping) else "is not an object"  # pyright: ignore[reportUnknownVariableType]


def _document_violations(r: Resource) -> list[Violation]:
    doc = _content(r)
    if doc is None:
        return []
    fix = (
        "open sessions as the person's own account: sessionType Standard_Stream, inputs.runAsEnabled true, "
        "runAsDefaultUser a declared user (never root, ubuntu, ssm-user, ec2-user or admin), no sudo/su in the shell "
        "profile, no runAsElevated (gpucluster's session documents do; administrators use sudo as themselves)"
    )
    if isinstance(doc, str):
        return [violation(NO_ROOT_SESSIONS, r, "content", f"{doc}: whether its sessions run as root cannot be told", fix)]
    found: list[tuple[str, str]] = []
    kind, inputs = doc.get("sessionType"), doc.get("inputs")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    if kind == "Standard_Stream":
        run_as = truthy(inputs.get("runAsEnabled"))
        if inputs.get("runAsEnabled") is not UNKNOWN and not run_as:
            found.append(("inputs.runAsEnabled", "is not true: sessions open as ssm-user, whom the agent may give sudo"))
        user = inputs.get("runAsDefaultUser")
        if isinstance(user, str) and user.strip() in ROOT_USERS:
            found.append(("inputs.runAsDefaultUser", f"is {user!r}: an account that is root or has sudo on the image"))
        profile = inputs.get("shellProfile")
        for system, text in profile.items() if isinstance(profile, Mapping) else []:  # pyright: ignore[reportUnknownVariableType]
            m = _ESCALATES.search(text) if isinstance(text, str) else None
            if m is not None:
                found.append((f"inputs.shellProfile.{system}", f"runs {m.group(1)!r}: every session would ask for root"))
    for path in _elevated(doc, "content"):
        found.append((path, "is true: the session runs its commands as root"))
    return [violation(NO_ROOT_SESSIONS, r, prop, what, fix) for prop, what in found]


def _elevated(value: Any, path: str) -> Iterator[str]:
    """Paths of every ``runAsElevated`` that is true, anywhere in the document (its ``properties`` per platform)."""
    if isinstance(value, Mapping):
        for key, sub in value.items():  # pyright: ignore[reportUnknownVariableType]
            where = f"{path}.{key}"
            if key == "runAsElevated" and sub is not UNKNOWN and truthy(sub):
                yield where
            else:
                yield from _elevated(sub, where)
    elif isinstance(value, list):
        for i, sub in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            yield from _elevated(sub, f"{path}[{i}]")


# --- 2. who may start a session, with which document ----------------------------------------------------------------

_START = Request("ssm:StartSession", "arn:aws:ssm:us-east-1:123456789012:document/probe")
_DOCUMENT_ARN = re.compile(r"^arn:[^:]+:ssm:[^:]*:[^:]*:document/(?P<name>.+)$")
# Documents a wildcard could name that are not the stack's: AWS's default session document and any other.
_FOREIGN = (
    "arn:aws:ssm:us-east-1::document/SSM-SessionManagerRunShell",
    "arn:aws:ssm:us-east-1:123456789012:document/SSM-SessionManagerRunShell",
    "arn:aws:ssm:us-east-1:123456789012:document/not-a-document-of-this-stack",
)


def _allows_start_session(st: Mapping[str, Any]) -> bool:
    """An Allow statement whose Action names ``ssm:StartSession`` (by name or an ``ssm:`` wildcard). ``*`` and
    ``NotAction`` grants are an account administrator's, who is root on every node anyway (docs/people.md,
    "Who is root"): not this rule's."""
    if st.get("Effect") != "Allow":
        return False
    named = [a for a in items(st.get("Action")) if isinstance(a, str) and a.lower().startswith("ssm:")]
    try:
        return any(statement_matches({"Effect": "Allow", "Action": a, "Resource": "*"}, _START) for a in named)
    except UnsupportedPolicy:
        return False


def _checks_documents(st: Mapping[str, Any]) -> bool:
    condition = st.get("Condition")
    for op, block in condition.items() if isinstance(condition, Mapping) else []:  # pyright: ignore[reportUnknownVariableType]
        if str(op) in ("Bool", "BoolIfExists") and isinstance(block, Mapping):
            for key, value in block.items():  # pyright: ignore[reportUnknownVariableType]
                if str(key).lower() == ACCESS_CHECK and [str(v).lower() for v in items(value)] == ["true"]:
                    return True
    return False


def _matches(pattern: str, arn: str) -> bool:
    try:
        return statement_matches({"Effect": "Allow", "Action": "*", "Resource": pattern}, Request("x:Y", arn))
    except UnsupportedPolicy:
        return True


def _foreign_documents(st: Mapping[str, Any], ours: set[str], names_known: bool) -> list[str]:
    """What the statement names beyond the stack's Session documents (``NotResource`` names everything else)."""
    if "NotResource" in st:
        return ["NotResource (every resource but those listed)"]
    out = []
    for pattern in items(st.get("Resource")):
        if not isinstance(pattern, str):
            continue  # not known yet
        m = _DOCUMENT_ARN.match(pattern)
        if m is not None and any(c in m["name"] for c in "*?"):
            out.append(pattern)  # a wildcard also names documents made later, outside the stack
        elif m is not None:
            if names_known and m["name"] not in ours:
                out.append(pattern)
        elif any(_matches(pattern, arn) for arn in _FOREIGN):
            out.append(pattern)
    return out


def _start_session_violations(r: Resource, ours: set[str], names_known: bool) -> list[Violation]:
    out = []
    for prop, doc in _documents(r):
        for i, st in enumerate(_statements(doc)):
            if not _allows_start_session(st):
                continue
            sid = st.get("Sid") or f"Statement[{i}]"
            if not _checks_documents(st):
                out.append(
                    violation(
                        NO_ROOT_SESSIONS,
                        r,
                        prop,
                        f"statement {sid} allows ssm:StartSession without ssm:SessionDocumentAccessCheck: the default "
                        "SSM-SessionManagerRunShell document opens sessions as ssm-user",
                        'add "Condition": {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}} and name the '
                        "cluster's session documents (gpucluster's session policies do)",
                    )
                )
            foreign = _foreign_documents(st, ours, names_known)
            if foreign:
                out.append(
                    violation(
                        NO_ROOT_SESSIONS,
                        r,
                        prop,
                        f"statement {sid} allows ssm:StartSession with documents that are not this stack's Session "
                        f"documents ({', '.join(foreign)}): one of them may run sessions as ssm-user or root",
                        "name only the cluster's session documents (arn:…:document/<cluster>-session[-<user>]) and "
                        "the instances; never *, a wildcard document or SSM-SessionManagerRunShell",
                    )
                )
    return out


def _personal_documents(documents: Sequence[Resource]) -> dict[str, str]:
    """Name -> ``runAsDefaultUser`` of the stack's Session documents that run as a person (not the shared one)."""
    out: dict[str, str] = {}
    for r in documents:
        doc, name = _content(r), r.get("name")
        inputs = doc.get("inputs") if isinstance(doc, Mapping) else None
        user = inputs.get("runAsDefaultUser") if isinstance(inputs, Mapping) else None
        if isinstance(name, str) and isinstance(user, str) and user != SHARED_RUN_AS:
            out[name] = user
    return out


def _tag_values(doc: Mapping[str, Any]) -> set[str]:
    """Every value the document's conditions compare the Run As tag with (a statement may pin another user)."""
    out: set[str] = set()
    for st in _statements(doc):
        condition = st.get("Condition")
        for block in condition.values() if isinstance(condition, Mapping) else []:  # pyright: ignore[reportUnknownVariableType]
            for key, value in block.items() if isinstance(block, Mapping) else []:  # pyright: ignore[reportUnknownVariableType]
                if str(key).lower() == RUN_AS_KEY.lower():
                    out |= {v for v in items(value) if isinstance(v, str)}
    return out


def _allowed_as(doc: Mapping[str, Any], document_arn: str, run_as: str) -> bool:
    context: dict[str, str | bool] = {"ssm:SessionDocumentAccessCheck": True, RUN_AS_KEY: run_as}
    return evaluate([doc], Request("ssm:StartSession", document_arn, context)).allowed


def _impersonation_violations(r: Resource, personal: Mapping[str, str]) -> list[Violation]:
    """A policy allowing a person's document to a principal whose ``SSMSessionRunAs`` tag names somebody else."""
    out: list[Violation] = []
    for prop, doc in _documents(r):
        for i, st in enumerate(_statements(doc)):
            if not _allows_start_session(st):
                continue
            for pattern in items(st.get("Resource")):
                m = _DOCUMENT_ARN.match(pattern) if isinstance(pattern, str) else None
                name = m["name"] if m is not None else ""
                user = personal.get(name)
                if user is None:
                    continue
                probes = sorted(({"gpucluster-probe"} | _tag_values(doc) | set(personal.values())) - {user})
                try:
                    other = next((o for o in probes if _allowed_as(doc, pattern, o)), None)
                except UnsupportedPolicy:
                    continue  # cannot tell
                if other is not None:
                    sid = st.get("Sid") or f"Statement[{i}]"
                    out.append(
                        violation(
                            NO_ROOT_SESSIONS,
                            r,
                            prop,
                            f"statement {sid} allows the Session document {name} (runs as {user!r}) to a principal "
                            f"tagged SSMSessionRunAs={other}: the tag wins over the document's default user, so that "
                            f"principal's sessions run as {other!r}",
                            f'add "StringEqualsIfExists": {{"{RUN_AS_KEY}": "{user}"}} to the StartSession statements '
                            f"and a Deny of ssm:StartSession when the tag is present and not {user!r} (gpucluster's "
                            "per-user session policies do)",
                        )
                    )
    return out


# --- 3. the nodes' own lockdown ----------------------------------------------------------------------------------------

_USER_DATA = {t.LAUNCH_TEMPLATE: (("userData", True),), t.INSTANCE: (("userData", False), ("userDataBase64", True))}


def _role(r: Resource) -> Any:
    """The ``gpucluster:role`` tag (an instance's tags, or a launch template's tags and instance tag specifications);
    UNKNOWN when not known yet."""
    tag_sets = [r.get("tags")]
    if r.type == t.LAUNCH_TEMPLATE:
        tag_sets += [s.get("tags") for s in items(r.get("tagSpecifications")) if isinstance(s, Mapping)]
    for tags in tag_sets:
        if tags is UNKNOWN:
            return UNKNOWN
        if isinstance(tags, Mapping) and TAG_ROLE in tags:
            return tags[TAG_ROLE]  # pyright: ignore[reportUnknownVariableType]
    return None


def _node_violations(r: Resource) -> list[Violation]:
    if r.type not in _USER_DATA:
        return []
    role = _role(r)
    if role is UNKNOWN or role not in NODE_ROLES:
        return []
    values = [(prop, encoded, r.get(prop)) for prop, encoded in _USER_DATA[r.type]]
    if any(value is UNKNOWN for _, _, value in values):
        return []
    given = [(prop, encoded, value) for prop, encoded, value in values if isinstance(value, str)]
    prop = given[0][0] if given else _USER_DATA[r.type][0][0]
    texts = [text for p, encoded, value in given for text in decode(value, base64_encoded=encoded)]
    fix = (
        f"write {LOCKDOWN_FILE} holding only '{LOCKDOWN_TEXT}' (0440) in bootcmd, before the agent can open a session, "
        f"and grant sudo only to the admin group in {ADMINS_FILE} (gpucluster's node user data does: "
        "gpucluster.render.slurm.identity)"
    )
    out = []
    if not _locked_down(texts):
        what = f"of a {role} node lacks the bootcmd that writes {LOCKDOWN_FILE} with only a comment: the first session makes ssm-user, with sudo"
        out.append(violation(NO_ROOT_SESSIONS, r, prop, what, fix))
    for where, grant in _foreign_grants(texts):
        out.append(violation(NO_ROOT_SESSIONS, r, prop, f"grants sudo in {where}: {grant!r}", fix))
    return out


def _locked_down(texts: list[tuple[str, str]]) -> bool:
    """A bootcmd entry that names the file (its directory and its name, which a script may join) and its comment."""
    directory, name = LOCKDOWN_FILE.rsplit("/", 1)
    return any(", bootcmd[" in where and directory in text and name in text and LOCKDOWN_TEXT in text for where, text in texts)


def _foreign_grants(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Sudoers grants outside the admin group's line in the admin file (that line is also read where the file's plain
    text lies inside the whole user data: it is allowed there too)."""
    admin = {
        m.group(0)
        for where, text in texts
        if where.endswith(f"file {ADMINS_FILE}")
        for m in _GRANT.finditer(text)
        if m["who"].startswith("%")
    }
    out: dict[str, tuple[str, str]] = {}
    for where, text in texts:
        for line in text.splitlines():
            if line.lstrip().startswith("#"):
                continue
            for m in [*_GRANT.finditer(line), *_CLOUD_INIT_SUDO.finditer(line)]:
                if m.group(0) not in admin:
                    out.setdefault(m.group(0), (where, m.group(0)))
    return list(out.values())
