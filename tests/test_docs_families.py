"""Docs by family, and comments that give reasons (docs/security.md; CONTRIBUTING.md).

- docs/security.md is the threat model: it links to a Security section of every family's page, and each of those
  pages has one (a ``## Security`` heading), so a new family cannot keep its security detail on the index.
- No comment, docstring or doc cites an issue number, a review's scenario id or a section of a design document that
  is not in the repository: the reason goes in the text, or in the docs/ page the comment names.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

DOCS = ROOT / "docs"
INDEX = DOCS / "security.md"
# The pages whose family has something to defend; each holds its own ``## Security`` section.
FAMILY_PAGES = (
    "storage.md",
    "kubernetes.md",
    "slurm.md",
    "people.md",
    "teams.md",
    "teams-reconcile.md",
    "hybrid.md",
    "monitoring.md",
    "logs.md",
    "images.md",
    "health.md",
    "stacks.md",
    "rolling-updates.md",
    "rebaseline.md",
    "containers.md",
)
MAX_INDEX_LINES = 150

# Our own issue numbers ("issue #21", "(#20)"); an upstream reference names its repository (``NVIDIA/x#655``).
ISSUE = re.compile(r"\b[Ii]ssue #?\d+|(?<![\w/&])#\d{1,3}\b(?![-\w])")
# Ids of documents a reader cannot open: "design D6", "design §6.4", "(F17)", "D15:", a fault review's "N16", a path
# into the research folder beside the repository.
DESIGN = re.compile(
    r"\bdesign (?:[DF]\d|§|section \d)|§\s?\d|[(,;] ?[DF]\d{1,2}(?:[,/;)]| and)|\b[DF]\d{1,2}:|\bN\d\d\b"
    r"|\.\./shared/research|/work/shared|\bresearch/[\w-]+\.md"
)
SCANNED = ("gpucluster", "components", "templates", "gpucluster_agents", "docs", "tests", "policy-pack", "examples", "bench")
SUFFIXES = {".py", ".j2", ".sh", ".md"}


def _security_links(text: str) -> set[str]:
    """The pages the index links to, each once."""
    return {m.group(1) for m in re.finditer(r"\]\(([\w-]+\.md)(?:#[\w-]+)?\)", text)}


def provenance(text: str) -> list[str]:
    """Every line that cites an issue number or a design document's id, as ``<line>: <text>``."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if ISSUE.search(line) or DESIGN.search(line)]


def _sources() -> list[Path]:
    files = [p for d in SCANNED for p in (ROOT / d).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    files = [p for p in files if "golden" not in p.relative_to(ROOT).parts and "venv" not in p.relative_to(ROOT).parts[0]]
    files = [p for p in files if p != Path(__file__)]  # this file quotes what it looks for
    return [*files, ROOT / "README.md", ROOT / "CONTRIBUTING.md"]


def test_every_family_page_has_a_security_section_the_index_links_to():
    linked = _security_links(INDEX.read_text())
    missing_links = [page for page in FAMILY_PAGES if page not in linked]
    assert not missing_links, f"docs/security.md links to no section of {missing_links}"
    without = [page for page in FAMILY_PAGES if not re.search(r"^## Security$", (DOCS / page).read_text(), flags=re.M)]
    assert not without, f"these family pages have no '## Security' section: {without}"


def test_the_security_page_is_an_index():
    lines = len(INDEX.read_text().splitlines())
    assert lines <= MAX_INDEX_LINES, f"docs/security.md is {lines} lines; its detail belongs in the family pages"


def test_no_comment_or_doc_cites_an_issue_or_a_design_id():
    found = [f"{path.relative_to(ROOT)}:{hit}" for path in _sources() for hit in provenance(path.read_text(errors="replace"))]
    assert not found, "keep the reason, drop the provenance (or point at the docs/ page):\n" + "\n".join(found)


def test_the_scan_sees_each_kind_of_citation_and_passes_upstream_references():
    cited = [
        "# the head instance has carried this since #20",
        '"""Issue #18, Build item 1, done-when: every namespace."""',
        "Login nodes (issue #21, design D6, D13): where people log in.",
        "the security-group matrix of design §6.4",
        "its group (set at creation, F17)",
        "D15: the site owns its users",
        "# ------------------------------- N16",
        "Research: `/work/shared/research/next-capabilities.md`",
    ]
    assert [bool(provenance(line)) for line in cited] == [True] * len(cited)
    upstream = [
        "dcgm-exporter renamed it (NVIDIA/dcgm-exporter#655)",
        "the EKS taint race (aws/containers-roadmap#1962)",
        "Linux version 6.8.0-1021-aws #23-Ubuntu SMP",
        "#!/bin/bash",
        "# 4b. Metrics exporters (docs/monitoring.md).",
        'see docs/people.md, "Who is root"',
    ]
    assert [provenance(line) for line in upstream] == [[]] * len(upstream)
