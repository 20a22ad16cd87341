"""The storage setup host: a small instance that is the Lustre file system's admin host where no Slurm head node is.

FSx squashes root on every client but its no-squash clients, and a new file system's root belongs to root: without a
host that keeps root nobody could create a directory. This one mounts the file system (``nosuid,nodev``, the nodes'
own script), creates the directories of ``storage.lustre.directories`` and ``/teams/<team>`` for every team (owned
by the team's UID and GID, mode 2770), and powers off.

- Its address is the no-squash client: it sits behind a network interface of its own (made before the file system,
  so the file system can name it; the instance, made after, attaches it), and keeps that address when the
  instance is replaced.
- It is sealed: no instance role (so no Session Manager, no Run Command, no credentials in its metadata), no key
  pair, no ingress but Lustre from the file system. What runs as root there is its user data, which only a change
  to the stack (``ec2:ModifyInstanceAttribute`` or ``pulumi up``) can alter: the root over every team's data is not
  one ``ssm:StartSession`` away.
- The instance is replaced when its user data changes (a directory or a team added or removed), so the setup runs
  again; starting the stopped instance runs it again too (it runs at every boot). Its log is on the console
  (``aws ec2 get-console-output``).
- Amazon Linux 2023 (its ``lustre-client`` package matches its kernel), ``t3.micro``, IMDSv2 only, an encrypted
  root volume, a private subnet (the file system's), no public address, a security group of its own that only
  talks Lustre to the file system and HTTPS out (packages).
- It shuts itself down (instance-initiated shutdown: stop), so it costs its 8 GiB volume while stopped and a few
  minutes of t3.micro per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.security import BOTH_WAYS, allow
from gpucluster.config.naming import with_name
from gpucluster.render.compute.node import LustreMount
from gpucluster.render.core import render_cloud_config
from gpucluster.render.storage.setup import storage_setup_cloud_config, storage_setup_title
from gpucluster.resolve.storage.team import TeamDirectory

INSTANCE_TYPE = "t3.micro"
"""The smallest x86 type of the current generation offered in (nearly) every zone; the setup runs for minutes."""
IMAGE_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
"""AWS's public SSM parameter of the latest Amazon Linux 2023 image (the mount script installs ``lustre-client``)."""
ROOT_VOLUME_GIB = 8
LUSTRE_PORTS = ((988, 988), (1018, 1023))  # as LustreStorage's (FSx user guide, "File system access control")


@dataclass(frozen=True)
class SetupNetwork:
    """What exists before the file system: the host's security group and its network interface (its address)."""

    security_group_id: pulumi.Output[str]
    network_interface_id: pulumi.Output[str]
    private_ip: pulumi.Output[str]


@dataclass(frozen=True)
class SetupHost:
    """What the cluster exposes of its storage setup host."""

    instance_id: pulumi.Output[str]
    private_ip: pulumi.Output[str]
    user_data: pulumi.Output[str]


def setup_network(
    name: str,
    *,
    cluster: str,
    vpc_id: pulumi.Input[str],
    subnet_id: pulumi.Input[str],
    extra_security_group_ids: Sequence[pulumi.Input[str]],
    tags: dict[str, str],
    parent: pulumi.Resource,
) -> SetupNetwork:
    """The host's own security group (no ingress but the file system's Lustre traffic) and network interface, in the
    file system's subnet. ``extra_security_group_ids``: the nodes' groups, when the file system is an existing one,
    whose own group is not known here: it admits the host as it admits the nodes."""
    child = pulumi.ResourceOptions(parent=parent)
    host_tags = with_name(tags, f"{cluster}-storage-setup")
    sg = aws.ec2.SecurityGroup(
        name,
        vpc_id=vpc_id,
        description=f"Storage setup host of {cluster}: Lustre to the file system, HTTPS out",
        tags=host_tags,
        opts=child,
    )
    allow(f"{name}-out-https", "out", sg.id, cidr="0.0.0.0/0", protocol="tcp", ports=(443, 443),
          description="HTTPS out: packages, Session Manager", tags=host_tags, opts=child)  # fmt: skip
    eni = aws.ec2.NetworkInterface(
        f"{name}-eni",
        subnet_id=subnet_id,
        security_groups=[sg.id, *extra_security_group_ids],
        description=f"Storage setup host of {cluster}: its address is a no-squash client of the file system",
        tags=host_tags,
        opts=child,
    )
    return SetupNetwork(security_group_id=sg.id, network_interface_id=eni.id, private_ip=eni.private_ip)


def setup_host(
    name: str,
    *,
    cluster: str,
    net: SetupNetwork,
    file_system_security_group_id: pulumi.Input[str] | None,
    mount: LustreMount,
    lustre_values: pulumi.Output[list[str]],
    directories: Sequence[TeamDirectory],
    tags: dict[str, str],
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
) -> SetupHost:
    """The Lustre rules towards the file system's group (a new file system's; ``None`` for an existing one, reached
    through the nodes' groups) and the instance on ``net``'s interface, with no instance role.
    ``mount`` holds stand-ins for what AWS decides; ``lustre_values`` (DNS name, mount name, id) replaces them."""
    child = pulumi.ResourceOptions(parent=parent)
    host_tags = with_name(tags, f"{cluster}-storage-setup")
    if file_system_security_group_id is not None:
        for low, high in LUSTRE_PORTS:
            for direction, word in BOTH_WAYS:
                allow(f"{name}-{direction}-lustre-{low}", direction, net.security_group_id,
                      peer_security_group_id=file_system_security_group_id, protocol="tcp", ports=(low, high),
                      description=f"Lustre {low}-{high} {word} the file system", tags=host_tags, opts=child)  # fmt: skip

    def render(values: list[str]) -> str:
        real = LustreMount(**{**mount.__dict__, "dns_name": values[0], "mount_name": values[1], "file_system": values[2]})
        return render_cloud_config(storage_setup_title(cluster), storage_setup_cloud_config(cluster, real, directories))

    user_data = lustre_values.apply(render)
    image = aws.ssm.get_parameter_output(name=IMAGE_PARAMETER, opts=pulumi.InvokeOutputOptions(parent=parent)).value
    instance = aws.ec2.Instance(
        name,
        ami=image,
        instance_type=INSTANCE_TYPE,
        network_interfaces=[aws.ec2.InstanceNetworkInterfaceArgs(device_index=0, network_interface_id=net.network_interface_id)],
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1, instance_metadata_tags="disabled"
        ),
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
            volume_type="gp3", volume_size=ROOT_VOLUME_GIB, encrypted=True, delete_on_termination=True
        ),
        credit_specification=aws.ec2.InstanceCreditSpecificationArgs(cpu_credits="standard"),
        instance_initiated_shutdown_behavior="stop",
        user_data=user_data,
        user_data_replace_on_change=True,
        tags=host_tags,
        volume_tags=host_tags,
        opts=pulumi.ResourceOptions(
            parent=parent,
            # After the data repository associations: their directories exist (it sets owner and mode on them).
            depends_on=list(depends_on),
            # The interface belongs to one instance at a time; a new AMI in the parameter does not replace it.
            delete_before_replace=True,
            ignore_changes=["ami"],
        ),
    )
    return SetupHost(instance_id=instance.id, private_ip=net.private_ip, user_data=user_data)


class HeadNodeAddress:
    """The Slurm head node's address as a no-squash client of the file system, before either exists: the file
    system needs it, and SlurmCluster makes the head node's interface after the file system (its user data mounts
    it). A deferred Output the cluster resolves once SlurmCluster exists; the file system then depends on the
    interface, which depends on nothing of the file system's, so there is no cycle."""

    def __init__(self) -> None:
        self.ip, self._resolve = pulumi.deferred_output()

    def resolve(self, private_ip: pulumi.Output[str] | None) -> None:
        if private_ip is None:
            raise AssertionError("the stack has a head node that mounts the file system but no head node address")
        self._resolve(private_ip)
        self._resolved = True

    def check_resolved(self) -> None:
        """Raise if the address was never given (the file system would wait for it for ever)."""
        if not getattr(self, "_resolved", False):
            raise AssertionError("the head node's address was never given to the Lustre file system's root squash")
