"""Every AMI the config names (``imageId``, ``imageLock.imageId``, the head and login nodes' ``imageId``) exists and
is published by Amazon, Canonical or this account: an id alone says nothing about who built the image, and a
community AMI or one shared from another account would boot every node of the group (and bake into the Slurm image)
with whatever its owner put in it. DescribeImages' ``OwnerId`` and ``ImageOwnerAlias`` decide; the account is STS's
caller identity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error
from gpucluster.facts.catalog import Catalog
from gpucluster.tools.preflight.clients import Clients

CANONICAL = "099720109477"
"""Canonical's AWS account, which publishes Ubuntu's AMIs (the head and login nodes' default)."""
AMAZON_ALIAS = "amazon"
"""``ImageOwnerAlias`` of an image Amazon owns (the Deep Learning AMIs, Amazon Linux)."""


def configured_images(spec: ClusterSpec) -> list[tuple[str, str]]:
    """``(config path, AMI id)`` of every image the config names, config order."""
    out: list[tuple[str, str]] = []
    for i, g in enumerate(spec.node_groups):
        if g.image_id:
            out.append((f"gpucluster:nodeGroups[{i}].imageId", g.image_id))
        if g.image_lock is not None:
            out.append((f"gpucluster:nodeGroups[{i}].imageLock.imageId", g.image_lock.image_id))
    slurm = spec.slurm
    if slurm is not None and slurm.head_node.image_id:
        out.append(("gpucluster:slurm.headNode.imageId", slurm.head_node.image_id))
    if slurm is not None and slurm.login_nodes is not None and slurm.login_nodes.image_id:
        out.append(("gpucluster:slurm.loginNodes.imageId", slurm.login_nodes.image_id))
    return out


def check_image_owners(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    wanted = configured_images(spec)
    if not wanted:
        return
    account = aws.sts.get_caller_identity()["Account"] if aws.sts is not None else None
    found: dict[str, dict[str, Any]] = {}
    for ami in sorted({ami for _, ami in wanted}):
        try:
            images = aws.ec2.describe_images(ImageIds=[ami])["Images"]
        except aws.ec2.exceptions.ClientError as exc:
            if not exc.response["Error"]["Code"].startswith("InvalidAMIID"):
                raise
            images = []
        found.update({image["ImageId"]: image for image in images})
    trusted = f"Amazon, Canonical ({CANONICAL}) or this account" + (f" ({account})" if account else "")
    for path, ami in wanted:
        image = found.get(ami)
        if image is None:
            yield error(path, f"EC2 in {spec.region} does not know {ami}, or this account may not use it",
                        "check the id and the region (an image lock is made per region)", ami, "image-missing")  # fmt: skip
            continue
        owner, alias = image.get("OwnerId"), image.get("ImageOwnerAlias")
        if alias == AMAZON_ALIAS or owner == CANONICAL or (account is not None and owner == account):
            continue
        name = image.get("Name") or "no name"
        yield error(
            path,
            f"{ami} ({name}) is owned by account {owner}{f' ({alias})' if alias else ''}, not by {trusted}: whoever "
            "owns it decides what every node booted from it runs",
            "use an image Amazon or Canonical publishes (leave imageId out for the default, or run `gpucluster images "
            "lock`), or copy a vetted image into this account (ec2 copy-image) and name the copy",
            ami,
            "image-owner",
        )


IMAGES_CHECKED = {check_image_owners: ("the images' owners", "gpucluster:nodeGroups")}
