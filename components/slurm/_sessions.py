"""Session Manager's Run As for the people of a Slurm cluster: the Session documents, the session policies and
their attachments (children of ``SlurmCluster``; docs/people.md, "Security").

- ``<cluster>-session`` (shared): Run As on, its default user the locked ``gpucluster-nobody``. Whether
  CreateDocument accepts ``runAsEnabled`` without ``runAsDefaultUser`` is not said by the Session document schema
  (docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-schema.html lists both inputs, neither
  as conditional), so the default is set to an account no session can use: the users script makes
  ``gpucluster-nobody`` locked with ``nologin`` where it runs, and where it does not exist Run As fails the session
  (Session Manager's guide: "if the user doesn't exist on the node, the session fails"). Either way an untagged principal gets no
  shell, and never ``ssm-user``. A principal tagged ``SSMSessionRunAs=<user>`` (or whose federated session
  carries that tag) gets a session as that user: the tag wins over the document's default, so whoever
  sets the tag chooses the user — the principal's trust policy must pin it (docs/people.md).
- ``<cluster>-session-<user>`` per declared user with a session principal: ``runAsDefaultUser`` = that user, so
  the declared mapping holds without tagging principals the stack does not own; the user's policy refuses a
  principal whose tag names another user (:func:`gpucluster.render.slurm.iam_sessions.session_policy`), since the tag
  would win over this document too.
- Policies (JSON from :mod:`gpucluster.render.slurm.iam_sessions`): ``<cluster>-session-<user>`` attached to the user's
  principal when ``attach`` (a role or a user); ``<cluster>-login-sessions`` and, with an admin group,
  ``<cluster>-admin-sessions`` exported over the shared document, for the account's admins to attach to
  federated roles whose sessions carry ``SSMSessionRunAs``.

No document here sets ``runAsElevated`` (a Standard_Stream document has none; the ``no-root-sessions`` rule
checks). The shell profile asks oddjob-mkhomedir for a missing home (Run As starts the shell without PAM):
service ``com.redhat.oddjob_mkhomedir``, object ``/``, method ``mkmyhomedir`` (read from the Debian package's
``/etc/oddjobd.conf.d/oddjobd-mkhomedir.conf``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.config.naming import with_name
from gpucluster.render.iam import policy_json
from gpucluster.render.slurm.iam_sessions import CLUSTER_TAG, ROLE_TAG, session_policy
from gpucluster.resolve.slurm.identity import DeclaredIdentity, PosixUser, ResolvedIdentity

SHARED_RUN_AS = "gpucluster-nobody"
"""The shared document's default user: a locked account with ``nologin`` (or none): untagged sessions end at once."""
SHARED = "*"
"""The key of the shared document in the outputs (``sessionDocuments``, ``sessionCommands``)."""
IDLE_MINUTES = "20"
SHELL_PROFILE = (
    '[ -d "$HOME" ] || dbus-send --system --print-reply --dest=com.redhat.oddjob_mkhomedir / '
    'com.redhat.oddjob_mkhomedir.mkmyhomedir >/dev/null 2>&1; cd "$HOME"; exec bash -l'
)


CLUSTER_KEY = "id_ed25519"
MIN_PERSON_UID = 1000


def cluster_key_step(cluster: str, cidr: str) -> str:
    """The shell step that makes a person's key pair for SSH inside the cluster, once (docs/people.md): ed25519 without
    a passphrase in ``~/.ssh`` (0700, the key 0600: umask 077), its public half appended to ``~/.ssh/authorized_keys``
    with ``from="<cidr>"``, so it opens nothing from outside the VPC. Compute nodes' sshd reads that file, and
    pam_slurm_adopt admits the key only while a job of its owner runs there. Never for uids below 1000."""
    import ipaddress

    network = str(ipaddress.ip_network(cidr, strict=False))  # the VPC's CIDR as AWS gives it, never config text
    key = f'"$HOME/.ssh/{CLUSTER_KEY}"'
    return (
        f'[ "$(id -u)" -lt {MIN_PERSON_UID} ] || [ -e {key} ] || (umask 077 && mkdir -p "$HOME/.ssh" && ssh-keygen -q -t '
        f'ed25519 -N \'\' -C "$(id -un)@{cluster}" -f {key} && printf \'from="%s" %s\\n\' {network} "$(cat {key}.pub)" '
        '>>"$HOME/.ssh/authorized_keys") >/dev/null 2>&1; '
    )


def shell_profile(cluster: str, cidr: str | None) -> str:
    """:data:`SHELL_PROFILE` with, given the VPC's CIDR, the first-session key pair step before the login shell."""
    if cidr is None:
        return SHELL_PROFILE
    home, _, shell = SHELL_PROFILE.rpartition("exec bash -l")
    return home + cluster_key_step(cluster, cidr) + "exec bash -l" + shell


def session_document_content(*, cluster: str, run_as: str, cidr: str | None = None) -> dict[str, Any]:
    """The Session document (Standard_Stream) that starts shells as ``run_as`` unless the principal's
    ``SSMSessionRunAs`` tag names another user; with the VPC's ``cidr``, a first session makes the person's cluster key
    pair (:func:`cluster_key_step`)."""
    return {
        "schemaVersion": "1.0",
        "description": f"Shell on Slurm cluster {cluster} as yourself (Run As); never as ssm-user or root",
        "sessionType": "Standard_Stream",
        "inputs": {
            "runAsEnabled": True,
            "runAsDefaultUser": run_as,
            "s3EncryptionEnabled": True,
            "cloudWatchEncryptionEnabled": True,
            "idleSessionTimeout": IDLE_MINUTES,
            "shellProfile": {"linux": shell_profile(cluster, cidr), "windows": ""},
        },
    }


def session_document_name(cluster: str, user: str | None = None) -> str:
    """``<cluster>-session`` (shared) or ``<cluster>-session-<user>``."""
    return f"{cluster}-session" if user is None else f"{cluster}-session-{user}"


def session_command(cluster: str, document: str) -> str:
    """The command a person runs: start a session with ``document`` on a running login node, found by its tags
    when it is run (no lookup at plan time)."""
    find = (
        "aws ec2 describe-instances --filters "
        f"Name=tag:{CLUSTER_TAG},Values={cluster} Name=tag:{ROLE_TAG},Values=login Name=instance-state-name,Values=running "
        "--query 'Reservations[0].Instances[0].InstanceId' --output text"
    )
    return f"aws ssm start-session --document-name {document} --target $({find})"


@dataclass
class SessionParts:
    """What :func:`session_access` made: the outputs ``sessionDocuments``, ``sessionPolicyArns``,
    ``sessionCommands``."""

    documents: dict[str, str] = field(default_factory=lambda: {})
    """Document name per declared user with a principal, and the shared one under ``"*"``."""
    policy_arns: dict[str, pulumi.Output[str]] = field(default_factory=lambda: {})
    """Policy ARN per declared user with a principal, and the exported ``login``/``admin`` ones."""
    commands: dict[str, str] = field(default_factory=lambda: {})
    """``aws ssm start-session …`` per document key."""


@dataclass(frozen=True)
class SessionWiring:
    """Where the documents live (the policies name their ARNs) and how children are made."""

    cluster: str
    region: str
    partition: pulumi.Input[str]
    account: pulumi.Input[str]
    tags: dict[str, str]
    opts: pulumi.ResourceOptions
    cluster_cidr: pulumi.Input[str] | None = None
    """The VPC's CIDR: where a person's first-session key pair is authorised from (None: no key pair is made)."""


def session_access(name: str, identity: ResolvedIdentity, wiring: SessionWiring) -> SessionParts:
    """The shared document and the exported policies, then a document, a policy and its attachment per declared
    user with a session principal."""
    parts = SessionParts()
    shared = _document(name, wiring, None, SHARED_RUN_AS)
    parts.documents[SHARED] = shared
    parts.commands[SHARED] = session_command(wiring.cluster, shared)
    exported = {"login": False, **({"admin": True} if identity.admin_group is not None else {})}
    for kind, admin in exported.items():
        parts.policy_arns[kind] = _policy(
            f"{name}-{kind}-sessions",
            f"{wiring.cluster}-{kind}-sessions",
            f"Session Manager as yourself on the {'nodes' if admin else 'login nodes'} of {wiring.cluster} "
            "(attach to principals tagged SSMSessionRunAs)",
            wiring,
            (shared,),
            admin,
        ).arn
    if isinstance(identity.source, DeclaredIdentity):
        for user in identity.source.users:
            if user.session is not None:
                _user_access(name, user, wiring, parts)
    return parts


def _user_access(name: str, user: PosixUser, wiring: SessionWiring, parts: SessionParts) -> None:
    grant = user.session
    if grant is None:  # the caller passes users with a session principal only
        raise ValueError(f"user {user.name!r} has no session principal: no Session document of their own")
    document = _document(name, wiring, user.name, user.name)
    policy = _policy(
        f"{name}-session-{user.name}",
        session_document_name(wiring.cluster, user.name),
        f"Session Manager as {user.name} on {'the nodes' if user.admin else 'the login nodes'} of {wiring.cluster}",
        wiring,
        (document,),
        user.admin,
        run_as=user.name,
    )
    parts.documents[user.name] = document
    parts.commands[user.name] = session_command(wiring.cluster, document)
    parts.policy_arns[user.name] = policy.arn
    if not grant.attach:
        return
    if grant.principal_kind == "role":
        aws.iam.RolePolicyAttachment(
            f"{name}-session-{user.name}-attach", role=grant.principal_name, policy_arn=policy.arn, opts=wiring.opts
        )
    else:
        aws.iam.UserPolicyAttachment(
            f"{name}-session-{user.name}-attach", user=grant.principal_name, policy_arn=policy.arn, opts=wiring.opts
        )


def _document(name: str, wiring: SessionWiring, user: str | None, run_as: str) -> str:
    doc_name = session_document_name(wiring.cluster, user)
    aws.ssm.Document(
        f"{name}-session" if user is None else f"{name}-session-{user}",
        name=doc_name,
        document_type="Session",
        document_format="JSON",
        content=pulumi.Output.from_input(wiring.cluster_cidr).apply(
            lambda cidr: json.dumps(session_document_content(cluster=wiring.cluster, run_as=run_as, cidr=cidr), indent=2)
        ),
        tags=with_name(wiring.tags, doc_name),
        opts=wiring.opts,
    )
    return doc_name


def _policy(
    resource: str,
    policy_name: str,
    description: str,
    wiring: SessionWiring,
    documents: tuple[str, ...],
    admin: bool,
    run_as: str | None = None,
) -> aws.iam.Policy:
    def text(partition: str, account: str) -> str:
        return policy_json(
            session_policy(
                partition=partition,
                region=wiring.region,
                account=account,
                cluster=wiring.cluster,
                documents=documents,
                admin=admin,
                run_as=run_as,
            )
        )

    # A plain string when the partition and account are (the policy rule reads it from the plan), else an Output.
    where = (wiring.partition, wiring.account)
    policy: pulumi.Input[str] = (
        text(where[0], where[1])
        if isinstance(where[0], str) and isinstance(where[1], str)
        else pulumi.Output.all(*where).apply(lambda v: text(str(v[0]), str(v[1])))
    )
    return aws.iam.Policy(
        resource,
        name=policy_name,
        description=description,
        policy=policy,
        tags=with_name(wiring.tags, policy_name),
        opts=wiring.opts,
    )
