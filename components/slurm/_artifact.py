"""The node agent's package: ``gpucluster_agents`` zipped by the renderer, stored in a private bucket of
the Slurm cluster, fetched and checked by the head node at boot. The same bucket holds the head node's files' bundles
(``head/files-<sha16>.json``, made in ``_head_node.py``: render/slurm/headfiles.py says what rides there) and the
declared users (``users/users.json``, which every node fetches: a user's change is no new user data).

The object key carries the package's hash, so a changed agent is a new object (and a new head node user
data naming it) rather than an object rewritten under a running head node; the bucket holds only these
build artifacts, so it is destroyed with the stack.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.buckets import LifecycleRule, bucket_lifecycle, private_bucket
from gpucluster.config.naming import with_name
from gpucluster.render.slurm.agent import NODE_MAPS_PREFIX, AgentBundle, agent_bundle, package_key, sha256
from gpucluster.render.slurm.identity import USERS_KEY


@dataclass(frozen=True)
class AgentArtifact:
    """The stored package and what the head node needs to install it."""

    bucket: aws.s3.Bucket
    package: aws.s3.BucketObjectv2
    """The object; the head node instance depends on it (it fetches it at first boot)."""
    key: str
    sha256: str
    users: aws.s3.BucketObjectv2 | None = None
    """The declared users' object (``users/users.json``, a cluster with declared users): every node fetches it at boot
    and every 2 minutes (gpucluster_agents/boot/users.py), so it changes in place and no user data names it."""

    def users_arn(self, bucket_arn: str) -> str | None:
        """The users' object's ARN, or None without one."""
        return f"{bucket_arn}/{USERS_KEY}" if self.users is not None else None

    def read_arns(self, bucket_arn: str) -> list[str]:
        """The objects every Slurm node reads from this bucket: the package, and the users' object when there is one."""
        return [f"{bucket_arn}/{self.key}", *([f"{bucket_arn}/{USERS_KEY}"] if self.users is not None else [])]

    def bundle(self, bucket_name: str) -> AgentBundle:
        """Where the head node fetches the package and the hash it checks, once the bucket name is known."""
        return AgentBundle(bucket=bucket_name, key=self.key, sha256=self.sha256)


def agent_artifact(
    name: str, cluster: str, tags: dict[str, str], child: pulumi.ResourceOptions, users: str | None = None
) -> AgentArtifact:
    """Build the package and store it: the bucket ``<name>-artifacts`` and the object ``<name>-agent-package``; with
    ``users`` (render's ``users_bundle``), the declared users' object ``<name>-users`` at its fixed key."""
    bundle = agent_bundle()
    digest = sha256(bundle)
    key = package_key(digest)
    bucket = private_bucket(
        f"{name}-artifacts",
        f"{name}-artifacts",
        bucket_prefix=f"{cluster}-slurm-",
        force_destroy=True,  # only build artifacts, rebuilt from this program
        tags=with_name(tags, f"{cluster}-slurm-artifacts"),
        bucket_opts=child,
        child_opts=child,
    )
    package = aws.s3.BucketObjectv2(
        f"{name}-agent-package",
        bucket=bucket.id,
        key=key,
        content_base64=base64.b64encode(bundle).decode(),
        content_type="application/zip",
        tags=with_name(tags, f"{cluster}-agent"),
        opts=child,
    )
    # The launches' node maps (gpucluster_agents/power/nodemap.py, one object per CreateFleet batch) are read at a
    # node's first boot, within 15 min of its launch, and the agent tags the instances within minutes: expire
    # them after two days so the bucket does not grow with every resume.
    bucket_lifecycle(
        f"{name}-artifacts-node-maps", bucket, [LifecycleRule("expire-node-maps", NODE_MAPS_PREFIX, expire_days=2)], child
    )
    users_object = None
    if users is not None:
        users_object = aws.s3.BucketObjectv2(
            f"{name}-users",
            bucket=bucket.id,
            key=USERS_KEY,
            content=users,
            content_type="application/json",
            tags=with_name(tags, f"{cluster}-users"),
            opts=child,
        )
    return AgentArtifact(bucket=bucket, package=package, key=key, sha256=digest, users=users_object)
