"""What every verb of the ``gpucluster`` CLI shares: exit codes, the one-line :class:`CliError`, the
``--config``/``--config-file`` overrides and reading a JSON plan (``plan diff``, ``policy --plan``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
EXIT_CHANGES, EXIT_DATA_LOSS = 2, 3  # plan diff --exit-code


def add_stack_option(parser: argparse.ArgumentParser, what: str = "stack name: stacks/Pulumi.<stack>.yaml") -> None:
    """``--stack``/``-s``, the same on every verb that reads a stack: no default (a verb never picks a stack for you,
    and ``images lock`` writes to the one named); :func:`check_stack` names the stacks when it is missing."""
    parser.add_argument("--stack", "-s", default=None, help=f"{what} (required; `gpucluster stacks` lists them)")


def check_stack(args: argparse.Namespace) -> None:
    """Refuse a verb that reads a stack but was given none, naming the stacks there are (``plan diff`` and
    ``policy --plan FILE`` read JSON plans, not a stack)."""
    if getattr(args, "stack", "") is not None or getattr(args, "plan_command", None) or getattr(args, "plan", None):
        return
    from gpucluster.tools.plan.run.stackfile import PlanError, stack_names

    try:
        names = ", ".join(stack_names(Path(args.project_dir))) or "none"
    except (OSError, PlanError):
        names = "none found"
    raise CliError(f"name a stack with --stack NAME (stacks here: {names})", EXIT_CONFIG)


class CliError(Exception):
    """A one-line failure of a verb: printed as ``gpucluster VERB: message``, exit ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--config-file`` values, then ``--config KEY=VALUE`` ones (values read as YAML scalars/flows)."""
    from gpucluster.tools.plan.run.stackfile import StackFileError, _read_yaml

    out: dict[str, Any] = {}
    if getattr(args, "config_file", None):
        path = Path(args.config_file)
        if not path.is_file():
            raise CliError(f"--config-file {path}: no such file")
        doc = _read_yaml(path, str(path)) or {}
        if isinstance(doc, dict) and set(doc) == {"config"} and isinstance(doc["config"], dict):
            doc = doc["config"]  # a whole stack file
        if not isinstance(doc, dict):
            raise StackFileError(f"--config-file {path}: must be a mapping of config keys to values")
        out.update({str(k): v for k, v in doc.items()})
    for item in getattr(args, "config", None) or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--config {item!r}: expected KEY=VALUE, e.g. --config gpucluster:tags='{{team: ml}}'", EXIT_CONFIG)
        from gpucluster.load import load_yaml

        value = load_yaml(text, f"--config {key}") if text.strip() else ""
        out[key.strip()] = text if value is None else value
    return out


def read_plan(path_text: str) -> dict[str, Any]:
    path = Path(path_text)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"{path}: no such file (write one with `gpucluster plan --stack S --json {path}`)") from None
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{path} is not a JSON plan: byte 0x{exc.object[exc.start]:02x} at offset {exc.start} is not UTF-8"
        ) from None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not a JSON plan: {exc} (write one with `gpucluster plan --json FILE`)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("resources", []), list):
        raise CliError(f"{path} is not a JSON plan: expected an object with `resources` (from `gpucluster plan --json`)")
    return doc
