# pyright: strict, reportMissingTypeStubs=false
"""Which AMI a node group's nodes should run (rolling replacement compares each instance's ImageId with it).

The agent config may name it (``NodeGroup.image_id``, e.g. a site's own config); gpucluster leaves it out so that a new
image never changes the head node's config, and the answer is the image of the group's launch template version
(``$Default``: GpuNodeGroup makes every new version the default), one DescribeLaunchTemplateVersions call per group."""

from __future__ import annotations

from typing import Any, cast

from ..contract import NodeGroup


def expected_image(ec2: Any, group: NodeGroup) -> str | None:
    """The AMI id ``group``'s nodes should run; None when the launch template version names no image (then nothing
    can be said to be out of date). Raises the client's error when EC2 cannot answer: the caller decides."""
    if group.image_id:
        return group.image_id
    resp = cast(
        "dict[str, Any]",
        ec2.describe_launch_template_versions(
            LaunchTemplateId=group.launch_template_id, Versions=[group.launch_template_version]
        ),
    )
    versions = cast("list[dict[str, Any]]", resp.get("LaunchTemplateVersions") or [])
    if not versions:
        return None
    data = cast("dict[str, Any]", versions[0].get("LaunchTemplateData") or {})
    image = data.get("ImageId")
    return str(image) if image else None
