"""Images and node hooks: Slurm nodes boot an image the stack bakes (EC2 Image Builder) with everything
installed, from a base image pinned once (``gpucluster images lock``); a node group may run a site's own scripts at
node start and once the node is configured."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from gpucluster.config.base import SpecModel

AMI_RE = r"^ami-[0-9a-f]{8,17}$"
SHA256_RE = r"^[0-9a-f]{64}$"
S3_URI_RE = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/([!-~]{1,1024})$")
INLINE_MAX_BYTES = 8192
"""An inline hook's cap: EC2 user data is 16 KB (gzipped) and carries the whole node setup; a longer script belongs
in S3 (``s3Uri`` with its ``sha256``)."""
DEFAULT_HOOK_TIMEOUT = 600
"""Ten minutes: a site's hook (mount a licence server, warm a container cache) that runs longer holds a paid GPU node
out of Slurm for longer than its boot; raise it on purpose."""


class ImagesSpec(SpecModel):
    """How Slurm nodes get their software (``slurm.images``)."""

    bake: bool = True
    """Bake the compute nodes' image with EC2 Image Builder: slurmd, munge, the Lustre client, the node package …
    installed once into an AMI on top of each group's base image, so a booting node installs and downloads nothing
    and every node of a group runs the same build. ``false``: nodes install their packages at boot (minutes per node,
    from the internet through NAT, and two nodes may get different builds). Default true."""

    build_instance_type: str = Field(default="m7i.xlarge", pattern=r"^[a-z0-9-]+\.[a-z0-9-]+$")
    """The instance Image Builder builds and tests the image on (x86_64; no GPU needed: nothing is compiled against
    the driver). Default ``m7i.xlarge``."""


class ImageLockSpec(SpecModel):
    """A base image resolved once from its SSM parameter and recorded (``gpucluster images lock``): the plan uses
    ``imageId`` until the lock is made again, whatever the parameter says by then."""

    image_id: str = Field(pattern=AMI_RE)
    """The AMI the parameter named when the lock was made. Required."""

    ssm_parameter: str = Field(min_length=1)
    """The SSM parameter that was read (the group's ``imageSsmParameter`` or its default). Required."""

    locked_at: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?$")
    """When (UTC date or time) the lock was made. Required; informative."""


class HookSpec(SpecModel):
    """A script a node runs as root: from S3 (checked against its sha256) or inline."""

    s3_uri: str | None = None
    """``s3://bucket/key`` of the script; needs ``sha256``. The node's role may read exactly that object."""

    sha256: str | None = Field(default=None, pattern=SHA256_RE)
    """The script's sha256 (hex): a changed object is refused, the node drained."""

    inline: str | None = Field(default=None, min_length=1)
    """The script itself (bash, at most 8 KiB, no NUL; checked with ``bash -n`` at plan time)."""

    @field_validator("s3_uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is not None and not S3_URI_RE.match(value):
            raise ValueError(f"{value!r} is not an s3://bucket/key URI")
        return value

    @field_validator("inline")
    @classmethod
    def _inline(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "\0" in value:
            raise ValueError("an inline hook may not contain a NUL character")
        size = len(value.encode())
        if size > INLINE_MAX_BYTES:
            raise ValueError(f"an inline hook is {size} bytes, over {INLINE_MAX_BYTES}: put it in S3 (s3Uri + sha256)")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> HookSpec:
        if (self.s3_uri is None) == (self.inline is None):
            raise ValueError("give either s3Uri (with sha256) or inline, not both and not neither")
        if self.s3_uri is not None and self.sha256 is None:
            raise ValueError("s3Uri needs sha256: the node checks the script before running it as root")
        if self.inline is not None and self.sha256 is not None:
            raise ValueError("sha256 is for s3Uri; an inline script is pinned by the config itself")
        return self


class NodeHooksSpec(SpecModel):
    """A Slurm node group's hooks (``slurm.nodeGroups[].hooks``), run as root with a timeout. A failed hook drains
    the node with the reason ``gpucluster: hook <name> failed``."""

    on_node_start: HookSpec | None = None
    """Runs first at every first boot, before the node's setup (its name, munge, mounts). Default: none."""

    on_node_configured: HookSpec | None = None
    """Runs once the node is set up (mounts, users, munge) and before slurmd takes jobs: slurmd starts only after it
    succeeded, and comes up drained when it failed. Default: none."""

    timeout_seconds: int = Field(default=DEFAULT_HOOK_TIMEOUT, ge=10, le=3600)
    """Seconds each hook may run before it is killed (and counts as failed). Default 600."""


class GpuNodeUpdateSpec(SpecModel):
    """How EKS replaces a GPU managed node group's nodes on a new AMI or launch template version: the ``MINIMAL``
    strategy (terminate, then launch: capacity blocks and reservations have no spare instance for the default
    launch-before-terminate), a share of the group at a time."""

    max_unavailable_percentage: int = Field(default=10, ge=1, le=100)
    """Percent of a GPU group's nodes replaced at once (EKS: at least one node, at most 100). Default 10: a 16-node
    group loses at most 2 nodes of training capacity at a time, and a 64-node group rolls in about ten waves."""
