"""OnPremCredentials: short-lived AWS credentials for the node agent on an on-premises site's controller.

Never an access key. ``credentials.type``:

- ``rolesanywhere``: an IAM Roles Anywhere trust anchor on the site's certificate authority (its PEM, or an AWS
  Private CA), a profile, and a role that trusts ``rolesanywhere.amazonaws.com`` only for sessions through that
  anchor from a certificate whose subject CN is ``certificateCn``. The controller's ``aws_signing_helper``
  turns its certificate into a session (the bundle's ``credential_process`` profile).
- ``ssm``: an SSM hybrid activation (one registration) whose service role the controller runs as once
  registered.

Either role's rights are exactly the node agent's (the head node's agent policy,
:func:`~gpucluster.components._shared.agent_iam.slurm_agent_policy`: launch from the burst groups' templates, only
their instance types, into their subnets and security groups, IMDSv2, the cloud nodes' profile; tag, terminate
their instances, describe) plus writing the site's munge key into the cluster's secret
(:func:`~gpucluster.render.iam.site_munge_policy`): the site makes the key, cloud nodes only read it. An SSM
role also gets Session Manager's rights, without reading SSM parameters.
"""

from dataclasses import dataclass, field
from typing import Required, TypedDict

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.agent_iam import LaunchRights, agent_policy_json
from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import HybridConfig
from gpucluster.components._shared.edge import Adapted, at_edge, required, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components._shared.roles import session_manager_access
from gpucluster.config.errors import raise_for
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.naming import cluster_tags, with_name
from gpucluster.render.iam import (
    policy_json,
    roles_anywhere_trust_policy,
    site_munge_policy,
    ssm_hybrid_trust_policy,
)

TOKEN = "gpucluster:index:OnPremCredentials"
SOURCE = "OnPremCredentials args"


class OnPremCredentialsArgs(TypedDict, total=False):
    """Inputs of :class:`OnPremCredentials`: the ``hybrid`` settings and what the site's agent may act on."""

    cluster_name: Required[str]
    """Cluster name: prefix of resource names, the cluster tag the agent's rights are conditioned on. Required."""
    region: Required[str]
    """AWS region of the cluster. Required."""
    hybrid: Required[HybridConfig]
    """The ``gpucluster:hybrid`` settings (``credentials``, ``site``). Required."""
    munge_secret_arn: Required[pulumi.Input[str]]
    """The Secrets Manager secret the site writes its munge key into. Required. May be an Output."""
    munge_key_arn: Required[pulumi.Input[str]]
    """The KMS key that secret is encrypted with. Required. May be an Output."""
    burst_node_groups: Required[list[str]]
    """The node groups the agent launches and terminates (dynamic Slurm groups). Required."""
    launch_template_ids: Required[list[pulumi.Input[str]]]
    """Their launch template ids, in the order of ``burstNodeGroups``. Required. May be Outputs."""
    instance_types: Required[list[str]]
    """Their instance types, in the order of ``burstNodeGroups``: the only types the agent may launch. Required."""
    subnet_ids: Required[list[pulumi.Input[list[pulumi.Input[str]]]]]
    """Each group's subnets, in the order of ``burstNodeGroups``: the only subnets the agent may launch into.
    Required. May be Outputs."""
    security_group_ids: Required[pulumi.Input[list[pulumi.Input[str]]]]
    """The security groups of the groups' launch templates: the only ones their instances may have. Required. May
    be Outputs."""
    node_role_arn: Required[pulumi.Input[str]]
    """The cloud nodes' role, which the agent passes to EC2. Required. May be an Output."""
    node_instance_profile_arn: Required[pulumi.Input[str]]
    """The cloud nodes' instance profile (their launch templates'): the only one the agent may launch with.
    Required. May be an Output."""
    tags: dict[str, str]
    """Tags on every taggable child. Default: none."""


@dataclass(frozen=True)
class CredentialsWiring:
    """What the site's role may act on, resolved."""

    cluster_name: str
    region: str
    munge_secret_arn: pulumi.Input[str]
    munge_key_arn: pulumi.Input[str]
    rights: LaunchRights
    """The burst groups' launches: the dynamic ones the agent starts."""
    tags: dict[str, str] = field(default_factory=dict)


class OnPremCredentials(pulumi.ComponentResource):
    """IAM Roles Anywhere (or an SSM hybrid activation) for the node agent on the site's controller."""

    role_arn: pulumi.Output[str]
    """The role the site's agent works as."""
    trust_anchor_arn: pulumi.Output[str] | None
    """The Roles Anywhere trust anchor's ARN (``rolesanywhere``)."""
    profile_arn: pulumi.Output[str] | None
    """The Roles Anywhere profile's ARN (``rolesanywhere``)."""
    activation_id: pulumi.Output[str] | None
    """The SSM hybrid activation's id (``ssm``)."""
    activation_code: pulumi.Output[str] | None
    """The SSM hybrid activation's code, as a secret (``ssm``)."""

    def __init__(self, name: str, args: OnPremCredentialsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("OnPremCredentials"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        adopt(self, build_onprem_credentials(self, name, adapted.resolved, adapted.wiring))


_REQUIRED = {
    "cluster_name": "clusterName",
    "region": "region",
    "hybrid": "hybrid",
    "munge_secret_arn": "mungeSecretArn",
    "munge_key_arn": "mungeKeyArn",
    "burst_node_groups": "burstNodeGroups",
    "launch_template_ids": "launchTemplateIds",
    "instance_types": "instanceTypes",
    "subnet_ids": "subnetIds",
    "security_group_ids": "securityGroupIds",
    "node_role_arn": "nodeRoleArn",
    "node_instance_profile_arn": "nodeInstanceProfileArn",
}


def from_args(args: OnPremCredentialsArgs) -> Adapted[HybridSpec, CredentialsWiring]:
    """``args`` validated with the stack's ``hybrid`` model; errors name ``args.<field>``."""
    raise_for(required(args, _REQUIRED), SOURCE)
    plain = Inputs("OnPremCredentials").prepare(dict(args["hybrid"]), HybridConfig, "args.hybrid")
    spec = validate(HybridSpec, plain, SOURCE, "args.hybrid")
    wiring = CredentialsWiring(
        cluster_name=args["cluster_name"],
        region=args["region"],
        munge_secret_arn=args["munge_secret_arn"],
        munge_key_arn=args["munge_key_arn"],
        rights=LaunchRights(
            groups=tuple(args["burst_node_groups"]),
            instance_types=tuple(args["instance_types"]),
            launch_template_ids=tuple(args["launch_template_ids"]),
            subnet_ids=tuple(args["subnet_ids"]),
            security_group_ids=args["security_group_ids"],
            node_role_arn=args["node_role_arn"],
            node_profile_arn=args["node_instance_profile_arn"],
        ),
        tags=cluster_tags(args["cluster_name"], args.get("tags", {})),
    )
    return Adapted(spec, wiring)


@dataclass
class CredentialsParts:
    """What :func:`build_onprem_credentials` made: an ``OnPremCredentials``' outputs."""

    role_arn: pulumi.Output[str]
    trust_anchor_arn: pulumi.Output[str] | None = None
    profile_arn: pulumi.Output[str] | None = None
    activation_id: pulumi.Output[str] | None = None
    activation_code: pulumi.Output[str] | None = None


def build_onprem_credentials(
    parent: pulumi.ComponentResource, name: str, spec: HybridSpec, wiring: CredentialsWiring
) -> CredentialsParts:
    """The site agent's role and credentials of ``spec`` (resolved), children of ``parent``; registers its outputs."""
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    partition = aws.get_partition_output(opts=invoke).partition
    account = aws.get_caller_identity_output(opts=invoke).account_id
    cluster, site = wiring.cluster_name, spec.site
    tags = with_name(wiring.tags, f"{cluster}-{site}-agent")
    if spec.credentials.type == "rolesanywhere":
        role, parts = _roles_anywhere(parent, name, spec, cluster, tags)
    else:
        role, parts = _ssm_activation(parent, name, spec, wiring, tags, partition, account)
    child = pulumi.ResourceOptions(parent=parent)
    aws.iam.RolePolicy(
        f"{name}-agent",
        role=role.id,
        policy=agent_policy_json(wiring.rights, cluster=cluster, region=wiring.region, partition=partition, account=account),
        opts=child,
    )
    aws.iam.RolePolicy(
        f"{name}-munge",
        role=role.id,
        policy=pulumi.Output.all(wiring.munge_secret_arn, wiring.munge_key_arn).apply(
            lambda v: policy_json(site_munge_policy(secret_arn=v[0], kms_key_arn=v[1], region=wiring.region))
        ),
        opts=child,
    )
    parent.register_outputs(
        {
            "roleArn": parts.role_arn,
            "trustAnchorArn": parts.trust_anchor_arn,
            "profileArn": parts.profile_arn,
            "activationId": parts.activation_id,
            "activationCode": parts.activation_code,
        }
    )
    return parts


def _roles_anywhere(
    parent: pulumi.ComponentResource, name: str, spec: HybridSpec, cluster: str, tags: dict[str, str]
) -> tuple[aws.iam.Role, CredentialsParts]:
    """A Roles Anywhere trust anchor (the site's CA), the agent's role trusting it, and the profile."""
    creds, site, child = spec.credentials, spec.site, pulumi.ResourceOptions(parent=parent)
    source = (
        aws.rolesanywhere.TrustAnchorSourceArgs(
            source_type="AWS_ACM_PCA",
            source_data=aws.rolesanywhere.TrustAnchorSourceSourceDataArgs(acm_pca_arn=creds.acm_pca_arn),
        )
        if creds.acm_pca_arn is not None
        else aws.rolesanywhere.TrustAnchorSourceArgs(
            source_type="CERTIFICATE_BUNDLE",
            source_data=aws.rolesanywhere.TrustAnchorSourceSourceDataArgs(x509_certificate_data=creds.ca_certificate_pem),
        )
    )
    anchor = aws.rolesanywhere.TrustAnchor(
        f"{name}-anchor", name=f"{cluster}-{site}", enabled=True, source=source, tags=tags, opts=child
    )
    role = aws.iam.Role(
        f"{name}-role",
        description=f"Node agent on site {site}'s controller (IAM Roles Anywhere, CN {creds.certificate_cn})",
        assume_role_policy=anchor.arn.apply(
            lambda arn: roles_anywhere_trust_policy(trust_anchor_arn=arn, certificate_cn=creds.certificate_cn)
        ),
        max_session_duration=max(3600, creds.duration_seconds),
        tags=tags,
        opts=child,
    )
    profile = aws.rolesanywhere.Profile(
        f"{name}-profile",
        name=f"{cluster}-{site}",
        enabled=True,
        role_arns=[role.arn],
        duration_seconds=creds.duration_seconds,
        tags=tags,
        opts=child,
    )
    return role, CredentialsParts(role_arn=role.arn, trust_anchor_arn=anchor.arn, profile_arn=profile.arn)


def _ssm_activation(
    parent: pulumi.ComponentResource,
    name: str,
    spec: HybridSpec,
    wiring: CredentialsWiring,
    tags: dict[str, str],
    partition: pulumi.Output[str],
    account: pulumi.Output[str],
) -> tuple[aws.iam.Role, CredentialsParts]:
    """The agent's role for an SSM hybrid activation, and the activation (its code a secret)."""
    cluster, site, child = wiring.cluster_name, spec.site, pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        f"{name}-role",
        description=f"Node agent on site {site}'s controller (SSM hybrid activation)",
        assume_role_policy=pulumi.Output.all(partition, account).apply(
            lambda v: ssm_hybrid_trust_policy(partition=v[0], region=wiring.region, account=v[1])
        ),
        tags=tags,
        opts=child,
    )
    session_manager_access(f"{name}-ssm", role, child)
    activation = aws.ssm.Activation(
        f"{name}-activation",
        name=f"{cluster}-{site}",
        description=f"Registers site {site}'s Slurm controller for the {cluster} node agent",
        iam_role=role.name,
        registration_limit=1,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[role]),
    )
    # Whoever holds the code can register a machine as this role: a secret, never plain.
    code = pulumi.Output.secret(activation.activation_code)
    return role, CredentialsParts(role_arn=role.arn, activation_id=activation.id, activation_code=code)
