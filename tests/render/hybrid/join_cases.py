"""The hybrid-slurm stack's spec with changes, and the files of a rendered cloud node's user data (part G's tests)."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpucluster.load import load_spec
from gpucluster.render.core import WriteFile
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup

ROOT = Path(__file__).resolve().parents[3]
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/hybrid-slurm/munge-key-AbCdEf"


@cache
def stack_config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.hybrid-slurm.yaml").read_text())["config"]


def hybrid_spec(
    *,
    controller: dict[str, Any] | None = None,
    groups: dict[str, Any] | None = None,
    slurm: dict[str, Any] | None = None,
    **hybrid: Any,
) -> ResolvedCluster:
    """The hybrid-slurm stack, loaded like the program loads it, with ``controller`` keys, ``hybrid`` keys, the
    p5 group's keys and ``slurm`` keys changed (``None`` removes a key)."""
    config = copy.deepcopy(stack_config())
    for key, value in (slurm or {}).items():
        _set(config["gpucluster:slurm"], key, value)
    section = config["gpucluster:hybrid"]
    for key, value in (controller or {}).items():
        _set(section["controller"], key, value)
    for key, value in hybrid.items():
        _set(section, key, value)
    for key, value in (groups or {}).items():
        _set(config["gpucluster:nodeGroups"][0], key, value)
    return load_spec(config, stack="hybrid-slurm").cluster


def _set(target: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


def p5(cluster: ResolvedCluster) -> ResolvedNodeGroup:
    return cluster.node_group("p5")


def files(user_data: str) -> dict[str, WriteFile]:
    """The files the user data writes, by path (``.text()`` decodes compressed ones)."""
    doc = yaml.safe_load(user_data)
    return {
        f["path"]: WriteFile(f["path"], f["content"], f["permissions"], f["owner"], f.get("encoding")) for f in doc["write_files"]
    }
