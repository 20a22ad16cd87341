"""``gpucluster plan --stack slurm-p5`` (containers on by default on its GPU groups): the image recipe of each GPU
group builds pyxis and enroot from their pinned releases, and the text plan says so; the shipped stack names no
registry, so no role may pull from ECR."""

from __future__ import annotations

import json

import pytest
import yaml

from gpucluster.facts.containers import ENROOT, PYXIS
from gpucluster.tools.plan.show.report import render_text
from gpucluster.tools.plan.show.width import DEFAULT_WIDTH
from tests.plans import shipped_plan

pytestmark = pytest.mark.slow  # plans a shipped stack

COMPONENT = "aws:imagebuilder/component:Component"


def test_the_slurm_p5_images_build_pyxis_and_enroot():
    plan = shipped_plan("slurm-p5")
    components = {r.name: r.inputs for r in plan.of_type(COMPONENT)}
    assert sorted(components) == ["slurm-p5-slurm-dev-component", "slurm-p5-slurm-p5-component"]
    for inputs in components.values():
        assert f"pyxis {PYXIS.version} + enroot {ENROOT.version} + Slurm" in inputs["description"]
        doc = yaml.safe_load(inputs["data"])
        script = doc["phases"][0]["steps"][-1]["inputs"]["commands"][0]
        assert f"fetch pyxis {PYXIS.tag} {PYXIS.commit}" in script and f"fetch enroot {ENROOT.tag} {ENROOT.commit}" in script
        assert any("spank_pyxis.so" in c for c in doc["phases"][1]["steps"][0]["inputs"]["commands"])
    text = render_text(plan, width=DEFAULT_WIDTH)
    assert f"pyxis {PYXIS.version} + enroot {ENROOT.version} + Slurm" in text
    assert "ecr:" not in json.dumps([r.inputs.get("policy") for r in plan.of_type("aws:iam/rolePolicy:RolePolicy")])
