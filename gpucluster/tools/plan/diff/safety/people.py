"""The update-safety entries of a Slurm cluster's people (``components/slurm/login_nodes.py``,
``_sessions.py``, ``components/storage/home_storage.py``), merged into :data:`gpucluster.tools.plan.diff.safety.TABLE`.

Sources are terraform-provider-aws' force-new schema fields (which pulumi-aws bridges), as for the rest of the table.
The home file system and its volume hold every user's files: replacing either loses them (both are protected and
retained by default, like the Lustre file system).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucluster.tools.plan.diff.safety.types import TF, Safety


def _tf(path: str) -> str:
    return TF + path


HOME_FILES = "every file under /home (the users' home directories)"

PEOPLE_TABLE: Mapping[str, Safety] = {
    # --- /home on FSx for OpenZFS ---------------------------------------------------------------------
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem": Safety(
        _tf("fsx/openzfs_file_system.go"),
        replace_on=(
            "backupId",
            "deploymentType",
            "kmsKeyId",
            "securityGroupIds",
            "storageType",
            "subnetIds",
            "preferredSubnetId",
            "endpointIpAddressRange",
            "rootVolumeConfiguration.copyTagsToSnapshots",
        ),
        # FSx grows an OpenZFS file system's storage, never shrinks it
        replace_on_decrease=("storageCapacity",),
        holds_data=HOME_FILES,
    ),
    "aws:fsx/openZfsVolume:OpenZfsVolume": Safety(
        _tf("fsx/openzfs_volume.go"),
        replace_on=("parentVolumeId", "volumeType", "originSnapshot", "copyTagsToSnapshots"),
        holds_data=HOME_FILES,
    ),
    # --- sessions -------------------------------------------------------------------------------------
    "aws:ssm/document:Document": Safety(_tf("ssm/document.go"), replace_on=("name", "documentType")),
    "aws:iam/policy:Policy": Safety(_tf("iam/policy.go"), replace_on=("name", "namePrefix", "path", "description")),
    "aws:iam/userPolicyAttachment:UserPolicyAttachment": Safety(
        _tf("iam/user_policy_attachment.go"), replace_on=("user", "policyArn")
    ),
    # --- SSH through a network load balancer ----------------------------------------------------------
    "aws:lb/loadBalancer:LoadBalancer": Safety(
        _tf("elbv2/load_balancer.go"), replace_on=("name", "namePrefix", "internal", "loadBalancerType")
    ),
    "aws:lb/targetGroup:TargetGroup": Safety(
        _tf("elbv2/target_group.go"),
        replace_on=("name", "namePrefix", "port", "protocol", "protocolVersion", "vpcId", "targetType", "ipAddressType"),
    ),
    "aws:lb/listener:Listener": Safety(_tf("elbv2/listener.go"), replace_on=("loadBalancerArn",)),
}
