"""``gpucluster``: the offline plan and the project's other verbs.

    gpucluster plan --stack dev               what `pulumi up` would create (offline, no credentials)
    gpucluster plan --stack dev --json        the same, machine-readable
    gpucluster plan --stack dev --detail      everything in full (every IAM statement), wrapped to --width N
    gpucluster plan diff old.json new.json    what changed between two JSON plans (for CI): replacements,
                                              data loss, disruption; --format text|markdown|json,
                                              --exit-code, --allow-data-loss, --expect-no-changes
    gpucluster preflight --stack dev          check the config against the AWS account (needs credentials)
    gpucluster policy --stack dev             the policy pack's rules over the offline plan (or --plan FILE)
    gpucluster stacks                         the stacks in stacks/
    gpucluster catalog show [TYPE]            instance facts
    gpucluster catalog refresh --region R     rebuild the catalog from EC2 DescribeInstanceTypes
    gpucluster catalog refresh-prices --region R   rebuild R's on-demand and spot prices (Price List, spot history)
    gpucluster docs [--out DIR]               regenerate docs/config-reference.md (a checkout's; installed: --out)
    gpucluster generate [--check]             regenerate every generated file of the checkout (--check: exit 1 if stale)
    gpucluster bundle --stack X --out DIR     the files a hybrid site installs on its own slurmctld host
    gpucluster dashboards --out DIR           the Grafana dashboards as JSON files, to import into any Grafana
    gpucluster usage --stack X [--since DAY]  the commands that print GPU-hours and cost per team and user (head node)
    gpucluster baseline --stack X             each node group's figures per image after image changes (needs credentials)
    gpucluster images lock --stack X          pin each node group's base image (AMI) in the stack file (needs credentials)
    gpucluster preview --base B --head H --out DIR   a pull request's plans and its review comment, offline
    gpucluster preview-scope --base B --head H       which stacks a change affects (for $GITHUB_OUTPUT)
    gpucluster preview-comment FILE --repo R --pr N  create or edit the pull request's preview comment

Every verb that reads a stack takes --stack NAME (stacks/Pulumi.<NAME>.yaml) and has no default stack.

Options that every verb takes, anywhere on the command line:
    --project-dir DIR                         the folder with Pulumi.yaml and __main__.py (default: the nearest folder above the current one with Pulumi.yaml)

Values a stack takes from a Pulumi ESC environment (`environment:` in its stack file) are not visible
offline: give them to `plan` and `preflight` with --config KEY=VALUE (repeatable) or --config-file FILE
(a YAML mapping of keys to values, like a stack file's `config:`).

Exit codes:
    0  ok
    2  invalid stack config or command line: every problem is listed (the config path, the value, the fix);
       plan: the program looks up a data source the offline plan does not answer (named, with its arguments)
    3  plan diff --exit-code: a change loses data (2: it changes something; 0: nothing);
       policy: the stack breaks a rule of the policy pack (each violation is listed with its fix)
    1  anything else: no such stack or project, no AWS credentials, an AWS call refused (preflight: a
       check that could not run, and no errors), an unreadable file
No verb prints a traceback (set GPUCLUSTER_TRACEBACK=1 to see one for an unexpected error).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from gpucluster.config.errors import Level
from gpucluster.tools.cli_common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    add_stack_option,
    check_stack,
)
from gpucluster.tools.cli_common import overrides as _overrides
from gpucluster.tools.cli_common import read_plan as _read_plan
from gpucluster.tools.cli_parser import Parser, UsageError, describe, unknown_option
from gpucluster.tools.plan.show.width import DEFAULT_WIDTH, MIN_WIDTH


def _esc_note(args: argparse.Namespace) -> str | None:
    from gpucluster.tools.plan.run.stackfile import ESC_NOTE, stack_environments

    envs = stack_environments(args.stack, Path(args.project_dir))
    return f"stack {args.stack!r} " + ESC_NOTE.format(envs=", ".join(envs)) if envs else None


def _plan(args: argparse.Namespace) -> int:
    from gpucluster.tools.plan.run.engine import run_plan
    from gpucluster.tools.plan.run.json import dumps
    from gpucluster.tools.plan.show.colour import show
    from gpucluster.tools.plan.show.report import render_text
    from gpucluster.tools.plan.show.width import output_width

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
        width = output_width(sys.stdout, args.width)
        full_tree = True if args.full_tree else None
        show(render_text(plan, files=files, full_tree=full_tree, width=width, detail=args.detail))
    return EXIT_OK if plan.ok else EXIT_CONFIG


def _plan_diff(args: argparse.Namespace) -> int:
    from gpucluster.tools.plan.diff.review import exit_status, render, review

    old, new = _read_plan(args.old), _read_plan(args.new)
    for path, doc in ((args.old, old), (args.new, new)):
        if doc.get("ok") is False:
            raise CliError(
                f"{path} is the plan of a stack config that does not load (`ok: false`); fix the config and plan again"
            )
    try:
        r = review(old, new)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CliError(f"{args.old} and {args.new} must both be JSON plans from `gpucluster plan --json` ({exc!r})") from None
    sys.stdout.write(render(r, args.format))
    status, message = exit_status(
        r.comparison, exit_code=args.exit_code, allow_data_loss=args.allow_data_loss, expect_no_changes=args.expect_no_changes
    )
    if message:
        print(f"gpucluster plan diff: {message}", file=sys.stderr)
    return status


def _policy(args: argparse.Namespace) -> int:
    from gpucluster.tools.policy_check import EXIT_VIOLATIONS, check, render_json, render_text

    if args.plan:
        doc = _read_plan(args.plan)
    else:
        from gpucluster.tools.plan.run.engine import run_plan
        from gpucluster.tools.plan.run.json import to_json

        doc = to_json(run_plan(args.stack, Path(args.project_dir), config_overrides=_overrides(args)))
    if doc.get("ok") is False:
        print(f"gpucluster policy: the plan failed, nothing to check:\n{doc.get('error')}", file=sys.stderr)
        return EXIT_CONFIG
    found = check(doc)
    sys.stdout.write(render_json(doc, found) if args.json else render_text(doc, found))
    return EXIT_VIOLATIONS if found else EXIT_OK


def _preflight(args: argparse.Namespace) -> int:
    from gpucluster.facts.catalog import load_catalog
    from gpucluster.load import load_spec
    from gpucluster.tools.catalog_refresh import CREDENTIALS_FIX
    from gpucluster.tools.plan.run.stackfile import load_stack_config
    from gpucluster.tools.preflight import Clients, NoCredentials, failure_reason, preflight

    project, config, _ = load_stack_config(args.stack, Path(args.project_dir))
    overrides = _overrides(args)
    from gpucluster.tools.plan.run.stackfile import as_config

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
    from gpucluster.tools.plan.run.stackfile import stack_names

    print("\n".join(stack_names(Path(args.project_dir))))
    return EXIT_OK


def _docs(args: argparse.Namespace) -> int:
    from gpucluster.tools.docs import NotACheckout, reference_path, write_config_reference

    try:
        path = reference_path(Path(args.out) if args.out else None)
    except NotACheckout as exc:
        raise CliError(str(exc), EXIT_CONFIG) from None
    if path.parent.exists() and not path.parent.is_dir():
        raise CliError(f"--out {args.out}: not a folder", EXIT_CONFIG)
    print(f"wrote {write_config_reference(path)}")
    return EXIT_OK


def package_version() -> str:
    """The installed distribution's version (a checkout without an install says so)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpucluster")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def parser() -> argparse.ArgumentParser:
    from gpucluster.tools.baseline_cli import register as register_baseline
    from gpucluster.tools.bundle_cli import register as register_bundle
    from gpucluster.tools.catalog_cli import register as register_catalog
    from gpucluster.tools.ci.cli import register as register_preview
    from gpucluster.tools.dashboards_cli import register as register_dashboards
    from gpucluster.tools.generate import register as register_generate
    from gpucluster.tools.images_cli import register as register_images
    from gpucluster.tools.plan.run.stackfile import PROJECT_DIR
    from gpucluster.tools.usage_cli import register as register_usage

    # --project-dir is accepted before or after the verb: each subcommand takes it too, defaulting to
    # "not given" so that a value before the verb survives.
    common = Parser(add_help=False)
    common.add_argument("--project-dir", default=argparse.SUPPRESS, help="directory holding Pulumi.yaml and __main__.py")
    values = Parser(add_help=False)
    values.add_argument(
        "--config", "-c", action="append", metavar="KEY=VALUE", help="set a config value (repeatable; wins over the stack file)"
    )
    values.add_argument(
        "--config-file", metavar="FILE", help="a YAML mapping of config keys to values (e.g. what ESC would supply)"
    )

    p = Parser(prog="gpucluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--project-dir",
        default=str(PROJECT_DIR),
        help="directory holding Pulumi.yaml (default: the nearest folder above the current one with Pulumi.yaml)",
    )
    p.add_argument("--version", action="version", version=f"gpucluster {package_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    _register_plan(sub, common, values)

    pre = sub.add_parser(
        "preflight", parents=[common, values], help="check the config against the AWS account (boto3; needs credentials)"
    )
    add_stack_option(pre)
    pre.add_argument("--endpoint-url", help="AWS endpoint (e.g. a local moto server)")
    pre.set_defaults(func=_preflight)

    pol = sub.add_parser("policy", parents=[common, values], help="check the offline plan against the policy pack's rules")
    add_stack_option(pol)
    pol.add_argument("--plan", metavar="FILE", help="check this JSON plan (from `gpucluster plan --json`) instead of planning")
    pol.add_argument("--json", action="store_true", help="print the rules and violations as JSON")
    pol.set_defaults(func=_policy)

    sub.add_parser("stacks", parents=[common], help="list the stacks in stacks/").set_defaults(func=_stacks)

    register_catalog(sub, common)

    docs = sub.add_parser(
        "docs", parents=[common], help="regenerate docs/config-reference.md (in the checkout gpucluster runs from, or --out DIR)"
    )
    docs.add_argument(
        "--out", metavar="DIR", help="write config-reference.md into DIR (needed when gpucluster is installed, not a checkout)"
    )
    docs.set_defaults(func=_docs)
    register_preview(sub, common)
    register_bundle(sub, common, values)
    register_dashboards(sub, common)
    register_usage(sub, common, values)
    register_baseline(sub, common, values)
    register_images(sub, common)
    register_generate(sub, common)
    describe(p)
    return p


def _register_plan(sub: Any, common: argparse.ArgumentParser, values: argparse.ArgumentParser) -> None:
    """``plan`` and ``plan diff``."""
    plan = sub.add_parser("plan", parents=[common, values], help="show what `pulumi up` would create, offline")
    plan_sub = plan.add_subparsers(dest="plan_command")
    add_stack_option(plan)
    plan.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the plan as JSON (to FILE, or stdout)")
    shown = plan.add_mutually_exclusive_group()
    shown.add_argument("--files", action="store_true", help="print every rendered file in full (default: one line each)")
    shown.add_argument("--no-files", action="store_true", help="leave the rendered files out of the text plan")
    plan.add_argument(
        "--full-tree",
        action="store_true",
        help="every resource on lines of its own (default: so where the plan fits on two screens, else siblings folded)",
    )
    plan.add_argument(
        "--detail",
        action="store_true",
        help="everything in full: every resource on lines of its own, every IAM statement, price source and output "
        "value, long lines wrapped to the width (no two-screen limit)",
    )
    plan.add_argument(
        "--width",
        type=_width,
        metavar="N",
        help="the widest line of the text plan (default: the terminal's columns when the output is a terminal, else "
        f"{DEFAULT_WIDTH}); longer content is elided (… and N more) or wrapped under its item",
    )
    plan.set_defaults(func=_plan)
    d = plan_sub.add_parser(
        "diff",
        parents=[common],
        help="compare two JSON plans: what `pulumi up` would create, update, replace, delete; data loss; disruption",
        description="Compare two JSON plans (from `gpucluster plan --stack S --json FILE`), matched by logical name "
        "without the stack prefix, so plans of two stacks compare. Exit codes: 0 (always, without flags); with "
        "--exit-code 0 no change, 2 changes, 3 a change loses data (2 with --allow-data-loss); with "
        "--expect-no-changes 2 on any change; 1 an unreadable or invalid plan.",
    )
    d.add_argument("old", help="the plan before the change (e.g. of the base branch)")
    d.add_argument("new", help="the plan after the change (e.g. of the pull request)")
    d.add_argument(
        "--format", choices=("text", "markdown", "json"), default="text", help="text (default), markdown (a PR comment), json"
    )
    d.add_argument("--exit-code", action="store_true", help="exit 0 no change, 2 changes, 3 a change that loses data")
    d.add_argument("--allow-data-loss", action="store_true", help="with --exit-code: data loss exits 2, not 3")
    d.add_argument("--expect-no-changes", action="store_true", help="exit 2 with a message when anything changes")
    d.set_defaults(func=_plan_diff)


def _width(text: str) -> int:
    """``--width N``: a whole number of columns, at least :data:`MIN_WIDTH`."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_WIDTH:
        raise argparse.ArgumentTypeError(f"{text!r} is not a width: give a whole number of columns, at least {MIN_WIDTH}")
    return value


def _verb(args: argparse.Namespace) -> str:
    parts = [
        args.command,
        getattr(args, "plan_command", None) or getattr(args, "catalog_command", None) or getattr(args, "images_command", None),
    ]
    return " ".join(p for p in parts if p)


def main(argv: list[str] | None = None) -> int:
    """Run one verb. Every failure is one message on stderr and an exit code (see the module doc)."""
    from gpucluster.config.errors import ConfigError
    from gpucluster.load import YamlError
    from gpucluster.tools.plan.run.lookups import UnansweredInvoke
    from gpucluster.tools.plan.run.stackfile import PlanError, StackFileError

    p = parser()
    words = sys.argv[1:] if argv is None else argv
    try:
        args = p.parse_args(words)
    except UsageError as exc:
        prog, unknown = unknown_option(p, words)
        prog = prog if unknown else exc.prog
        p.exit(EXIT_CONFIG, f"{prog}: error: {unknown or exc}\n(`{prog} --help` lists the options)\n")
    verb = _verb(args)
    try:
        check_stack(args)
        return int(args.func(args))
    except KeyboardInterrupt:
        return EXIT_FAILED
    except ConfigError as exc:  # preflight's own load of the config
        print(exc, file=sys.stderr)
        return EXIT_CONFIG
    except (StackFileError, YamlError) as exc:
        print(f"gpucluster {verb}: invalid config: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except UnansweredInvoke as exc:  # the program looks up something the offline plan cannot answer
        print(f"gpucluster {verb}: {exc}", file=sys.stderr)
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
