"""The compact tree shows a resource that only serves one sibling on that sibling's line: an instance's own network
interface, a role's policy attachments. Every name stays in the text; nothing shared or protected is folded."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpucluster.tools.plan.show.tree import tree_lines


class Box(pulumi.ComponentResource):
    def __init__(self, name: str, program) -> None:
        super().__init__("test:index:Box", name, None, None)
        program(pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def lines(run_components, program) -> list[str]:
    return tree_lines(run_components(lambda: Box("box", program)))


def test_an_instances_own_interface_and_a_roles_attachments_share_their_line(run_components):
    def program(child):
        eni = aws.ec2.NetworkInterface("own-eni", subnet_id="subnet-0aaa1111", security_groups=["sg-0123"], opts=child)
        aws.ec2.Instance("host", ami="ami-1", instance_type="t3.micro", opts=child,
                         network_interfaces=[aws.ec2.InstanceNetworkInterfaceArgs(device_index=0, network_interface_id=eni.id)])  # fmt: skip
        role = aws.iam.Role("r", assume_role_policy="{}", opts=child)
        aws.iam.RolePolicyAttachment("r-ssm", role=role.name, policy_arn="arn:aws:iam::aws:policy/X", opts=child)

    out = lines(run_components, program)
    (instance,) = [line for line in out if "aws:ec2:Instance" in line]
    assert "interface own-eni (subnet subnet-0aaa1111 · security groups sg-0123)" in instance
    assert not any("aws:ec2:NetworkInterface" in line for line in out)
    (role,) = [line for line in out if "aws:iam:Role " in line]
    assert "· + r-ssm (arn:aws:iam::aws:policy/X)" in role
    assert not any("RolePolicyAttachment" in line for line in out)


def test_an_interface_two_instances_name_keeps_its_own_line(run_components):
    def program(child):
        eni = aws.ec2.NetworkInterface("shared-eni", subnet_id="subnet-0aaa1111", opts=child)
        for n in ("a", "b"):
            aws.ec2.Instance(n, ami="ami-1", instance_type="t3.micro", opts=child,
                             network_interfaces=[aws.ec2.InstanceNetworkInterfaceArgs(device_index=n == "b", network_interface_id=eni.id)])  # fmt: skip

    out = lines(run_components, program)
    assert any("aws:ec2:NetworkInterface  shared-eni" in line for line in out)


def test_a_roles_inline_policy_shares_its_line(run_components):
    def program(child):
        role = aws.iam.Role("r", assume_role_policy="{}", opts=child)
        aws.iam.RolePolicy("r-read", role=role.id, policy='{"Version": "2012-10-17", "Statement": []}', opts=child)

    out = lines(run_components, program)
    (role,) = [line for line in out if "aws:iam:Role " in line]
    assert "· + r-read" in role and not any("aws:iam:RolePolicy" in line for line in out)
