"""SlurmCluster's hybrid mode: the site's own slurmctld is the controller, so there is no head node.

What changes (:class:`~gpucluster.components.slurm.slurm_cluster.SlurmCluster` calls these):

- the munge key comes from the site: an empty secret under a KMS key of its own, protected and retained like
  the cluster's data, which the site's agent role writes (:mod:`gpucluster.components.hybrid.onprem_credentials`) and
  the cloud nodes only read (the head node that makes the key in a cloud-only cluster does not exist);
- the cloud nodes carry one more security group, the Slurm rules both ways between them and the site
  (:mod:`gpucluster.components.hybrid._security`);
- no head node, no private DNS zone: cloud nodes fetch their configuration from the site's controller.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.naming import with_name
from gpucluster.render.slurm.names import munge_secret_name


@dataclass(frozen=True)
class SiteMungeKey:
    secret: aws.secretsmanager.Secret
    key: aws.kms.Key


def site_munge_key(
    name: str,
    *,
    cluster: str,
    site: HybridSpec,
    tags: dict[str, str],
    keep: pulumi.ResourceOptions,
    child: pulumi.ResourceOptions,
) -> SiteMungeKey:
    """The secret the site writes its munge key into, under a KMS key of its own (rotated, 30-day deletion
    window); both kept like the cluster's data (``keep``: protected and retained unless ``protectData`` is off)."""
    key = aws.kms.Key(
        f"{name}-munge-kms",
        description=f"Encryption of the munge key site {site.site} shares with Slurm cluster {cluster}",
        enable_key_rotation=True,
        deletion_window_in_days=30,
        tags=with_name(tags, f"{cluster}-munge-key"),
        opts=keep,
    )
    aws.kms.Alias(f"{name}-munge-kms", name=f"alias/{cluster}-munge-key", target_key_id=key.key_id, opts=child)
    secret = aws.secretsmanager.Secret(
        f"{name}-munge-key",
        name=munge_secret_name(cluster),
        description=f"munge key of Slurm cluster {cluster}: written by site {site.site}'s controller, read by cloud nodes",
        kms_key_id=key.arn,
        recovery_window_in_days=30,
        tags=with_name(tags, f"{cluster}-munge-key"),
        opts=keep,
    )
    return SiteMungeKey(secret, key)
