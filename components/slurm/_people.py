"""The people of a Slurm cluster, wired into its builder: the Session documents and
policies, the security groups between login, head and compute nodes, the shared ``/home``, the login nodes, and
the IAM rights every node role gets for them (the directory's bind password; the head node's host keys).

All of it is made only when the resolved Slurm part says so (``identity``, ``login``, ``home``; ``None`` = not
configured): a cluster without people is what it was. Values are resolved (docs/architecture.md, "Resolution: where a decision is made"); nothing here decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.security import BOTH_WAYS, allow
from gpucluster.components.slurm._login_network import LoginGroups, login_groups
from gpucluster.components.slurm._sessions import SessionParts, SessionWiring, session_access
from gpucluster.components.slurm.login_nodes import LoginParts, LoginWiring, build_login_nodes, lifecycle_hook_name
from gpucluster.components.storage.home_storage import HomeParts, HomeWiring, build_home_storage
from gpucluster.components.storage.lustre_storage import LUSTRE_PORTS
from gpucluster.render.core import render_cloud_config
from gpucluster.render.hybrid.compute import with_munge_secret
from gpucluster.render.iam import policy_json
from gpucluster.render.slurm.agent import with_artifact_bucket
from gpucluster.render.slurm.home import HomeMount, with_home_server
from gpucluster.render.slurm.iam_sessions import bind_secret_statements, host_key_writer_statement, statements_policy
from gpucluster.render.slurm.login import LoginInputs, login_cloud_config, login_title
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.slurm.identity import DirectoryIdentity, ResolvedHome, ResolvedIdentity, ResolvedLogin

SRUN_PORTS = (60001, 63000)
LoginRenderer = Callable[[pulumi.Output[str] | None, pulumi.Output[str] | None], pulumi.Output[str]]
"""``(home server, host keys' secret ARN) -> login user data``; either may be ``None`` (no home, no SSH)."""


@dataclass(frozen=True)
class People:
    """The resolved people part of a Slurm cluster and where its pieces go (``SlurmBuild.people``)."""

    identity: ResolvedIdentity | None = None
    login: ResolvedLogin | None = None
    home: ResolvedHome | None = None
    vpc_cidr: pulumi.Input[str] | None = None
    """The VPC's CIDR (the home file system's exports); default: looked up from the VPC."""
    login_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    login_lb_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    home_subnet_id: pulumi.Input[str] | None = None
    login_user_data: pulumi.Input[str] | None = None
    """The login nodes' cloud-config (render's), with the munge secret's and bucket's stand-ins like compute's."""
    lustre_security_group_id: pulumi.Input[str] | None = None
    """The cluster's Lustre file system's group: login nodes get its client rules (they mount ``/fsx`` too)."""
    bind_kms_key_arn: str | None = None
    """The bind secret's customer managed key, when it has one (kms:Decrypt through Secrets Manager)."""

    @property
    def bind_secret_arn(self) -> str | None:
        source = self.identity.source if self.identity is not None else None
        return source.bind_password_secret_arn if isinstance(source, DirectoryIdentity) else None


@dataclass
class PeopleParts:
    """What :func:`people_groups` and :func:`build_people` made (SlurmCluster's outputs)."""

    groups: LoginGroups | None = None
    sessions: SessionParts | None = None
    home: HomeParts | None = None
    login: LoginParts | None = None


def people_groups(
    name: str, people: People, *, cluster: str, vpc_id: pulumi.Input[str], tags: dict[str, str], opts: pulumi.ResourceOptions
) -> LoginGroups | None:
    """The security groups (docs/slurm.md, "Who can reach what, per node role"), made before the head node and compute nodes so they carry their sides:
    with login nodes or a home (the home file system admits NFS from these groups only, never from the cluster's
    shared groups, which EKS nodes may carry)."""
    if people.login is None and people.home is None:
        return None
    ports = people.login.srun_ports if people.login is not None else SRUN_PORTS
    return login_groups(name, cluster=cluster, vpc_id=vpc_id, srun_ports=ports, tags=tags, opts=opts)


def role_statements(people: People, region: str) -> list[dict]:
    """What every node role (head, compute, login) gets beyond its own needs: the directory's bind password."""
    arn = people.bind_secret_arn
    return bind_secret_statements(secret_arn=arn, kms_key_arn=people.bind_kms_key_arn, region=region) if arn else []


def attach_role_statements(name: str, role: aws.iam.Role, statements: list[dict], opts: pulumi.ResourceOptions) -> None:
    """``statements`` as the inline policy ``<name>`` of ``role`` (none when there are none)."""
    if statements:
        aws.iam.RolePolicy(name, role=role.id, policy=policy_json(statements_policy(statements)), opts=opts)


@dataclass(frozen=True)
class PeopleWiring:
    """What the builder knows by the time the people's parts are made."""

    cluster: str
    region: str
    partition: pulumi.Input[str]
    account: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    munge_secret_arn: pulumi.Input[str]
    tags: dict[str, str]
    protect: bool
    opts: pulumi.ResourceOptions
    render_login: LoginRenderer | None = None
    """Renders the login nodes' user data once the home's server and the host keys' secret are known."""
    artifact_objects: pulumi.Input[Sequence[str]] | None = None
    """The artifact bucket's objects every node reads (the node package, the declared users' object)."""


def build_people(parent: pulumi.Resource, name: str, people: People, groups: LoginGroups | None, w: PeopleWiring) -> PeopleParts:
    """Sessions (with an identity), the home file system, then the login nodes."""
    parts = PeopleParts(groups=groups)
    if people.identity is not None:
        sessions = SessionWiring(w.cluster, w.region, w.partition, w.account, w.tags, w.opts, people.vpc_cidr)
        parts.sessions = session_access(name, people.identity, sessions)
    if people.home is not None:
        if groups is None or people.home_subnet_id is None:
            raise ValueError("a home file system needs the people's security groups and its subnet")
        cidr = people.vpc_cidr
        if cidr is None:  # your own VPC given to a SlurmCluster: its CIDR, as Network reads it
            cidr = aws.ec2.get_vpc_output(id=w.vpc_id, opts=pulumi.InvokeOutputOptions(parent=parent)).cidr_block
        clients = {"head": groups.head_side.id, "compute": groups.compute_side.id, "login": groups.login.id}
        parts.home = build_home_storage(
            parent,
            f"{name}-home",
            people.home,
            HomeWiring(w.cluster, w.vpc_id, cidr, people.home_subnet_id, clients, w.tags),
        )
    if people.login is not None:
        user_data = _login_user_data(people, parts, w)
        if user_data is None or people.login_subnet_ids is None:
            raise ValueError("login nodes need their user data (render's login_cloud_config) and their subnets")
        parts.login = build_login_nodes(
            parent,
            name,
            people.login,
            LoginWiring(
                cluster=w.cluster,
                region=w.region,
                partition=w.partition,
                account=w.account,
                vpc_id=w.vpc_id,
                subnet_ids=people.login_subnet_ids,
                user_data=user_data,
                munge_secret_arn=w.munge_secret_arn,
                tags=w.tags,
                protect=w.protect,
                lb_subnet_ids=people.login_lb_subnet_ids,
                bind_secret_arn=people.bind_secret_arn,
                bind_kms_key_arn=people.bind_kms_key_arn,
                groups=groups,
                artifact_objects=w.artifact_objects,
            ),
        )
        if people.lustre_security_group_id is not None:
            _lustre_client(name, parts.login.security_groups.login, people.lustre_security_group_id, w)
    return parts


def _login_user_data(
    people: People, parts: PeopleParts, w: PeopleWiring
) -> pulumi.Input[str] | Callable[[pulumi.Output[str] | None], pulumi.Input[str]] | None:
    if people.login_user_data is not None:
        return people.login_user_data
    render = w.render_login
    if render is None:
        return None
    server = home_server_of(parts)
    return lambda host_keys: render(server, host_keys)


def _lustre_client(name: str, login: aws.ec2.SecurityGroup, lustre: pulumi.Input[str], w: PeopleWiring) -> None:
    """The Lustre client rules for the login group, both ways as the file system's own rules are (LNet)."""
    for low, high in LUSTRE_PORTS:
        for side, sg, peer in (("fs", lustre, login.id), ("login", login.id, lustre)):
            for direction, word in BOTH_WAYS:
                allow(f"{name}-lustre-{side}-{direction}-{low}", direction, sg, peer_security_group_id=peer,
                      protocol="tcp", ports=(low, high), description=f"Lustre {low}-{high} {word} login nodes"
                      if side == "fs" else f"Lustre {low}-{high} {word} the file system", tags=w.tags, opts=w.opts)  # fmt: skip


def head_host_key_statement(parts: PeopleParts) -> pulumi.Output[list[dict]] | None:
    """The head node's right to fill the login nodes' host keys (SSH enabled), once the secret's ARN is known."""
    if parts.login is None or parts.login.host_key_secret_arn is None:
        return None
    return parts.login.host_key_secret_arn.apply(lambda arn: [host_key_writer_statement(arn)])


def people_context(base: SlurmContext, people: People) -> SlurmContext:
    """The Slurm files' context with ``people`` in it: the identity (sudoers, users) and srun's ports (login nodes)."""
    srun = people.login.srun_ports if people.login is not None else None
    return dataclasses.replace(base, identity=people.identity, srun_ports=srun)


def login_renderer(
    ctx: SlurmContext, people: People, bucket: pulumi.Output[str], munge_secret_arn: pulumi.Output[str]
) -> LoginRenderer | None:
    """Render's ``login_cloud_config`` for ``people.login``, with the bucket's and munge secret's stand-ins replaced
    as in compute nodes' user data."""
    login = people.login
    if login is None:
        return None

    def render(server: pulumi.Output[str] | None, host_keys: pulumi.Output[str] | None) -> pulumi.Output[str]:
        def text(v: list[Any]) -> str:
            inputs = LoginInputs(
                region=ctx.region,
                asg_name=login.asg_name,
                hook_name=lifecycle_hook_name(ctx.cluster),
                grace_seconds=login.grace_seconds,
                home=HomeMount(str(v[0])) if v[0] else None,
                host_key_secret_arn=str(v[1]) if v[1] else None,
            )
            doc = render_cloud_config(login_title(ctx), login_cloud_config(ctx, inputs), gzipped=True)
            return with_munge_secret(with_artifact_bucket(doc, str(v[2])), ctx.region, str(v[3]))

        return pulumi.Output.all(server, host_keys, bucket, munge_secret_arn).apply(text)

    return render


def expose_people(target: Any, parts: PeopleParts) -> dict[str, object]:
    """Set the people's attributes on ``target`` (``SlurmParts``) and return the component's outputs of them."""
    sessions, login, home = parts.sessions, parts.login, parts.home
    target.session_documents = sessions.documents if sessions is not None else {}
    target.session_policy_arns = sessions.policy_arns if sessions is not None else {}
    target.session_commands = sessions.commands if sessions is not None else {}
    target.login_asg_name = login.asg_name if login is not None else None
    target.ssh_endpoint = login.ssh_endpoint if login is not None else None
    target.home_storage = home.storage if home is not None else None
    out: dict[str, object] = {}
    if sessions is not None:
        out.update(sessionDocuments=sessions.documents, sessionPolicyArns=sessions.policy_arns, sessionCommands=sessions.commands)
    if login is not None:
        out.update(
            loginAsgName=login.asg_name,
            loginSecurityGroupId=login.security_groups.login.id,
            loginRoleArn=login.role_arn,
            sshEndpoint=login.ssh_endpoint,
        )
    if home is not None:
        out["homeFileSystemId"] = home.file_system_id
    return out


def home_server_of(parts: PeopleParts) -> pulumi.Output[str] | None:
    """The home file system's DNS name (what the nodes' user data mounts), when there is one."""
    if parts.home is None or parts.home.storage.server is None:
        return None
    return pulumi.Output.from_input(parts.home.storage.server).apply(str)


def with_home(user_data: str, region: str, server: object) -> str:
    """``user_data`` with the home file system's DNS name in place of render's stand-in (unchanged without a home)."""
    return with_home_server(user_data, region, str(server)) if server else user_data
