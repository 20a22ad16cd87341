"""Every config field is read by something besides its own model (``capacity.fallbackToOnDemand`` was
documented, published in the provider schema and read by nothing).

The test walks every pydantic field of every spec model under :class:`ClusterSpec` (recursively) and looks for a read
of its attribute name (``.<name>``) outside ``gpucluster/config``: in the rest of the package, the components and the
templates. A field only the config layer reads (a check, a sizing input, a method of its own model that the
renderers call) is listed in :data:`READ_IN_CONFIG` with the reason; an entry that is no longer needed fails too, so
the list stays true.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from gpucluster.config.cluster import ClusterSpec

ROOT = Path(__file__).resolve().parents[2]

# (model, field) → why nothing outside gpucluster/config reads it, and what does.
READ_IN_CONFIG: dict[tuple[str, str], str] = {
    ("CapacitySpec", "start_time"): "capacity-block, informative: the deploy checks warn about a block not yet started",
    ("CapacitySpec", "end_time"): "capacity-block, informative: the deploy checks warn about a block that has ended",
    ("WorkloadSpec", "dataset_size_tib"): "the storage sizing (config/storage/sizing.py) reads it; resolution applies its choice",
    ("WorkloadSpec", "read_mb_per_second_per_gpu"): "the storage sizing reads it; resolution applies its choice",
    ("WorkloadSpec", "checkpoint_size_gib"): "the storage sizing reads it; resolution applies its choice",
    ("WorkloadSpec", "checkpoint_write_seconds"): "the storage sizing reads it; resolution applies its choice",
    ("WorkloadSpec", "checkpoints_kept"): "the storage sizing reads it; resolution applies its choice",
    ("WorkloadSpec", "metadata_operations_per_second"): "the storage sizing reads it (metadata IOPS); resolution applies it",
    ("WorkloadSpec", "free_space_fraction"): "the storage sizing reads it; resolution applies its choice",
    ("SlurmHealthSpec", "node_state"): "read through SlurmHealthSpec.node_state_value(): slurm.conf's HealthCheckNodeState",
    ("SlurmHealthSpec", "cycle"): "read through SlurmHealthSpec.node_state_value(): the CYCLE flag of HealthCheckNodeState",
    ("KubernetesHealthSpec", "node_monitoring_agent"): "read by KubernetesSpec.addon_versions_for: the EKS add-on list",
    ("ControllerSpec", "partitions"): "the site's own partitions: the hybrid checks keep the cloud partitions' names apart",
}


def spec_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """``root`` and every model its fields hold, at any depth (through Optional, tuples, unions, dicts)."""
    seen: dict[type[BaseModel], None] = {}

    def leaves(annotation: object) -> Iterator[object]:
        args = typing.get_args(annotation)
        if not args:
            yield annotation
        for arg in args:
            yield from leaves(arg)

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen[model] = None
        for f in model.model_fields.values():
            for leaf in leaves(f.annotation):
                if isinstance(leaf, type) and issubclass(leaf, BaseModel):
                    walk(leaf)

    walk(root)
    return list(seen)


@cache
def readers_text() -> str:
    """The code and templates a field's value can reach: the package outside ``gpucluster/config``, the components,
    the templates. The generated typed dicts only restate the model's fields, so they read nothing."""
    skip = ("gpucluster/config/", "components/_shared/config_types.py")
    texts = []
    for top, pattern in (("gpucluster", "*.py"), ("components", "*.py"), ("templates", "*")):
        for path in sorted((ROOT / top).rglob(pattern)):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and not rel.startswith(skip) and rel not in skip:
                texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


def unread_fields(models: list[type[BaseModel]], text: str) -> set[tuple[str, str]]:
    """``(model, field)`` of every field whose attribute name is read nowhere in ``text``."""
    return {(m.__name__, name) for m in models for name in m.model_fields if not re.search(rf"\.{re.escape(name)}\b", text)}


def test_every_config_field_is_read_outside_its_model():
    unread = unread_fields(spec_models(ClusterSpec), readers_text())
    unexplained = sorted(unread - READ_IN_CONFIG.keys())
    assert not unexplained, (
        f"config fields read by nothing outside gpucluster/config: {unexplained}. Wire each into resolution, a renderer or "
        "a component, or remove it from the model, the docs and the stacks (or, read only by a check, list it in "
        "READ_IN_CONFIG with the reason)"
    )


def test_the_allow_list_names_only_fields_that_need_it():
    models = spec_models(ClusterSpec)
    fields = {(m.__name__, name) for m in models for name in m.model_fields}
    assert READ_IN_CONFIG.keys() <= fields, f"no such field: {sorted(READ_IN_CONFIG.keys() - fields)}"
    read_elsewhere = READ_IN_CONFIG.keys() - unread_fields(models, readers_text())
    assert not read_elsewhere, f"read outside gpucluster/config now, remove from READ_IN_CONFIG: {sorted(read_elsewhere)}"
    assert all(reason.strip() for reason in READ_IN_CONFIG.values())


def test_a_field_nothing_reads_is_found():
    """The walk reaches nested models, and a field whose name appears nowhere is reported (fallbackToOnDemand's case);
    a read as an attribute counts, the bare word in a comment does not."""

    class Inner(BaseModel):
        zz_wired: int = 0
        zz_forgotten: bool = False

    class Outer(BaseModel):
        inner: tuple[Inner, ...] | None = None

    models = spec_models(Outer)
    assert models == [Outer, Inner]
    text = "value = spec.inner[0].zz_wired  # zz_forgotten is mentioned here only"
    assert unread_fields(models, text) == {("Inner", "zz_forgotten")}


def test_the_walk_reaches_the_whole_config():
    names = {m.__name__ for m in spec_models(ClusterSpec)}
    assert {"NodeGroupSpec", "CapacitySpec", "WorkloadSpec", "SlurmHealthSpec", "ControllerSpec", "NodeadmSpec"} <= names


def test_fallback_to_on_demand_is_gone_with_a_clear_error():
    """Removed (it was read by nothing): a stack that still sets it is refused at load, naming the field and the fix."""
    import pytest

    from gpucluster.config.errors import ConfigError
    from gpucluster.load import load_spec
    from tests.conftest import group, make_config

    capacity = {"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0", "fallbackToOnDemand": True}
    with pytest.raises(ConfigError) as refused:
        load_spec(make_config(group(capacity=capacity)), stack="t")
    assert "gpucluster:nodeGroups[0].capacity.fallbackToOnDemand: unknown field 'fallbackToOnDemand'" in str(refused.value)
