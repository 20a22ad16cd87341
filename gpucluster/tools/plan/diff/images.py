"""Image locks in a plan diff: an ``imageLock.imageId`` that changed while its ``lockedAt`` did not was edited by
hand, not made again by ``gpucluster images lock`` (which reads the SSM parameter and stamps the date). An AMI id
alone says nothing about who built it, so the diff says so and asks for ``gpucluster preflight``, which checks the
image's owner. Read from the plans' ``imageLocks`` (the config's locks by node group, :mod:`..run.json`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _locks(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    locks = plan.get("imageLocks")
    return {str(k): v for k, v in locks.items() if isinstance(v, Mapping)} if isinstance(locks, Mapping) else {}


def image_lock_lines(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per node group whose locked AMI changed without a new ``lockedAt`` (none otherwise)."""
    before, after = _locks(old), _locks(new)
    out = []
    for group, b in sorted(after.items()):
        a = before.get(group)
        if a is None or a.get("imageId") == b.get("imageId") or a.get("lockedAt") != b.get("lockedAt"):
            continue
        out.append(
            f"{group}: imageLock.imageId {a.get('imageId')} → {b.get('imageId')} but lockedAt is still "
            f"{b.get('lockedAt')}: not made by `gpucluster images lock`; check who owns the image (`gpucluster "
            "preflight`) before merging"
        )
    return out


def config_image_locks(config: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``{node group: {imageId, ssmParameter, lockedAt}}`` of the locks in a Pulumi config (objects as JSON text)."""
    import json

    raw: Any = config.get("gpucluster:nodeGroups")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    out: dict[str, dict[str, Any]] = {}
    for group in raw if isinstance(raw, list) else []:
        lock = group.get("imageLock") if isinstance(group, dict) else None
        if isinstance(lock, dict) and isinstance(group.get("name"), str):
            out[group["name"]] = {k: lock.get(k) for k in ("imageId", "ssmParameter", "lockedAt")}
    return out
