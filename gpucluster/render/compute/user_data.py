"""What a node group's user data will be before any resource exists: the Lustre mount with stand-ins of the real
values' length, the scheduler's part of the user data, and the size check EC2's 16 KB limit asks for (run by the stack
program and GpuCluster before anything is created)."""

import hashlib
from typing import TYPE_CHECKING

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error
from gpucluster.render.compute.node import LustreMount, node_cloud_config, user_data_title
from gpucluster.render.core import USER_DATA_LIMIT, CloudConfig, cloud_config_text, largest_parts, user_data_size
from gpucluster.render.hybrid.compute import hybrid_join_part, munge_secret_stand_in
from gpucluster.render.kubernetes import node_config, nodeadm_text
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.home import home_stand_in
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup

if TYPE_CHECKING:
    from gpucluster.render.slurm.head import HeadInputs


def lustre_stand_in(spec: ClusterSpec) -> LustreMount | None:
    """The Lustre mount with stand-ins for the values only AWS knows (DNS and mount name), of the same
    length as the real ones: user data rendered with it has the size the real one will have."""
    storage = spec.storage
    if storage is None or storage.lustre is None:
        return None
    fs = storage.lustre
    return LustreMount(
        file_system=fs.file_system_id or "fs-00000000000000000",
        dns_name=f"fs-00000000000000000.fsx.{spec.region}.amazonaws.com",
        mount_name="xxxxxxxx",
        mount_point=fs.mount_point,
        mount_options=fs.mount_options,
        efa=fs.enable_efa,
        gds=fs.enable_gpudirect_storage,
    )


def scheduler_part(cluster: ResolvedCluster, group: ResolvedNodeGroup) -> CloudConfig:
    """The user-data part a node's scheduler adds (Slurm: slurmd joining the head node, or a hybrid site's
    controller for the groups it bursts into; EKS wraps the user data itself). A site's burst nodes name the munge
    secret by a stand-in that SlurmCluster replaces once the secret exists; with ``slurm.home`` the home file system's
    DNS name is a stand-in too (:func:`gpucluster.render.slurm.home.with_home_server`)."""
    spec = cluster.spec
    if group.scheduler == "slurm" and cluster.slurm is not None:
        if (
            spec.hybrid is not None
            and spec.hybrid.controller is not None
            and group.name in {g.name for g in cluster.burst_groups}
        ):
            return hybrid_join_part(cluster, group, munge_secret_stand_in(spec.region))
        home = home_stand_in(spec.region) if cluster.slurm.home is not None else None
        return node_slurm_part(SlurmContext.of(cluster), group, home)
    return CloudConfig()


def user_data_findings(cluster: ResolvedCluster, prefix: str = "gpucluster:") -> list[Finding]:
    """An error for each node group whose user data EC2 would refuse (over 16 KB), naming what to move.

    Slurm and plain groups send it gzipped, so the compressed size counts; EKS groups send MIME
    multi-part text for nodeadm (EKS merges its own part into it and takes nothing else), so the text
    counts. Run before any resource exists."""
    spec = cluster.spec
    out: list[Finding] = []
    for i, g in enumerate(cluster.node_groups):
        config = node_cloud_config(cluster.name, g, lustre_stand_in(spec)) + scheduler_part(cluster, g)
        text = cloud_config_text(user_data_title(cluster.name, g), config)
        eks = g.scheduler == "kubernetes"
        if eks:
            k8s = cluster.kubernetes
            nvme_for_pods = k8s.instance_store_for_pods if k8s is not None else True
            gate = k8s is not None and k8s.spec.health.sweep
            text = nodeadm_text(text, node_config(g.facts, nvme_for_pods, gate))
        size = user_data_size(text, gzipped=not eks)
        if size <= USER_DATA_LIMIT:
            continue
        how = "as MIME text for EKS" if eks else "gzipped"
        out.append(
            error(
                f"{prefix}nodeGroups[{i}]",
                f"the user data of node group {g.name!r} is {size} bytes {how}; EC2 allows {USER_DATA_LIMIT}",
                f"move content out of it: its largest files are {', '.join(largest_parts(config))}. Shorten the "
                "group's ncclEnv values and labels, or put large content in S3 (storage.bucket) and fetch it at boot",
                None,
                "user-data-too-large",
            )
        )
        out += _inline_hook_findings(cluster, g, size, prefix)
    return out + head_user_data_findings(cluster, prefix)


def _inline_hook_findings(cluster: ResolvedCluster, group: ResolvedNodeGroup, size: int, prefix: str) -> list[Finding]:
    """Each inline hook of a Slurm group whose user data is too large: its own field, and the way out (S3)."""
    slurm = cluster.spec.slurm
    if slurm is None:
        return []
    out: list[Finding] = []
    for j, entry in enumerate(slurm.node_groups):
        if entry.name != group.name or entry.hooks is None:
            continue
        for key, hook in (("onNodeStart", entry.hooks.on_node_start), ("onNodeConfigured", entry.hooks.on_node_configured)):
            if hook is None or hook.inline is None:
                continue
            out.append(
                error(
                    f"{prefix}slurm.nodeGroups[{j}].hooks.{key}.inline",
                    f"this inline hook ({len(hook.inline.encode())} bytes) is part of node group {group.name!r}'s user "
                    f"data, which is {size} bytes; EC2 allows {USER_DATA_LIMIT}",
                    "give the script as s3Uri with its sha256 instead: the node fetches it at boot and checks it",
                    None,
                    "user-data-too-large",
                )
            )
    return out


def _hex(seed: str, length: int) -> str:
    """Hex digits as random as AWS's ids (zeros would gzip smaller than the real user data does)."""
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def head_stand_ins(cluster: ResolvedCluster) -> tuple[SlurmContext, "HeadInputs"]:
    """The head node's context and inputs with stand-ins of the real values' length (ids, the artifact bucket's name,
    the file systems' DNS names): what the size check renders, and what tests boot a head node from."""
    from gpucluster.render.slurm.agent import AgentBundle, LaunchTarget, agent_config
    from gpucluster.render.slurm.head import HeadInputs

    slurm, spec = cluster.slurm, cluster.spec
    if slurm is None:
        raise ValueError(f"{cluster.name} has no Slurm head node")
    ctx = SlurmContext.of(cluster)
    targets = {
        g.name: LaunchTarget(f"lt-{_hex('lt' + g.name, 17)}", (f"subnet-{_hex('s' + g.name, 17)}",)) for g in ctx.node_groups
    }
    bucket = f"{cluster.name}-slurm-{int(_hex('bucket', 22), 16) % 10**26:026d}"  # bucket_prefix + a 26-digit suffix
    secret = f"arn:aws:secretsmanager:{spec.region}:{'0' * 12}:secret:{cluster.name}-login-host-keys-{_hex('k', 6)}"
    return ctx, HeadInputs(
        f"vol-{_hex('vol', 17)}",
        AgentBundle(bucket, f"agent/gpucluster_agents-{_hex('key', 16)}.zip", _hex("sha", 64)),
        agent_config(ctx, targets, bucket),
        lustre_stand_in(spec) if slurm.spec.head_node.mount_shared_storage else None,
        home_stand_in(spec.region) if slurm.home is not None else None,
        secret if slurm.login is not None and slurm.login.ssh is not None else None,
        # the AMP workspace's id (the collector's config names it): "ws-" and a UUID
        metrics_workspace_id=f"ws-{_hex('ws', 8)}-{_hex('ws1', 4)}-{_hex('ws2', 4)}-{_hex('ws3', 4)}-{_hex('ws4', 12)}"
        if cluster.monitoring is not None
        else None,
    )


def head_user_data_findings(cluster: ResolvedCluster, prefix: str = "gpucluster:") -> list[Finding]:
    """An error when the Slurm head node's user data would be over 16 KB gzipped, before any resource exists. It holds
    only what fetches the head node's other files from S3 (``render/slurm/headfiles.py``: the boot helper, its config,
    the bundle's pointer, the first-boot script), so it no longer grows with node groups, users or teams: past the
    limit is a gpucluster bug. Sized with stand-ins of the real values' length (ids, the artifact bucket's name)."""
    from gpucluster.render.slurm.head import head_cloud_config

    slurm, spec = cluster.slurm, cluster.spec
    if slurm is None or (spec.hybrid is not None and spec.hybrid.controller is not None):
        return []
    ctx, inputs = head_stand_ins(cluster)
    config = head_cloud_config(ctx, inputs)
    size = user_data_size(cloud_config_text("head", config), gzipped=True)
    if size <= USER_DATA_LIMIT:
        return []
    return [
        error(
            f"{prefix}slurm",
            f"the head node's user data would be {size} bytes gzipped; EC2 allows {USER_DATA_LIMIT}",
            f"nothing in the config makes it smaller: the head node's other files already ride in S3 and its largest "
            f"files are {', '.join(largest_parts(config))}, gpucluster's own. Report this as a gpucluster bug",
            None,
            "user-data-too-large",
        )
    ]
