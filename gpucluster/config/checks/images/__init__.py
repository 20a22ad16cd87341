"""Checks of images and hooks: an image read from an SSM parameter at every deploy is unpinned (a
warning: ``gpucluster images lock`` records it), a lock made for another parameter is stale (an error), and every
inline hook must parse (``bash -n``)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import effective_scheduler
from gpucluster.config.errors import Finding, error, group_path, warning
from gpucluster.config.slurm import UBUNTU_RELEASE, image_release
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.images import DEFAULT_RELEASE, default_image_parameter


def unpinned_images(spec: ClusterSpec) -> list[Finding]:
    """One warning naming every group whose launch template names its AMI (Slurm and plain groups; EKS boots its
    ``amiType``'s) and reads it from an SSM parameter at every deploy: neither ``imageId`` nor an ``imageLock`` pins
    it. The stack program adds it to the plan's findings (not :func:`validate_cluster`: a config is valid unlocked)."""
    groups = [
        g.name
        for g in spec.node_groups
        if g.image_id is None and g.image_lock is None and effective_scheduler(g, spec) != "kubernetes"
    ]
    if not groups:
        return []
    return [
        warning(
            "gpucluster:nodeGroups",
            f"unpinned images: node group{'s' if len(groups) > 1 else ''} {', '.join(groups)} "
            f"read{'' if len(groups) > 1 else 's'} {'their' if len(groups) > 1 else 'its'} SSM image parameter at every "
            "deploy, so a later deploy can change the image (and the GPU driver) under running training",
            "run `gpucluster images lock --stack <stack>` to record today's AMIs, or set nodeGroups[].imageId",
            groups,
            "image-unpinned",
        )
    ]


def _default_parameter(g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec) -> str | None:
    """The SSM parameter a group without ``imageSsmParameter`` reads: Slurm groups the head node's Ubuntu release,
    others the default release. None where the release is the hybrid site's to decide (checks.hybrid_slurm)."""
    if facts is None:
        return None
    if effective_scheduler(g, spec) == "slurm":
        if spec.hybrid is not None and spec.hybrid.controller is not None:
            return None
        return default_image_parameter(facts, UBUNTU_RELEASE)
    return default_image_parameter(facts, DEFAULT_RELEASE)


def check_image_pinned(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    """A lock made from another parameter than the one the group reads (its ``imageSsmParameter``, else its default:
    a lock written by hand for another Ubuntu release, say) is stale: an error."""
    lock = g.image_lock
    if g.image_id is not None or lock is None:
        return
    reads = g.image_ssm_parameter or _default_parameter(g, facts, spec)
    if reads is None or reads == lock.ssm_parameter:
        return
    locked, wanted = image_release(lock.ssm_parameter), image_release(reads)
    releases = f" (Ubuntu {locked}, the group's image is Ubuntu {wanted})" if locked and wanted and locked != wanted else ""
    how = "now reads" if g.image_ssm_parameter else "reads by default"
    yield error(
        group_path(i, "imageLock.ssmParameter"),
        f"node group {g.name!r}: the image lock was made from {lock.ssm_parameter}, but the group {how} {reads}{releases}",
        "run `gpucluster images lock --stack <stack>` again to lock the parameter the group reads"
        + ("" if g.image_ssm_parameter else ", or set imageSsmParameter to the locked one if that image is meant"),
        lock.ssm_parameter,
        "image-lock-stale",
    )


def bash_syntax_error(script: str) -> str | None:
    """``bash -n``'s complaint about ``script``, None when it parses (or no bash is installed to ask)."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    done = subprocess.run([bash, "-n"], input=script, capture_output=True, text=True, timeout=30, check=False)
    return None if done.returncode == 0 else (done.stderr.strip().replace("bash: ", "") or f"exit {done.returncode}")


def check_hooks(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Every inline hook parses as bash."""
    if spec.slurm is None:
        return
    for i, entry in enumerate(spec.slurm.node_groups):
        hooks = entry.hooks
        if hooks is None:
            continue
        for key, hook in (("onNodeStart", hooks.on_node_start), ("onNodeConfigured", hooks.on_node_configured)):
            if hook is None or hook.inline is None:
                continue
            problem = bash_syntax_error(hook.inline)
            if problem:
                yield error(
                    f"gpucluster:slurm.nodeGroups[{i}].hooks.{key}.inline",
                    f"node group {entry.name!r}: the {key} hook is not valid bash: {problem}",
                    "fix the script (it runs as root with `bash`), or put it in S3 with its sha256",
                    None,
                    "hook-syntax",
                )
