"""Login nodes of a Slurm cluster (docs/people.md, "Logging in"): where people log in, as themselves.

``build_login_nodes(parent, name, resolved, wiring)`` makes, under ``parent``:

- a role (``<name>-login-role``, Session Manager through ``ec2_ssm_role``) whose only other policies are
  :func:`gpucluster.render.slurm.iam_sessions.login_role_policy` (the munge key, the bind password with a
  directory, the shared host keys with SSH, the group's own terminating lifecycle action, the node package) and,
  with the cluster's monitoring on, the monitoring part's log shipping (the login role's own streams), and its
  profile;
- the security groups of :mod:`gpucluster.components.slurm._login_network` (docs/slurm.md, "Who can reach what, per node role");
- a launch template: IMDSv2 required, hop limit 1 (no container on a login node reaches the node's role), an
  encrypted gp3 root of ``root_volume_gib``, the gzipped cloud-config render made (``login_cloud_config``), and
  instance/volume/interface tags with ``gpucluster:cluster`` and ``gpucluster:role=login`` (the session policies
  select login nodes by these tags);
- the Auto Scaling group ``resolved.asg_name`` (min = max = desired = count, private subnets), with the
  terminating lifecycle hook ``<cluster>-login-grace``: heartbeat ``grace_seconds`` (``gracePeriodMinutes`` is
  3–120 minutes, inside the API's 30–7200 seconds), DefaultResult CONTINUE — the drain program completes it
  early when no user is left;
- with SSH: the shared host keys' secret ``gpucluster/<cluster>/login-host-keys`` (empty; the head node fills it
  once, protected and retained like the munge secret), the network load balancer and its parts; the group's health
  check is then ELB (a login node whose sshd died is replaced).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.roles import ec2_ssm_role
from gpucluster.components.compute._launch_template import UBUNTU_ROOT_DEVICE
from gpucluster.components.slurm._login_network import LoginGroups, login_balancer, login_groups
from gpucluster.config.naming import with_name
from gpucluster.render.core import gzip_b64
from gpucluster.render.iam import policy_json
from gpucluster.render.slurm.iam_sessions import ROLE_TAG, login_role_policy
from gpucluster.resolve.slurm.identity import ResolvedLogin

TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"


def host_key_secret_name(cluster: str) -> str:
    """The Secrets Manager name of the login nodes' shared SSH host keys."""
    return f"gpucluster/{cluster}/login-host-keys"


def lifecycle_hook_name(cluster: str) -> str:
    """The login group's terminating hook (the drain program's ``hook_name``)."""
    return f"{cluster}-login-grace"


@dataclass(frozen=True)
class LoginWiring:
    """What the login nodes take from the rest of the cluster; any of it may be an Output."""

    cluster: str
    region: str
    partition: pulumi.Input[str]
    account: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """The login nodes' private subnets."""
    user_data: pulumi.Input[str] | Callable[[pulumi.Output[str] | None], pulumi.Input[str]]
    """The login nodes' cloud-config text (render's ``login_cloud_config``), gzipped here; or a function of the host
    keys' secret ARN (``None`` without SSH) that renders it once that secret exists."""
    munge_secret_arn: pulumi.Input[str]
    tags: dict[str, str]
    protect: bool
    """Protect and retain the host keys' secret (the munge secret's rule)."""
    lb_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    """The load balancer's subnets (with SSH); default: the login nodes' subnets."""
    bind_secret_arn: str | None = None
    """A directory's bind password secret (read at boot by root)."""
    bind_kms_key_arn: str | None = None
    groups: LoginGroups | None = None
    """The security groups of the matrix when the cluster made them already (to attach their head and compute
    sides to its nodes); default: made here."""
    artifact_objects: pulumi.Input[Sequence[str]] | None = None
    """The artifact bucket's objects a login node reads (the node package, the declared users' object)."""


@dataclass
class LoginParts:
    """What :func:`build_login_nodes` made (the component's outputs)."""

    asg_name: str
    security_groups: LoginGroups
    role_arn: pulumi.Output[str]
    role_id: pulumi.Output[str]
    """The role's name (an inline policy's ``role``): the monitoring part gives it its log shipping."""
    launch_template_id: pulumi.Output[str]
    host_key_secret_arn: pulumi.Output[str] | None
    ssh_endpoint: pulumi.Output[str] | None


def _image(resolved: ResolvedLogin, parent: pulumi.Resource) -> pulumi.Input[str]:
    if resolved.image.source == "ami":
        return resolved.image.value
    return aws.ssm.get_parameter_output(name=resolved.image.value, opts=pulumi.InvokeOutputOptions(parent=parent)).value


def _identity(
    name: str, resolved: ResolvedLogin, wiring: LoginWiring, host_keys: pulumi.Output[str] | None, opts: pulumi.ResourceOptions
) -> tuple[aws.iam.Role, aws.iam.InstanceProfile]:
    cluster, tags = wiring.cluster, with_name(wiring.tags, f"{wiring.cluster}-login")
    role = ec2_ssm_role(f"{name}-login", description=f"Login nodes of Slurm cluster {cluster}", tags=tags, opts=opts)
    asg_arn = pulumi.Output.all(wiring.partition, wiring.account).apply(
        lambda v: f"arn:{v[0]}:autoscaling:{wiring.region}:{v[1]}:autoScalingGroup:*:autoScalingGroupName/{resolved.asg_name}"
    )
    aws.iam.RolePolicy(
        f"{name}-login-access",
        role=role.id,
        policy=pulumi.Output.all(wiring.munge_secret_arn, asg_arn, host_keys, wiring.artifact_objects).apply(
            lambda v: policy_json(
                login_role_policy(
                    munge_secret_arn=str(v[0]),
                    asg_arn=str(v[1]),
                    bind_secret_arn=wiring.bind_secret_arn,
                    bind_kms_key_arn=wiring.bind_kms_key_arn,
                    host_key_secret_arn=v[2],
                    region=wiring.region,
                    artifact_objects=[str(a) for a in v[3] or ()],
                )
            )
        ),
        opts=opts,
    )
    return role, aws.iam.InstanceProfile(f"{name}-login-profile", role=role.name, tags=tags, opts=opts)


def _launch_template(
    name: str,
    resolved: ResolvedLogin,
    wiring: LoginWiring,
    user_data: pulumi.Input[str],
    profile: aws.iam.InstanceProfile,
    sg_id: pulumi.Input[str],
    parent: pulumi.Resource,
) -> aws.ec2.LaunchTemplate:
    tags = with_name({**wiring.tags, ROLE_TAG: "login"}, resolved.asg_name)
    return aws.ec2.LaunchTemplate(
        f"{name}-login-lt",
        image_id=_image(resolved, parent),
        instance_type=resolved.instance_type,
        iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=profile.arn),
        vpc_security_group_ids=[sg_id],
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1, instance_metadata_tags="disabled"
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=UBUNTU_ROOT_DEVICE,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=resolved.root_volume_gib, volume_type="gp3", encrypted="true", delete_on_termination="true"
                ),
            )
        ],
        user_data=pulumi.Output.from_input(user_data).apply(gzip_b64),
        update_default_version=True,
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
            for kind in ("instance", "volume", "network-interface")
        ],
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def build_login_nodes(parent: pulumi.Resource, name: str, resolved: ResolvedLogin, wiring: LoginWiring) -> LoginParts:
    """The login nodes of ``resolved`` under ``parent`` (the module's list)."""
    cluster, tags = wiring.cluster, wiring.tags
    opts = pulumi.ResourceOptions(parent=parent)
    groups = wiring.groups or login_groups(
        name, cluster=cluster, vpc_id=wiring.vpc_id, srun_ports=resolved.srun_ports, tags=tags, opts=opts
    )
    host_keys = balancer = None
    if resolved.ssh is not None:
        keep = pulumi.ResourceOptions(parent=parent, protect=wiring.protect, retain_on_delete=wiring.protect)
        host_keys = aws.secretsmanager.Secret(
            f"{name}-login-host-keys",
            name=host_key_secret_name(cluster),
            description=f"SSH host keys of the login nodes of {cluster}: made by its head node, read by login nodes",
            recovery_window_in_days=30 if wiring.protect else 0,
            tags=with_name(tags, host_key_secret_name(cluster)),
            opts=keep,
        )
        balancer = login_balancer(
            name,
            lb_name=resolved.asg_name,
            ssh=resolved.ssh,
            vpc_id=wiring.vpc_id,
            subnet_ids=wiring.lb_subnet_ids if wiring.lb_subnet_ids is not None else wiring.subnet_ids,
            login_group=groups.login,
            tags=tags,
            opts=opts,
        )
    host_key_arn = host_keys.arn if host_keys is not None else None
    role, profile = _identity(name, resolved, wiring, host_key_arn, opts)
    user_data = wiring.user_data(host_key_arn) if callable(wiring.user_data) else wiring.user_data
    template = _launch_template(name, resolved, wiring, user_data, profile, groups.login.id, parent)
    aws.autoscaling.Group(
        f"{name}-login-asg",
        name=resolved.asg_name,
        min_size=resolved.count,
        max_size=resolved.count,
        desired_capacity=resolved.count,
        vpc_zone_identifiers=wiring.subnet_ids,
        launch_template=aws.autoscaling.GroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
        health_check_type="ELB" if balancer is not None else "EC2",
        target_group_arns=[balancer.target_group.arn] if balancer is not None else None,
        initial_lifecycle_hooks=[
            aws.autoscaling.GroupInitialLifecycleHookArgs(
                name=lifecycle_hook_name(cluster),
                lifecycle_transition=TERMINATING,
                heartbeat_timeout=resolved.grace_seconds,
                default_result="CONTINUE",
            )
        ],
        tags=[
            aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=False)
            for k, v in sorted(with_name({**tags, ROLE_TAG: "login"}, resolved.asg_name).items())
        ],
        opts=opts,
    )
    return LoginParts(
        asg_name=resolved.asg_name,
        security_groups=groups,
        role_arn=role.arn,
        role_id=role.id,
        launch_template_id=template.id,
        host_key_secret_arn=host_key_arn,
        ssh_endpoint=balancer.dns_name if balancer is not None else None,
    )
