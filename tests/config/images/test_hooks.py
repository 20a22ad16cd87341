"""A Slurm group's site hooks (``gpucluster:slurm.nodeGroups[].hooks``): each bad one is refused naming the field
before any resource exists (what the hooks do on a node: tests/render/slurm/test_node_image.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.load import load_spec
from tests.conftest import group, make_config

SHA = "ab" * 32


def _cluster(hooks: dict[str, Any]) -> Any:
    slurm = {"nodeGroups": [{"name": "p5", "hooks": hooks}]}
    return load_spec(make_config(group(name="p5"), slurm=slurm), stack="img").cluster


BAD_HOOKS = [
    ({"onNodeStart": {"inline": "echo hi", "s3Uri": "s3://site-b/k.sh", "sha256": SHA}}, "not both"),
    ({"onNodeStart": {}}, "not both and not neither"),
    ({"onNodeStart": {"s3Uri": "s3://site-b/k.sh"}}, "s3Uri needs sha256"),
    ({"onNodeStart": {"s3Uri": "https://site-b/k.sh", "sha256": SHA}}, "is not an s3://bucket/key URI"),
    ({"onNodeStart": {"inline": "echo a\0b"}}, "NUL"),
    ({"onNodeStart": {"inline": "#" * 9000}}, "over 8192"),
    ({"onNodeConfigured": {"inline": "if true; then echo"}}, "not valid bash"),
    ({"onNodeStart": {"inline": "true"}, "timeoutSeconds": 5}, "timeoutSeconds"),
]


@pytest.mark.parametrize(("hooks", "expected"), BAD_HOOKS, ids=[e for _, e in BAD_HOOKS])
def test_bad_hooks_are_refused_naming_the_field(hooks: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        _cluster(hooks=hooks)
    assert expected in str(info.value) and "hooks" in str(info.value)
