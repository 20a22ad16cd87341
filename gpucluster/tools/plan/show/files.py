"""The rendered files in the text plan: in full with ``--files``; by default one line per file the program
hands to AWS or Kubernetes (user data, Helm values, ConfigMap entries, the agent package) with its size
and what reads it, the files a user data writes counted on its line.

In full, the files are 94 % of a Slurm plan (every user data repeats the files it writes), which buried
the cluster; a reviewer opens them on purpose."""

from __future__ import annotations

import re

BUNDLE = r"/files-bundle\.list$"
"""The head node's files' bundle (render/slurm/headfiles.py): its files are counted on its line, as a user data's."""

_READERS: tuple[tuple[str, str], ...] = (
    (r"/user-data$", "cloud-init, at first boot"),
    (r"/values\.yaml$", "Helm (helm install -f)"),
    (r"\.zip$", "the head node, which installs the agent from it"),
    (BUNDLE, "the head node, which writes its files from it (gpucluster-aws apply-files)"),
    (r"/rules\.yaml$", "Amazon Managed Prometheus (rule groups)"),
    (r"/alertmanager\.yaml$", "Amazon Managed Prometheus (Alertmanager)"),
    (r"/scraper\.yaml$", "the AMP managed scraper"),
    (r"\.ya?ml$", "kubectl apply, by a team (from a ConfigMap)"),
)
"""Who reads each kind of file the program hands over (the files a user data writes are counted, not listed)."""


CARRIER = re.compile(rf"/user-data$|{BUNDLE}")
"""A file that carries others: each file it writes is keyed ``<resource><path>`` and counted on its line."""


def _owner(path: str) -> str:
    """``<resource>/`` of a carrier's path."""
    return CARRIER.sub("/", path)


def reader(path: str) -> str:
    """Who reads a rendered file, from its path."""
    for pattern, who in _READERS:
        if re.search(pattern, path):
            return who
    return "the resource that carries it"


def _size(text: str) -> str:
    return f"{len(text.encode()):,} B"


MAX_LISTED = 6


def file_lines(files: dict[str, str], *, full: bool) -> list[str]:
    """The ``Rendered files`` section: every file in full, or one line per top-level file."""
    if not files:
        return []
    if full:
        out = ["Rendered files (as rendered from the offline plan's stand-in ids)"]
        for path in sorted(files):
            out += [f"--- {path}", files[path].rstrip("\n"), ""]
        return out[:-1]
    carriers = {_owner(p) for p in files if CARRIER.search(p)}
    written: dict[str, list[str]] = {}
    top: list[str] = []
    for path in sorted(files):
        owner = next((u for u in carriers if path.startswith(u) and not CARRIER.search(path)), None)
        if owner is None:
            top.append(path)
        else:
            written.setdefault(owner, []).append(path[len(owner) - 1 :])
    out = [f"Rendered files: {len(files)} (gpucluster plan --files prints them)"]
    # Every user data is listed (what each instance boots with); the other files too while they fit in a few
    # lines, else one line counts them, so that the default plan stays within two screens.
    # (A files bundle is one of the others: its files are counted on its line when it is listed.)
    others = [p for p in top if not p.endswith("/user-data")]
    shown = [p for p in top if p.endswith("/user-data")]
    shown += others if len(shown) + len(others) <= MAX_LISTED else []
    rest = [p for p in top if p not in shown]
    width = min(max(len(p) for p in shown or top), 72)
    for path in shown:
        line = f"  {path:<{width}} {_size(files[path]):>10}  read by {reader(path)}"
        inner = written.get(_owner(path) if CARRIER.search(path) else "", [])
        if inner:
            line += f"; writes {len(inner)} files"
        out.append(line)
    if rest:
        readers = sorted({reader(p).split(" (")[0] for p in rest})
        out.append(f"  … and {len(rest)} other files, read by {', '.join(readers)}")
    return out
