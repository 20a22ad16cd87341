"""The one runner of a cluster's optional sections (``config/checks/sections.py``): each section's table of checks
runs in order when the section is set and not at all when it is absent, for Slurm, Kubernetes and hybrid alike."""

from __future__ import annotations

import pytest

from gpucluster.config.checks import hybrid, kubernetes, slurm
from gpucluster.config.checks.sections import section_findings
from gpucluster.config.errors import Finding, error, warning
from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from tests.conftest import make_config

FIRST = error("gpucluster:x.a", "first", "fix a")
SECOND = warning("gpucluster:x.b", "second", "fix b")


def test_the_checks_run_in_table_order_on_the_section_and_not_without_it():
    spec = load_spec(make_config(), stack="c").spec
    seen: list[tuple[str, object]] = []

    def first(section: str, s, catalog) -> list[Finding]:
        seen.append(("first", section))
        return [FIRST]

    def second(section: str, s, catalog) -> list[Finding]:
        seen.append(("second", section))
        return [SECOND]

    assert list(section_findings(None, spec, load_catalog(), (first, second))) == []
    assert seen == []
    assert list(section_findings("the section", spec, load_catalog(), (first, second))) == [FIRST, SECOND]
    assert seen == [("first", "the section"), ("second", "the section")]


@pytest.mark.parametrize(
    "runner, table, section",
    [
        (slurm.check_slurm, "SLURM_CHECKS", "slurm"),
        (kubernetes.check_kubernetes, "KUBERNETES_CHECKS", "kubernetes"),
        (hybrid.check_hybrid, "HYBRID_CHECKS", "hybrid"),
    ],
)
def test_each_section_runs_its_whole_table_through_the_runner(monkeypatch, runner, table, section):
    """A check added to a section's table runs with that section; a cluster without the section runs none."""
    module = {"slurm": slurm, "kubernetes": kubernetes, "hybrid": hybrid}[section]
    spec = load_spec(make_config(), stack="c").spec
    marker = error(f"gpucluster:{section}", "ran", "")
    monkeypatch.setattr(module, table, (lambda s, c, k: [marker],))
    assert list(runner(spec.model_copy(update={section: None}), load_catalog())) == []
    assert list(runner(spec.model_copy(update={section: object()}), load_catalog())) == [marker]
