"""``gpucluster``: the offline plan and the project's other verbs.

    gpucluster plan --stack dev               what `pulumi up` would create (offline, no credentials)
    gpucluster plan --stack dev --json        the same, machine-readable
    gpucluster plan diff old.json new.json    what changed between two JSON plans (for CI)
    gpucluster preflight --stack dev          check the config against the AWS account (needs credentials)
    gpucluster stacks                         the stacks in stacks/
    gpucluster catalog show [TYPE]            instance facts
    gpucluster catalog refresh --region R     rebuild the catalog from EC2 DescribeInstanceTypes
    gpucluster docs                           regenerate docs/config-reference.md

Exit codes: 0 ok, 2 invalid stack config (every problem is listed), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


def _plan(args: argparse.Namespace) -> int:
    from components.plan.engine import PlanError, run_plan
    from components.plan.report import dumps, render_text

    try:
        plan = run_plan(args.stack, Path(args.project_dir))
    except PlanError as exc:
        print(f"gpucluster plan: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json is not None:
        text = dumps(plan)
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text)
            print(f"wrote {args.json}", file=sys.stderr)
    else:
        sys.stdout.write(render_text(plan, show_files=not args.no_files))
    return EXIT_OK if plan.ok else EXIT_CONFIG


def _plan_diff(args: argparse.Namespace) -> int:
    from components.plan.report import diff

    old, new = (json.loads(Path(p).read_text()) for p in (args.old, args.new))
    lines = diff(old, new)
    print("\n".join(lines) if lines else "no changes")
    return EXIT_OK


def _preflight(args: argparse.Namespace) -> int:
    from components.plan.engine import PlanError, load_stack_config
    from components.preflight import Clients, preflight
    from components.spec.catalog import load_catalog
    from components.spec.errors import ConfigError, Level
    from components.spec.load import load_spec

    try:
        _, config, _ = load_stack_config(args.stack, Path(args.project_dir))
        loaded = load_spec(config, stack=args.stack)
    except PlanError as exc:
        print(f"gpucluster preflight: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ConfigError as exc:
        print(exc)
        return EXIT_CONFIG
    spec = loaded.spec
    findings = preflight(spec, load_catalog(), Clients.create(spec.region, args.endpoint_url))
    print(f"gpucluster preflight — stack {args.stack} (region {spec.region})")
    for f in findings:
        print(f"  {f.level.value:<7} {f.render()}")
    errors = [f for f in findings if f.level is Level.ERROR]
    print(f"{len(errors)} error(s), {len(findings) - len(errors)} other finding(s)" if findings else "  everything checked out")
    return EXIT_CONFIG if errors else EXIT_OK


def _stacks(args: argparse.Namespace) -> int:
    from components.plan.engine import stack_names

    print("\n".join(stack_names(Path(args.project_dir))))
    return EXIT_OK


def _catalog_show(args: argparse.Namespace) -> int:
    from components.spec.catalog import load_catalog

    catalog = load_catalog()
    types = [args.type] if args.type else list(catalog)
    for t in types:
        f = catalog.get(t)
        if f is None:
            print(f"unknown instance type {t!r}; close: {', '.join(catalog.suggest(t)) or 'none'}", file=sys.stderr)
            return EXIT_FAILED
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
    from components.catalog_refresh import refresh

    path = refresh(args.region, add=args.add, endpoint_url=args.endpoint_url)
    print(f"wrote {path}")
    return EXIT_OK


def _docs(args: argparse.Namespace) -> int:
    from components.docs import write_config_reference

    print(f"wrote {write_config_reference()}")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    from components.plan.engine import PROJECT_DIR

    p = argparse.ArgumentParser(prog="gpucluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--project-dir", default=str(PROJECT_DIR), help="directory holding Pulumi.yaml (default: this checkout)")
    sub = p.add_subparsers(dest="command", required=True)

    plan = sub.add_parser("plan", help="show what `pulumi up` would create, offline")
    plan_sub = plan.add_subparsers(dest="plan_command")
    plan.add_argument("--stack", "-s", default="dev", help="stack name: stacks/Pulumi.<stack>.yaml (default: dev)")
    plan.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the plan as JSON (to FILE, or stdout)")
    plan.add_argument("--no-files", action="store_true", help="leave rendered file contents out of the text plan")
    plan.set_defaults(func=_plan)
    d = plan_sub.add_parser("diff", help="compare two JSON plans")
    d.add_argument("old")
    d.add_argument("new")
    d.set_defaults(func=_plan_diff)

    pre = sub.add_parser("preflight", help="check the config against the AWS account (boto3; needs credentials)")
    pre.add_argument("--stack", "-s", default="dev", help="stack name (default: dev)")
    pre.add_argument("--endpoint-url", help="AWS endpoint (e.g. a local moto server)")
    pre.set_defaults(func=_preflight)

    sub.add_parser("stacks", help="list the stacks in stacks/").set_defaults(func=_stacks)

    cat = sub.add_parser("catalog", help="instance facts").add_subparsers(dest="catalog_command", required=True)
    show = cat.add_parser("show", help="print the facts of one or every instance type")
    show.add_argument("type", nargs="?")
    show.set_defaults(func=_catalog_show)
    ref = cat.add_parser("refresh", help="rebuild the catalog from EC2 DescribeInstanceTypes (needs credentials)")
    ref.add_argument("--region", default="us-east-1")
    ref.add_argument("--add", nargs="*", default=[], metavar="TYPE", help="instance types to add")
    ref.add_argument("--endpoint-url", help="EC2 endpoint (e.g. a local moto server)")
    ref.set_defaults(func=_catalog_refresh)

    sub.add_parser("docs", help="regenerate docs/config-reference.md").set_defaults(func=_docs)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
