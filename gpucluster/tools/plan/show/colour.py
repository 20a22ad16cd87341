"""Colour for the text plan, with rich, only where a person reads it: a terminal. Never with ``NO_COLOR``
set (https://no-color.org), never with ``CI`` set (CI logs keep escape codes as noise), never when the
output is piped or redirected — there the text is exactly :func:`~gpucluster.tools.plan.show.report.render_text`.

The colours only mark what the text already says (headings, warnings, ``(!)``, protection, money, the
mocks' stand-ins), so nothing is lost without them."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

_STYLES: tuple[tuple[str, str], ...] = (
    (r"^(?:[A-Z]|gpucluster plan)[^\n]*$", "bold"),  # the title and section headings start at column 0
    (r"^  (?:scheduler|controller|nodes|system|teams|GPUs|zones|storage|cost|power|region)\b", "bold cyan"),  # summary
    (r"[│├└─]+", "dim"),
    (
        r"\((?:[^()]*, assigned at create|AMI from SSM [^()]*|[a-zA-Z]+ of [^()\s]*)\)|[^\s]*… \(name set by AWS at create\)",
        "dim italic",
    ),
    (r"\[protected[^\]]*\]", "cyan"),
    (r"\$[0-9][0-9,]*(?:\.[0-9]+)?(?:/h|/node-hour|/month)?", "green"),
    (r"\bwarning\b", "bold yellow"),
    (r"\berror\b|\(!\)|NOT encrypted|\bOFF\b|IMDSv1 allowed", "bold red"),
)


def use_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour ``stream``: a terminal, and neither ``NO_COLOR`` nor ``CI`` set (non-empty)."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def show(text: str, stream: TextIO | None = None) -> None:
    """Write the text plan to ``stream`` (stdout), in colour where :func:`use_colour` says so."""
    out = stream or sys.stdout
    if not use_colour(out):
        out.write(text)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(
        file=out, force_terminal=True, color_system="standard", highlight=False, markup=False, emoji=False, soft_wrap=True
    )
    for line in text.rstrip("\n").split("\n"):
        styled = Text(line)
        for pattern, style in _STYLES:
            styled.highlight_regex(pattern, style)
        console.print(styled)
    out.flush()
