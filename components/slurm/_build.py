"""The builder of :class:`~gpucluster.components.slurm.slurm_cluster.SlurmCluster`: the agent package, the munge
secret, the compute nodes' identity and launch templates, the head node and the controller's name, from the resolved
cluster and its :class:`~gpucluster.components.slurm._args.SlurmWiring`, under the parent it is given (the ``SlurmCluster`` itself,
or ``GpuCluster``'s part of that type)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.agent_iam import LaunchRights
from gpucluster.components._shared.inputs import with_id
from gpucluster.components._shared.roles import ec2_ssm_role
from gpucluster.components.compute._launch_template import NodeWiring
from gpucluster.components.hybrid._security import hybrid_node_security_group
from gpucluster.components.images.node_images import slurm_node_images
from gpucluster.components.slurm._args import SlurmBuild, SlurmWiring
from gpucluster.components.slurm._artifact import AgentArtifact, agent_artifact
from gpucluster.components.slurm._head_network import placed_head_groups
from gpucluster.components.slurm._head_node import head_identity, head_node
from gpucluster.components.slurm._hybrid import site_munge_key
from gpucluster.components.slurm._node_group import SlurmNodeGroup
from gpucluster.components.slurm._people import (
    PeopleParts,
    PeopleWiring,
    attach_role_statements,
    build_people,
    expose_people,
    head_host_key_statement,
    home_server_of,
    login_renderer,
    people_context,
    people_groups,
    role_statements,
    with_home,
)
from gpucluster.components.slurm._spot_events import spot_events
from gpucluster.components.slurm._teardown import AgentTeardown
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.naming import with_name
from gpucluster.render.hybrid.compute import with_munge_secret
from gpucluster.render.iam import policy_json, slurm_node_policy, spot_reader_policy
from gpucluster.render.slurm.agent import NODE_MAPS_PREFIX, needs_spot_events, with_artifact_bucket
from gpucluster.render.slurm.iam_sessions import ROLE_TAG, statements_policy
from gpucluster.render.slurm.identity import users_bundle
from gpucluster.render.slurm.image import hook_objects
from gpucluster.render.slurm.names import SlurmContext, controller_address, dns_zone, munge_secret_name
from gpucluster.render.slurm.registries import ecr_statements
from gpucluster.resolve.cluster import ResolvedCluster


def build_slurm_cluster(
    parent: pulumi.ComponentResource, name: str, resolved: ResolvedCluster, wiring: SlurmWiring
) -> SlurmParts:
    """The Slurm cluster of ``resolved`` placed by ``wiring``, children of ``parent``; registers ``parent``'s outputs."""
    parts = SlurmParts(parent)
    parts._create(name, SlurmBuild(resolved, wiring))
    return parts


class SlurmParts:
    """What :func:`build_slurm_cluster` made: a ``SlurmCluster``'s outputs and its node groups."""

    controller_address: str
    munge_secret_arn: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    launch_template_ids: pulumi.Output[dict[str, str]]
    session_documents: dict[str, str]
    """Session document per declared user with a principal, the shared one under ``"*"``."""
    session_policy_arns: dict[str, pulumi.Output[str]]
    session_commands: dict[str, str]
    """``aws ssm start-session …`` per document key: a login node found by its tags when run."""
    login_asg_name: str | None
    ssh_endpoint: pulumi.Output[str] | None
    head_security_group_id: pulumi.Output[str] | None
    """The head node's own security group (``_head_network``); none for a standalone SlurmCluster or a site's
    controller."""
    home_storage: SharedStorage | None
    """The shared ``/home``'s mount shape (server, ``/fsx/home`` on ``/home``, nfs4), for the nodes' user data."""

    def __init__(self, parent: pulumi.ComponentResource) -> None:
        self._parent = parent

    def _create(self, name: str, args: SlurmBuild) -> None:
        slurm = args.slurm
        ctx = people_context(SlurmContext.of(args.resolved), args.wiring.people)
        cluster = args.cluster_name
        child = pulumi.ResourceOptions(parent=self._parent)
        protect = args.section.protect
        tags = dict(args.wiring.tags)
        # --- the agent package, in a private bucket the head node (and compute nodes) read ------------
        artifact = agent_artifact(name, cluster, tags, child, users=users_bundle(args.wiring.people.identity))
        invoke = pulumi.InvokeOutputOptions(parent=self._parent)
        partition = aws.get_partition_output(opts=invoke).partition
        account = aws.get_caller_identity_output(opts=invoke).account_id

        secret = self._munge_secret(name, args, protect)
        hybrid = args.wiring.hybrid
        self.munge_secret_arn = secret.arn
        self._groups = people_groups(name, args.wiring.people, cluster=cluster, vpc_id=args.wiring.vpc_id, tags=tags, opts=child)
        render_login = login_renderer(ctx, args.wiring.people, artifact.bucket.bucket, secret.arn)
        reads = artifact.bucket.arn.apply(artifact.read_arns)  # the package and the users: what a login node reads
        at = (cluster, args.region, partition, account, args.wiring.vpc_id, secret.arn, tags, protect, child, render_login, reads)
        self._people: PeopleParts = build_people(self._parent, name, args.wiring.people, self._groups, PeopleWiring(*at))
        self._login_role_id = self._people.login.role_id if self._people.login is not None else None
        home_server = home_server_of(self._people)
        # Compute nodes were rendered before the bucket, the munge secret and /home existed: their names replace stand-ins.
        self.compute_user_data: dict[str, pulumi.Output[str]] = {
            n: pulumi.Output.all(u, artifact.bucket.bucket, secret.arn, home_server).apply(
                lambda v: with_home(
                    with_munge_secret(with_artifact_bucket(str(v[0]), str(v[1])), args.region, str(v[2])), args.region, v[3]
                )
            )
            for n, u in args.wiring.user_data.items()
        }
        """User data per Slurm node group (node setup, storage mount, slurmd joining this cluster), gzip-ready
        cloud-config text. The launch templates carry it; a program that builds its own ``GpuNodeGroup`` for a
        static group (an Auto Scaling group of its own) passes ``compute_user_data[group]`` as its user data and
        tags its instances with this cluster's and the group's tags, and the agent names them."""

        images = slurm_node_images(self._parent, name, args, ctx, artifact, partition)
        node_profile = self._compute_nodes(name, args, secret, artifact, images)

        # The agent launches dynamic groups only (static ones belong to their Auto Scaling groups).
        dynamic = [g.name for g in args.node_groups if slurm.group_settings(g.name).mode == "dynamic"]
        self.head_instance_id = self.head_private_ip = self.head_role_arn = None
        self.head_security_group_id = None
        self._head_role_id: pulumi.Output[str] | None = None
        self.data_volume_id = self.head_user_data = None
        head_ip: pulumi.Output[str] | None = None
        if hybrid is None:
            head_ip = self._head(name, args, ctx, secret.arn, artifact, dynamic, partition, account, protect)
        else:
            # The site's own slurmctld: cloud nodes fetch their configuration from it (``slurmd --conf-server``).
            if hybrid.controller is None:
                raise ValueError("a site without hybrid.controller has no slurmctld for the cloud nodes to join")
            self.controller_address = hybrid.controller.address

        # --- deleting the cluster terminates the agent's instances first -------------------------------
        self._teardown = AgentTeardown(
            name,
            cluster=cluster,
            region=args.region,
            after=[*self.node_groups.values(), node_profile],
            network={"securityGroupIds": args.wiring.security_group_ids, "subnetIds": args.wiring.node_group_subnet_ids},
            parent=self._parent,
        )
        if head_ip is not None:
            self._controller_record(name, args, head_ip)
        groups = list(self.node_groups)
        self.launch_template_ids = pulumi.Output.all(*[g.launch_template_id for g in self.node_groups.values()]).apply(
            lambda ids: dict(zip(groups, ids, strict=True))
        )
        self._register()

    def _munge_secret(self, name: str, args: SlurmBuild, protect: bool) -> aws.secretsmanager.Secret:
        """The munge key's secret: empty; the head node (or a hybrid site, with a key of its own) writes the key."""
        cluster, tags, hybrid = args.cluster_name, dict(args.wiring.tags), args.wiring.hybrid
        child = pulumi.ResourceOptions(parent=self._parent)
        keep = pulumi.ResourceOptions(parent=self._parent, protect=protect, retain_on_delete=protect)
        self.munge_key_arn: pulumi.Output[str] | None = None
        """The KMS key of a hybrid site's munge secret (hybrid mode); none otherwise (Secrets Manager's own key)."""
        if hybrid is not None:
            site_key = site_munge_key(name, cluster=cluster, site=hybrid, tags=tags, keep=keep, child=child)
            secret, self.munge_key_arn = site_key.secret, site_key.key.arn
        else:
            secret = aws.secretsmanager.Secret(
                f"{name}-munge-key",
                name=munge_secret_name(cluster),
                description=f"munge key of Slurm cluster {cluster}: made by its head node, read by every node",
                recovery_window_in_days=30 if protect else 0,
                tags=with_name(tags, f"{cluster}-munge-key"),
                opts=keep,
            )
        return secret

    def _compute_nodes(
        self,
        name: str,
        args: SlurmBuild,
        secret: aws.secretsmanager.Secret,
        artifact: AgentArtifact,
        images: dict[str, pulumi.Output[str]],
    ) -> aws.iam.InstanceProfile:
        """The compute nodes' role (Session Manager, the munge key, the agent package), instance profile, security
        groups (a hybrid site's Slurm rules added) and launch templates; the instance profile."""
        slurm, cluster, tags = args.slurm, args.cluster_name, dict(args.wiring.tags)
        child = pulumi.ResourceOptions(parent=self._parent)
        node_role = ec2_ssm_role(
            f"{name}-node",
            description=f"Slurm compute nodes of {cluster}",
            tags=with_name(tags, f"{cluster}-slurm-node"),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-node-munge",
            role=node_role.id,
            policy=pulumi.Output.all(secret.arn, artifact.bucket.arn, self.munge_key_arn).apply(
                lambda v: policy_json(
                    slurm_node_policy(
                        secret_arn=v[0],
                        bundle_arn=f"{v[1]}/{artifact.key}",
                        node_maps_arn=f"{v[1]}/{NODE_MAPS_PREFIX}*",
                        users_arn=artifact.users_arn(v[1]),
                        kms_key_arn=v[2],
                        region=args.region,
                        hook_objects=[uri for g in args.node_groups for uri in hook_objects(g.entry.hooks)],
                    )
                )
            ),
            opts=child,
        )
        attach_role_statements(f"{name}-node-people", node_role, role_statements(args.wiring.people, args.region), child)
        registries = slurm.containers.registries if any(g.containers for g in args.node_groups) else ()
        attach_role_statements(f"{name}-node-ecr", node_role, ecr_statements(registries), child)
        node_profile = aws.iam.InstanceProfile(
            f"{name}-node-profile", role=node_role.name, tags=with_name(tags, f"{cluster}-slurm-node"), opts=child
        )
        self.node_role_arn = node_role.arn
        self._node_role_id: pulumi.Output[str] = node_role.id
        self.node_profile_arn: pulumi.Output[str] = node_profile.arn
        """The compute nodes' instance profile: the only one the node agent may launch with."""
        self.node_groups: dict[str, SlurmNodeGroup] = {}
        """The compute nodes' launch template (and, for static groups, Auto Scaling group) per node group."""
        security_group_ids = self._compute_security_groups(name, args, child)
        for g in args.node_groups:
            static = slurm.group_settings(g.name).mode == "static"
            self.node_groups[g.name] = SlurmNodeGroup(
                f"{name}-{g.name}",
                g,
                NodeWiring(
                    cluster_name=cluster,
                    subnet_ids=args.wiring.node_group_subnet_ids[g.name],
                    security_group_ids=security_group_ids,
                    user_data=self.compute_user_data.get(g.name),
                    instance_profile_arn=node_profile.arn,
                    tags={**tags, ROLE_TAG: "compute"},
                    inputs=args.wiring.inputs,
                    image_id=images.get(g.name),  # the baked image (slurm.images), else the group's own
                ),
                static=static,
                opts=child,
            )
        self.node_security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]] = security_group_ids
        """The compute nodes' security groups (their launch templates'): the only ones the agent may launch into."""
        self._specs, self._subnets = {g.name: g.spec for g in args.node_groups}, args.wiring.node_group_subnet_ids
        return node_profile

    def _compute_security_groups(
        self, name: str, args: SlurmBuild, child: pulumi.ResourceOptions
    ) -> pulumi.Input[Sequence[pulumi.Input[str]]]:
        """The compute nodes' security groups: the given ones, a hybrid site's Slurm rules, the people's compute side."""
        wiring = args.wiring
        security_group_ids = wiring.security_group_ids
        self.hybrid_security_group_id: pulumi.Output[str] | None = None
        """The Slurm rules between the cloud nodes and a hybrid site (hybrid mode); none otherwise."""
        if wiring.hybrid is not None:
            site_sg = hybrid_node_security_group(
                name, wiring.hybrid, vpc_id=wiring.vpc_id, cluster=args.cluster_name, tags=dict(wiring.tags), opts=child
            )
            self.hybrid_security_group_id = site_sg.id
            security_group_ids = with_id(wiring.security_group_ids, site_sg.id)
        if self._groups is not None:
            security_group_ids = with_id(security_group_ids, self._groups.compute_side.id)
        return security_group_ids

    def _register(self) -> None:
        self._parent.register_outputs(
            {
                "headInstanceId": self.head_instance_id,
                "headPrivateIp": self.head_private_ip,
                "controllerAddress": self.controller_address,
                "mungeSecretArn": self.munge_secret_arn,
                "headRoleArn": self.head_role_arn,
                "nodeRoleArn": self.node_role_arn,
                "dataVolumeId": self.data_volume_id,
                "nodeGroups": {n: ng.launch_template_id for n, ng in self.node_groups.items()},
                "headUserData": self.head_user_data,
                "launchTemplateIds": self.launch_template_ids,
                **self._people_outputs(),
            }
        )

    def _people_outputs(self) -> dict[str, object]:
        """The people's outputs, present when configured; kept as attributes for the stack's outputs."""
        return expose_people(self, self._people)

    def _head(
        self,
        name: str,
        args: SlurmBuild,
        ctx: SlurmContext,
        secret_arn: pulumi.Output[str],
        artifact: AgentArtifact,
        dynamic: list[str],
        partition: pulumi.Output[str],
        account: pulumi.Output[str],
        protect: bool,
    ) -> pulumi.Output[str]:
        """The head node (slurmctld, the agent); its private address."""
        tags, child = dict(args.wiring.tags), pulumi.ResourceOptions(parent=self._parent)
        # --- the head node: its identity, its own interface and data volume, then the instance ---------
        head_role, head_profile = head_identity(
            name,
            ctx=ctx,
            tags=tags,
            partition=partition,
            account=account,
            secret_arn=secret_arn,
            artifact=artifact,
            rights=self.launch_rights(dynamic),
            child=child,
        )
        self.head_role_arn = head_role.arn
        self._head_role_id = head_role.id
        attach_role_statements(f"{name}-head-people", head_role, role_statements(args.wiring.people, args.region), child)
        host_keys = head_host_key_statement(self._people)
        if host_keys is not None:
            aws.iam.RolePolicy(
                f"{name}-head-host-keys",
                role=head_role.id,
                policy=host_keys.apply(lambda st: policy_json(statements_policy(st))),
                opts=child,
            )
        spot_queue = spot_events(name, ctx.cluster, tags, child) if needs_spot_events(ctx) else None
        if spot_queue is not None:  # the spot-watch service's queue: the head node may read and delete, nothing else
            reader = spot_queue.arn.apply(lambda arn: policy_json(spot_reader_policy(arn)))
            aws.iam.RolePolicy(f"{name}-head-spot-events", role=head_role.id, policy=reader, opts=child)
        head_groups, self.head_security_group_id = placed_head_groups(name, args, ctx, self._parent)
        if self._groups is not None:
            head_groups = with_id(head_groups, self._groups.head_side.id)
        head = head_node(
            name,
            ctx=ctx,
            image_parameter=args.section.head_image_parameter,
            inputs=args.wiring.inputs,
            tags=tags,
            protect=protect,
            subnet_id=args.wiring.head_subnet_id,
            security_group_ids=head_groups,
            profile=head_profile,
            artifact=artifact,
            node_groups=self.node_groups,
            node_group_subnet_ids=args.wiring.node_group_subnet_ids,
            shared_storage=args.wiring.shared_storage,
            parent=self._parent,
            home_server=home_server_of(self._people),
            host_key_secret_arn=self._people.login.host_key_secret_arn if self._people.login is not None else None,
            spot_queue_url=spot_queue.url if spot_queue is not None else None,
            metrics_workspace_id=args.wiring.metrics_workspace_id,
        )
        self.data_volume_id = head.data_volume_id
        self.head_user_data = head.user_data
        self.head_instance_id = head.instance_id
        self.head_private_ip = head.private_ip
        return head.private_ip

    def launch_rights(self, groups: Sequence[str]) -> LaunchRights:
        """What the node agent may launch for ``groups`` (this cluster's dynamic groups): their templates, instance
        types and subnets, the compute nodes' security groups, role and instance profile."""
        return LaunchRights(
            groups=tuple(groups),
            instance_types=tuple(self._specs[g].instance_type for g in groups),
            launch_template_ids=tuple(self.node_groups[g].launch_template_id for g in groups),
            subnet_ids=tuple(self._subnets[g] for g in groups),
            security_group_ids=self.node_security_group_ids,
            node_role_arn=self.node_role_arn,
            node_profile_arn=self.node_profile_arn,
        )

    def _controller_record(self, name: str, args: SlurmBuild, head_ip: pulumi.Output[str]) -> None:
        """Where compute nodes find slurmctld: a private zone of the cluster's VPC."""
        cluster, tags, child = args.cluster_name, dict(args.wiring.tags), pulumi.ResourceOptions(parent=self._parent)
        zone_record = aws.route53.Zone(
            f"{name}-dns",
            name=dns_zone(cluster),
            comment=f"Private names of Slurm cluster {cluster}",
            vpcs=[aws.route53.ZoneVpcArgs(vpc_id=args.wiring.vpc_id)],
            force_destroy=True,
            tags=with_name(tags, dns_zone(cluster)),
            opts=child,
        )
        self.controller_address = controller_address(cluster)
        aws.route53.Record(
            f"{name}-slurmctld",
            zone_id=zone_record.zone_id,
            name=self.controller_address,
            type="A",
            ttl=60,
            records=[head_ip],
            opts=child,
        )
