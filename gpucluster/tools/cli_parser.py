"""The ``gpucluster`` CLI's parser class and what words its usage errors: a misspelt option is named as itself (with
the closest one the verb knows), and every verb gets a description."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """argparse's complaint about the command line, raised instead of its exit so :func:`main` words it."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """Every parser of the CLI (subparsers inherit the class): usage errors come back to :func:`main`."""

    def error(self, message: str):  # type: ignore[override]  # argparse declares NoReturn; this raises too
        raise UsageError(message, self.prog)


def _path(p: argparse.ArgumentParser, argv: list[str]) -> list[argparse.ArgumentParser]:
    """The parsers the command line walks through: the top one, then each verb named in ``argv``."""
    chain = [p]
    for token in argv:
        verbs = [a for a in chain[-1]._actions if isinstance(a, argparse._SubParsersAction)]
        if verbs and token in verbs[0].choices:
            chain.append(verbs[0].choices[token])
    return chain


def unknown_option(p: argparse.ArgumentParser, argv: list[str]) -> tuple[str, str | None]:
    """The verb's name (``gpucluster plan``) and the first ``--option`` on the command line that it does not know
    (nor an abbreviation of one), worded with the closest option it does know: a misspelt option is reported as
    itself, not as whatever argparse tripped on next (``plan --stak lab`` is not "invalid choice: 'lab'")."""
    import difflib

    chain = _path(p, argv)
    known = sorted({o for parser in chain for o in parser._option_string_actions if o.startswith("--")})
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--"):
            continue
        name = token.split("=", 1)[0]
        if name in known or sum(o.startswith(name) for o in known) == 1:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        return chain[-1].prog, f"unknown option {name}" + (f" (did you mean {close[0]}?)" if close else "")
    return chain[-1].prog, None


def describe(p: argparse.ArgumentParser) -> None:
    """Give every verb a description: its own where it has one, else the one-line help it is listed with."""
    for action in p._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        listed = {a.dest: a.help for a in action._choices_actions}
        for name, child in action.choices.items():
            if not child.description and listed.get(name):
                text = str(listed[name])
                child.description = text[0].upper() + text[1:] + "."
            describe(child)
