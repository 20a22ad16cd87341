"""One runner for the cluster's optional sections (``slurm``, ``kubernetes``, ``hybrid``): each section's checks
are a table of functions over ``(section, spec, catalog)``, run in order when the section is set and not at all
when it is absent, so a check never has to ask whether its section exists."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding
from gpucluster.facts.catalog import Catalog

S = TypeVar("S")
SectionCheck = Callable[[S, ClusterSpec, Catalog], Iterable[Finding]]
"""A check of one section (``SectionCheck[SlurmSpec]``): the section, the whole spec (for what the section refers
to), the catalog."""


def section_findings(
    section: S | None, spec: ClusterSpec, catalog: Catalog, checks: Sequence[SectionCheck[S]]
) -> Iterator[Finding]:
    """Every finding of ``checks`` on ``section``, in table order; none when the cluster has no such section."""
    if section is None:
        return
    for check in checks:
        yield from check(section, spec, catalog)
