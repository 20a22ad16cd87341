"""``gpucluster generate [--check]``: every generated file of the checkout, from its one source.

    components/_shared/config_types.py the config sections as typed dicts for component Args (the config model)
    docs/config-reference.md       the stack file's keys (the config model's field docs)
    docs/components-reference.md   each component's Args and outputs (their docstrings, as the provider schema)

Without ``--check`` it rewrites the files that differ and says which; with ``--check`` it writes nothing and exits
1 naming every stale file (CI runs it: a generated file edited by hand, or a source changed without its files,
fails the build). The provider schema's golden (tests/golden/provider/schema.json) is a test's golden, kept with
``pytest --update-golden``, not a generated file.

It writes into the checkout whose code it runs (the files are committed there), so it refuses to run from an
installed wheel, where there is no checkout to write into.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster._paths import PACKAGE_DIR
from gpucluster.tools.cli_common import EXIT_FAILED, EXIT_OK, CliError

CHECKOUT = PACKAGE_DIR.parent
FIX = "run `gpucluster generate` and commit the result"


@dataclass(frozen=True)
class Generated:
    path: Path  # in the checkout
    render: Callable[[], str]

    def name(self, root: Path) -> str:
        return self.path.resolve().relative_to(root.resolve()).as_posix()

    def current(self) -> str | None:
        """The committed text, or None when the file is missing."""
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return None


def generated_files(root: Path = CHECKOUT) -> list[Generated]:
    """Every generated file, with the function that renders it (imported late: each pulls in a lot)."""
    from gpucluster.tools import config_types
    from gpucluster.tools.components_reference import components_reference
    from gpucluster.tools.docs import config_reference

    return [
        Generated(root / config_types.TARGET.relative_to(CHECKOUT), config_types.render),
        Generated(root / "docs" / "config-reference.md", config_reference),
        Generated(root / "docs" / "components-reference.md", components_reference),
    ]


def checkout(root: Path = CHECKOUT) -> Path:
    """``root`` when it is a checkout of this project; a CliError naming the fix otherwise."""
    try:
        ours = 'name = "gpucluster"' in (root / "pyproject.toml").read_text()
    except OSError:
        ours = False
    if not ours:
        raise CliError(
            f"{root} is not a checkout of gpucluster: generated files are regenerated in a clone "
            "(git clone, then pip install -e .), never in an installed package"
        )
    return root


def generate(check: bool, root: Path = CHECKOUT) -> int:
    """Rewrite the stale files (``check``: name them and exit 1, writing nothing)."""
    root = checkout(root)
    rendered = [(f, f.render()) for f in generated_files(root)]
    stale = [f.name(root) for f, text in rendered if f.current() != text]
    if check:
        for name in stale:
            print(f"stale: {name}", file=sys.stderr)
        if stale:
            print(f"gpucluster generate --check: {len(stale)} generated file(s) out of date; {FIX}", file=sys.stderr)
            return EXIT_FAILED
        print(f"{len(rendered)} generated files up to date")
        return EXIT_OK
    for f, text in rendered:
        name = f.name(root)
        if name in stale:
            f.path.parent.mkdir(parents=True, exist_ok=True)
            f.path.write_text(text)
        print(f"{'wrote' if name in stale else 'up to date'}: {name}")
    return EXIT_OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """``gpucluster generate``'s subcommand."""
    gen = sub.add_parser(
        "generate",
        parents=[common],
        help="regenerate every generated file of the checkout (typed dicts, config and components references)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gen.add_argument("--check", action="store_true", help="write nothing; exit 1 naming every stale file (CI)")
    gen.set_defaults(func=lambda args: generate(args.check))
