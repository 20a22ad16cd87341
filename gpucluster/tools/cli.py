"""``gpucluster``: the offline plan and the project's other verbs.

    gpucluster plan --stack dev               what `pulumi up` would create (offline, no credentials)
    gpucluster plan --stack dev --json        the same, machine-readable
    gpucluster plan diff old.json new.json    what changed between two JSON plans (for CI)
    gpucluster preflight --stack dev          check the config against the AWS account (needs credentials)
    gpucluster stacks                         the stacks in stacks/
    gpucluster catalog show [TYPE]            instance facts
    gpucluster catalog refresh --region R     rebuild the catalog from EC2 DescribeInstanceTypes
    gpucluster docs                           regenerate docs/config-reference.md

Options that every verb takes, anywhere on the command line:
    --project-dir DIR                         the folder with Pulumi.yaml and __main__.py (default: the nearest folder above the current one with Pulumi.yaml)

Values a stack takes from a Pulumi ESC environment (`environment:` in its stack file) are not visible
offline: give them to `plan` and `preflight` with --config KEY=VALUE (repeatable) or --config-file FILE
(a YAML mapping of keys to values, like a stack file's `config:`).

Exit codes:
    0  ok
    2  invalid stack config or command line: every problem is listed (the config path, the value, the fix)
    1  anything else: no such stack or project, no AWS credentials, an AWS call refused (preflight: a
       check that could not run, and no errors), an unreadable file
No verb prints a traceback (set GPUCLUSTER_TRACEBACK=1 to see one for an unexpected error).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from gpucluster.config.errors import Level

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


class CliError(Exception):
    """A one-line failure of a verb: printed as ``gpucluster VERB: message``, exit ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--config-file`` values, then ``--config KEY=VALUE`` ones (values read as YAML scalars/flows)."""
    from gpucluster.tools.plan.stackfile import StackFileError, _read_yaml

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


def _esc_note(args: argparse.Namespace) -> str | None:
    from gpucluster.tools.plan.stackfile import ESC_NOTE, stack_environments

    envs = stack_environments(args.stack, Path(args.project_dir))
    return f"stack {args.stack!r} " + ESC_NOTE.format(envs=", ".join(envs)) if envs else None


def _plan(args: argparse.Namespace) -> int:
    from gpucluster.tools.plan.colour import show
    from gpucluster.tools.plan.engine import run_plan
    from gpucluster.tools.plan.jsonplan import dumps
    from gpucluster.tools.plan.report import render_text

    overrides = _overrides(args)
    note = _esc_note(args)
    plan = run_plan(args.stack, Path(args.project_dir), config_overrides=overrides)
    if note:
        print(f"note: {note}" + (f" (given: {', '.join(sorted(overrides))})" if overrides else ""), file=sys.stderr)
    if args.json is not None:
        text = dumps(plan)
        if args.json == "-":
            sys.stdout.write(text)
        else:
            try:
                Path(args.json).write_text(text)
            except OSError as exc:
                raise CliError(f"cannot write {args.json}: {exc.strerror or exc}") from None
            print(f"wrote {args.json}", file=sys.stderr)
    else:
        files = "none" if args.no_files else "full" if args.files else "list"
        show(render_text(plan, files=files, full_tree=True if args.full_tree else None))
    return EXIT_OK if plan.ok else EXIT_CONFIG


def _read_plan(path_text: str) -> dict[str, Any]:
    path = Path(path_text)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"{path}: no such file (write one with `gpucluster plan --stack S --json {path}`)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not a JSON plan: {exc} (write one with `gpucluster plan --json FILE`)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("resources", []), list):
        raise CliError(f"{path} is not a JSON plan: expected an object with `resources` (from `gpucluster plan --json`)")
    return doc


def _plan_diff(args: argparse.Namespace) -> int:
    from gpucluster.tools.plan.diff import diff

    old, new = _read_plan(args.old), _read_plan(args.new)
    try:
        lines = diff(old, new)
    except (KeyError, TypeError, AttributeError) as exc:
        raise CliError(f"{args.old} and {args.new} must both be JSON plans from `gpucluster plan --json` ({exc!r})") from None
    print("\n".join(lines) if lines else "no changes")
    return EXIT_OK


def _preflight(args: argparse.Namespace) -> int:
    from gpucluster.facts.catalog import load_catalog
    from gpucluster.load import load_spec
    from gpucluster.tools.catalog_refresh import CREDENTIALS_FIX
    from gpucluster.tools.plan.stackfile import load_stack_config
    from gpucluster.tools.preflight import Clients, NoCredentials, failure_reason, preflight

    project, config, _ = load_stack_config(args.stack, Path(args.project_dir))
    overrides = _overrides(args)
    from gpucluster.tools.plan.stackfile import as_config

    config.update(as_config(project, overrides)[0])
    note = _esc_note(args)
    if note:
        print(f"note: {note}", file=sys.stderr)
    spec = load_spec(config, stack=args.stack).spec
    from botocore.exceptions import BotoCoreError

    try:
        clients = Clients.create(spec.region, args.endpoint_url)
        findings = preflight(spec, load_catalog(), clients)
    except NoCredentials as exc:
        raise CliError(f"no AWS credentials ({exc}); {CREDENTIALS_FIX}") from None
    except BotoCoreError as exc:
        raise CliError(f"cannot reach AWS: {failure_reason(exc)}") from None
    print(f"gpucluster preflight — stack {args.stack} (region {spec.region})")
    for f in findings:
        print(f"  {f.level.value:<7} {f.render()}")
    errors = [f for f in findings if f.level is Level.ERROR]
    unchecked = [f for f in findings if f.code == "check-failed"]
    print(f"{len(errors)} error(s), {len(findings) - len(errors)} other finding(s)" if findings else "  everything checked out")
    if errors:
        return EXIT_CONFIG
    # A check that could not run is not a pass: exit 1 so CI does not read it as one.
    return EXIT_FAILED if unchecked else EXIT_OK


def _stacks(args: argparse.Namespace) -> int:
    from gpucluster.tools.plan.stackfile import stack_names

    print("\n".join(stack_names(Path(args.project_dir))))
    return EXIT_OK


def _catalog_show(args: argparse.Namespace) -> int:
    from gpucluster.facts.catalog import load_catalog

    catalog = load_catalog()
    types = [args.type] if args.type else list(catalog)
    for t in types:
        f = catalog.get(t)
        if f is None:
            raise CliError(
                f"unknown instance type {t!r}; close: {', '.join(catalog.suggest(t)) or 'none'} (list: `gpucluster catalog show`)"
            )
        acc = (
            f"{f.accelerator_count} × {f.accelerator_model} ({f.accelerator_memory_mib // 1024} GiB)"
            if f.accelerators
            else "no accelerator"
        )
        efa = f"{len(f.efa_cards)} EFA cards of {len(f.network_cards)}" if f.efa_supported else "no EFA"
        nvme = f"{f.nvme_disk_count} × {f.nvme_disk_size_gb} GB NVMe" if f.nvme_disk_count else "no NVMe"
        print(
            f"{t:<18} {f.vcpus:>3} vCPU {f.memory_gib:>6.0f} GiB  {acc:<32} {efa:<26} {f.efa_bandwidth_gbps or f.total_bandwidth_gbps:>6.0f} Gbps  {nvme}{'  GDS' if f.gds_supported else ''}"
        )
    return EXIT_OK


def _catalog_refresh(args: argparse.Namespace) -> int:
    from gpucluster.tools.catalog_refresh import RefreshError, refresh

    try:
        path = refresh(args.region, add=args.add, endpoint_url=args.endpoint_url)
    except RefreshError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {path}")
    return EXIT_OK


def _docs(args: argparse.Namespace) -> int:
    from gpucluster.tools.docs import write_config_reference

    print(f"wrote {write_config_reference()}")
    return EXIT_OK


def package_version() -> str:
    """The installed distribution's version (a checkout without an install says so)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpucluster")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def parser() -> argparse.ArgumentParser:
    from gpucluster.tools.plan.stackfile import PROJECT_DIR

    # --project-dir is accepted before or after the verb: each subcommand takes it too, defaulting to
    # "not given" so that a value before the verb survives.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--project-dir", default=argparse.SUPPRESS, help="directory holding Pulumi.yaml and __main__.py")
    values = argparse.ArgumentParser(add_help=False)
    values.add_argument(
        "--config", "-c", action="append", metavar="KEY=VALUE", help="set a config value (repeatable; wins over the stack file)"
    )
    values.add_argument(
        "--config-file", metavar="FILE", help="a YAML mapping of config keys to values (e.g. what ESC would supply)"
    )

    p = argparse.ArgumentParser(prog="gpucluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--project-dir",
        default=str(PROJECT_DIR),
        help="directory holding Pulumi.yaml (default: the nearest folder above the current one with Pulumi.yaml)",
    )
    p.add_argument("--version", action="version", version=f"gpucluster {package_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    plan = sub.add_parser("plan", parents=[common, values], help="show what `pulumi up` would create, offline")
    plan_sub = plan.add_subparsers(dest="plan_command")
    plan.add_argument("--stack", "-s", default="dev", help="stack name: stacks/Pulumi.<stack>.yaml (default: dev)")
    plan.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the plan as JSON (to FILE, or stdout)")
    shown = plan.add_mutually_exclusive_group()
    shown.add_argument("--files", action="store_true", help="print every rendered file in full (default: one line each)")
    shown.add_argument("--no-files", action="store_true", help="leave the rendered files out of the text plan")
    plan.add_argument(
        "--full-tree",
        action="store_true",
        help="every resource on lines of its own (default: so where the plan fits on two screens, else siblings folded)",
    )
    plan.set_defaults(func=_plan)
    d = plan_sub.add_parser("diff", parents=[common], help="compare two JSON plans")
    d.add_argument("old")
    d.add_argument("new")
    d.set_defaults(func=_plan_diff)

    pre = sub.add_parser(
        "preflight", parents=[common, values], help="check the config against the AWS account (boto3; needs credentials)"
    )
    pre.add_argument("--stack", "-s", default="dev", help="stack name (default: dev)")
    pre.add_argument("--endpoint-url", help="AWS endpoint (e.g. a local moto server)")
    pre.set_defaults(func=_preflight)

    sub.add_parser("stacks", parents=[common], help="list the stacks in stacks/").set_defaults(func=_stacks)

    cat = sub.add_parser("catalog", parents=[common], help="instance facts").add_subparsers(dest="catalog_command", required=True)
    show = cat.add_parser("show", parents=[common], help="print the facts of one or every instance type")
    show.add_argument("type", nargs="?")
    show.set_defaults(func=_catalog_show)
    ref = cat.add_parser(
        "refresh", parents=[common], help="rebuild the catalog from EC2 DescribeInstanceTypes (needs credentials)"
    )
    ref.add_argument("--region", default="us-east-1")
    ref.add_argument("--add", nargs="*", default=[], metavar="TYPE", help="instance types to add")
    ref.add_argument("--endpoint-url", help="EC2 endpoint (e.g. a local moto server)")
    ref.set_defaults(func=_catalog_refresh)

    sub.add_parser("docs", parents=[common], help="regenerate docs/config-reference.md").set_defaults(func=_docs)
    return p


def _verb(args: argparse.Namespace) -> str:
    parts = [args.command, getattr(args, "plan_command", None) or getattr(args, "catalog_command", None)]
    return " ".join(p for p in parts if p)


def main(argv: list[str] | None = None) -> int:
    """Run one verb. Every failure is one message on stderr and an exit code (see the module doc)."""
    from gpucluster.config.errors import ConfigError
    from gpucluster.load import YamlError
    from gpucluster.tools.plan.stackfile import PlanError, StackFileError

    args = parser().parse_args(argv)
    verb = _verb(args)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return EXIT_FAILED
    except ConfigError as exc:  # preflight's own load of the config
        print(exc, file=sys.stderr)
        return EXIT_CONFIG
    except (StackFileError, YamlError) as exc:
        print(f"gpucluster {verb}: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except CliError as exc:
        print(f"gpucluster {verb}: {exc}", file=sys.stderr)
        return exc.code
    except PlanError as exc:
        print(f"gpucluster {verb}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"gpucluster {verb}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # the last guard: never a traceback unless asked for
        if os.environ.get("GPUCLUSTER_TRACEBACK"):
            raise
        print(
            f"gpucluster {verb}: unexpected error: {type(exc).__name__}: {exc} "
            "(please report it; GPUCLUSTER_TRACEBACK=1 shows where)",
            file=sys.stderr,
        )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
