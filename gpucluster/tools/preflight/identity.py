"""Preflight of the people of a Slurm cluster (docs/people.md): what AWS must already hold for
``slurm.identity``, ``slurm.loginNodes`` and ``slurm.home`` before ``pulumi up``.

- The directory's bind secret (``identity.directory.bindPasswordSecret``) exists in the region, is not scheduled
  for deletion, and its resource policy denies nothing to the cluster's node roles; its KMS key, when a
  customer-managed one, is enabled (and its key policy must let the account decrypt through Secrets Manager: a
  warning, since the key policy's effect is not readable from here).
- Each declared user's ``sessionPrincipal`` exists (GetRole / GetUser); one already tagged ``SSMSessionRunAs`` with
  another user is an error: the tag wins over the document's default user (Session Manager user guide, "Turn on
  Run As support for Linux and macOS managed nodes"), so it would open another person's account, and the user's
  session policy refuses such a principal every session.
- Load balancer subnets (``loginNodes.ssh.publicSubnetIds``, internet-facing): each routes ``0.0.0.0/0`` to an
  internet gateway, and every zone of the login nodes has one. Login subnets (``loginNodes.subnetIds``) do not
  route ``0.0.0.0/0`` to an internet gateway (login nodes are private; the load balancer faces the clients).
- FSx for OpenZFS: AWS has no call that says whether a deployment type is offered in a zone (DescribeFileSystems and
  the FSx API reference have none), so preflight says it is not checked rather than guess.

Not here: whether the head role may read the bind secret once deployed (``iam simulate-principal-policy``) needs the
role's ARN, which only the stack's outputs know (the role is auto-named): the plan's IAM tests cover the policy.

Part of :mod:`gpucluster.tools.preflight` (:mod:`.run` runs each check on its own).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import head_zone
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.facts.catalog import Catalog

if TYPE_CHECKING:
    from gpucluster.tools.preflight.clients import Clients

S = "gpucluster:slurm"
RUN_AS_TAG = "SSMSessionRunAs"
AWS_MANAGED_SECRET_KEY = "alias/aws/secretsmanager"
_PRINCIPAL = re.compile(r"^arn:[^:]+:iam::\d{12}:(?P<kind>role|user)/(?:.*/)?(?P<name>[^/]+)$")


def _code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def check_bind_secret(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """The directory's bind secret: there, not being deleted, readable by the node roles, its key enabled."""
    identity = spec.slurm.identity if spec.slurm else None
    directory = identity.directory if identity else None
    if directory is None:
        return
    path, arn = f"{S}.identity.directory.bindPasswordSecret", directory.bind_password_secret
    try:
        secret = aws.secretsmanager.describe_secret(SecretId=arn)
    except Exception as exc:
        if _code(exc) != "ResourceNotFoundException":
            raise
        yield error(
            path,
            f"no secret {arn} in {spec.region}: the nodes could not read the bind password and nobody could log in",
            "create it (the secret string is the bind account's password) or give the ARN of the one you have",
            arn,
            "bind-secret-missing",
        )
        return
    if secret.get("DeletedDate"):
        yield error(
            path,
            f"{arn} is scheduled for deletion ({secret['DeletedDate']:%Y-%m-%d}): the nodes would lose the directory then",
            f"restore it (aws secretsmanager restore-secret --secret-id {arn}) or create another",
            arn,
            "bind-secret-deleted",
        )
    yield from _policy_denies(aws, arn, path)
    yield from _secret_key(aws, secret.get("KmsKeyId"), path)


def _policy_denies(aws: Clients, arn: str, path: str) -> Iterator[Finding]:
    policy = aws.secretsmanager.get_resource_policy(SecretId=arn).get("ResourcePolicy")
    statements = json.loads(policy).get("Statement", []) if policy else []
    for st in [statements] if isinstance(statements, dict) else statements:
        actions = st.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if st.get("Effect") == "Deny" and any(a in ("*", "secretsmanager:*", "secretsmanager:GetSecretValue") for a in actions):
            yield warning(
                path,
                f"the resource policy of {arn} denies secretsmanager:GetSecretValue to {st.get('Principal')!r}"
                f"{' unless ' + json.dumps(st['Condition']) if st.get('Condition') else ''}: if that covers the "
                "cluster's node roles, no node can read the bind password",
                "exempt the cluster's node roles (after the first `pulumi up`, its outputs name them) from the Deny",
                arn,
                "bind-secret-deny",
            )


def _secret_key(aws: Clients, key: str | None, path: str) -> Iterator[Finding]:
    if not key or key == AWS_MANAGED_SECRET_KEY or key.endswith(":" + AWS_MANAGED_SECRET_KEY):
        return  # Secrets Manager's own key: the account's principals decrypt through Secrets Manager
    meta = aws.kms.describe_key(KeyId=key)["KeyMetadata"]
    if meta.get("KeyManager") == "AWS":
        return
    if meta.get("KeyState") != "Enabled":
        yield error(
            path,
            f"the secret is encrypted with KMS key {key}, which is {meta.get('KeyState')}: it cannot be read",
            f"enable the key (aws kms enable-key --key-id {key}) or re-encrypt the secret with another",
            key,
            "bind-secret-key-disabled",
        )
    yield warning(
        path,
        f"the secret is encrypted with the customer-managed key {key}: the stack grants the node roles kms:Decrypt "
        "through Secrets Manager, which works only if the key policy lets the account's IAM policies grant it",
        'keep the key policy\'s statement that allows "kms:*" to the account root (arn:aws:iam::<account>:root), or '
        "add one for the node roles with kms:ViaService = secretsmanager.<region>.amazonaws.com",
        key,
        "bind-secret-cmk",
    )


def check_session_principals(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """Every declared user's ``sessionPrincipal`` exists; its ``SSMSessionRunAs`` tag, if any, names that user."""
    identity = spec.slurm.identity if spec.slurm else None
    for j, user in enumerate(identity.users if identity else ()):
        arn = user.session_principal
        m = _PRINCIPAL.match(arn or "")
        if arn is None or m is None:
            continue  # none, or malformed: the config check says so
        path = f"{S}.identity.users[{j}].sessionPrincipal"
        try:
            if m["kind"] == "role":
                tags = aws.iam.list_role_tags(RoleName=m["name"])["Tags"]
            else:
                tags = aws.iam.list_user_tags(UserName=m["name"])["Tags"]
        except Exception as exc:
            if _code(exc) != "NoSuchEntity":
                raise
            yield error(
                path,
                f"no IAM {m['kind']} {m['name']!r} in this account: {user.name} could not open sessions, and "
                "attaching the session policy would fail",
                f"create the {m['kind']}, or give the ARN of the principal {user.name} signs in as",
                arn,
                "principal-missing",
            )
            continue
        run_as = next((t["Value"] for t in tags if t["Key"] == RUN_AS_TAG), None)
        if run_as is not None and run_as != user.name:
            yield error(
                path,
                f"{arn} is tagged {RUN_AS_TAG}={run_as}: the tag wins over the session document's default user, so "
                f"{user.name}'s sessions would run as {run_as!r} (another person's account); {user.name}'s session "
                "policy refuses every session to a principal tagged for somebody else",
                f"remove the tag (aws iam untag-{m['kind']} --{m['kind']}-name {m['name']} --tag-keys {RUN_AS_TAG}) "
                f"or set it to {user.name}, or give {user.name} a principal of their own",
                arn,
                "principal-run-as-other",
            )


def _default_route_to_igw(aws: Clients, subnet: dict[str, Any]) -> str | None:
    """The internet gateway the subnet's route table sends 0.0.0.0/0 to (its own table, else the VPC's main)."""
    tables = aws.ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id", "Values": [subnet["SubnetId"]]}])
    found = tables["RouteTables"]
    if not found:
        main = [{"Name": "vpc-id", "Values": [subnet["VpcId"]]}, {"Name": "association.main", "Values": ["true"]}]
        found = aws.ec2.describe_route_tables(Filters=main)["RouteTables"]
    for table in found:
        for r in table.get("Routes", []):
            if r.get("DestinationCidrBlock") == "0.0.0.0/0" and str(r.get("GatewayId", "")).startswith("igw-"):
                return str(r["GatewayId"])
    return None


def _subnets(aws: Clients, ids: tuple[str, ...]) -> list[dict[str, Any]]:
    """The subnets in the config's order (EC2 answers in its own); a missing one is check_subnets' to report."""
    found = {s["SubnetId"]: s for s in aws.ec2.describe_subnets(SubnetIds=list(ids))["Subnets"]} if ids else {}
    return [found[i] for i in ids if i in found]


def _login_subnets(spec: ClusterSpec, catalog: Catalog) -> list[tuple[str, str, str]]:
    """``(config path, subnet id, how it was chosen)`` of the subnets login nodes run in: ``loginNodes.subnetIds``,
    else (your own VPC) the head node's subnet: ``headNode.subnetId`` or the first listed subnet of its zone, named
    where ``network.subnets`` lists it (a head node's subnet must be listed there)."""
    slurm = spec.slurm
    login = slurm.login_nodes if slurm is not None else None
    if slurm is None or login is None:
        return []
    if login.subnet_ids:
        return [(f"{S}.loginNodes.subnetIds[{k}]", s, "") for k, s in enumerate(login.subnet_ids)]
    network = getattr(spec, "network", None)
    if network is None or network.create_vpc:
        return []  # a new VPC's private subnets
    why = "login nodes run in the head node's subnet (no loginNodes.subnetIds), and "
    zone, head = head_zone(spec, catalog), slurm.head_node.subnet_id  # resolution fills the head node's subnet in
    for j, subnet in enumerate(network.subnets):
        if subnet.id == head or (head is None and subnet.availability_zone == zone):
            return [(f"gpucluster:network.subnets[{j}].id", subnet.id, why)]
    return []


def check_login_subnets(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """Login subnets are private (the ones named, or the head node's they default to in your own VPC); an
    internet-facing load balancer's subnets are public, one per login zone."""
    login = spec.slurm.login_nodes if spec.slurm else None
    if login is None:
        return
    chosen = _login_subnets(spec, catalog)
    found = {s["SubnetId"]: s for s in _subnets(aws, tuple(dict.fromkeys(s for _, s, _ in chosen)))}
    login_subnets = [found[s] for _, s, _ in chosen if s in found]
    for path, subnet_id, why in chosen:
        subnet = found.get(subnet_id)
        igw = _default_route_to_igw(aws, subnet) if subnet is not None else None
        if igw is not None:
            yield error(
                path,
                f"{why}{subnet_id} routes 0.0.0.0/0 to {igw}: a public subnet; login nodes live in private subnets",
                "use a private subnet (a NAT gateway or endpoints for its way out)"
                + (", or set loginNodes.subnetIds to private ones" if why else "")
                + "; expose SSH with loginNodes.ssh",
                subnet_id,
                "login-subnet-public",
            )
    ssh = login.ssh
    if ssh is None or ssh.scheme != "internet-facing" or not ssh.public_subnet_ids:
        return
    public = _subnets(aws, ssh.public_subnet_ids)
    covered: set[str] = set()
    for k, subnet in enumerate(public):
        if _default_route_to_igw(aws, subnet) is not None:
            covered.add(subnet["AvailabilityZone"])
        else:
            yield error(
                f"{S}.loginNodes.ssh.publicSubnetIds[{k}]",
                f"{subnet['SubnetId']} has no route 0.0.0.0/0 to an internet gateway: an internet-facing load "
                "balancer there is unreachable from the internet",
                "give public subnets (their route table sends 0.0.0.0/0 to an igw-…)",
                subnet["SubnetId"],
                "nlb-subnet-private",
            )
    for zone in sorted({s["AvailabilityZone"] for s in login_subnets} - covered):
        yield error(
            f"{S}.loginNodes.ssh.publicSubnetIds",
            f"no public subnet in {zone}, where login nodes run: the load balancer would not reach them there",
            f"add a public subnet of {zone}",
            list(ssh.public_subnet_ids),
            "nlb-zone-missing",
        )


def check_home_offering(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """FSx for OpenZFS: not checkable (see the module)."""
    slurm = spec.slurm
    if slurm is None or slurm.identity is None or (slurm.home is not None and not slurm.home.enabled):
        return
    kind = slurm.home.deployment_type if slurm.home else "SINGLE_AZ_1"
    yield info(
        f"{S}.home.deploymentType",
        f"FSx for OpenZFS {kind} in the head node's zone: not checked — AWS has no call that lists where a "
        "deployment type is offered",
        "if `pulumi up` says the type is not supported there, choose another deploymentType (SINGLE_AZ_1 is the "
        "most widely offered)",
        kind,
        "home-offering-unchecked",
    )


IDENTITY_CHECKED = {
    check_bind_secret: ("the directory's bind secret", f"{S}.identity.directory.bindPasswordSecret"),
    check_session_principals: ("the users' session principals", f"{S}.identity.users"),
    check_login_subnets: ("the login and load balancer subnets", f"{S}.loginNodes"),
    check_home_offering: ("FSx for OpenZFS", f"{S}.home"),
}
