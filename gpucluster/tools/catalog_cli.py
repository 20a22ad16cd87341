"""``gpucluster catalog``: the instance facts (``show``), and rebuilding them (``refresh``: EC2 DescribeInstanceTypes)
and one region's prices (``refresh-prices``: the AWS Price List and the spot price history)."""

from __future__ import annotations

import argparse
from typing import Any

from gpucluster.tools.cli_common import EXIT_OK, CliError


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


def _catalog_refresh_prices(args: argparse.Namespace) -> int:
    from gpucluster.tools.catalog_refresh import RefreshError
    from gpucluster.tools.price_refresh import refresh_prices

    try:
        done = refresh_prices(args.region, instance_types=args.types, endpoint_url=args.endpoint_url)
    except RefreshError as exc:
        raise CliError(str(exc)) from None
    print(f"priced {len(done.entries)} instance type(s) in {done.region} on {done.date}")
    for label, missing in (("no on-demand price", done.no_on_demand), ("no spot price", done.no_spot)):
        if missing:
            print(f"  {label} in {done.region}: {', '.join(missing)}")
    print(f"priced {len(done.services.entries)} service price(s) in {done.region} from the Price List")
    for key, why in done.services.kept.items():
        print(f"  {key}: {why}")
    from gpucluster.facts.prices import PRICES_FILE

    print(f"wrote {PRICES_FILE}")
    return EXIT_OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """``catalog show``, ``catalog refresh``, ``catalog refresh-prices``."""
    cat = sub.add_parser("catalog", parents=[common], help="instance facts").add_subparsers(dest="catalog_command", required=True)
    show = cat.add_parser("show", parents=[common], help="print the facts of one or every instance type")
    show.add_argument("type", nargs="?", help="an instance type, e.g. p5.48xlarge (default: every type, one line each)")
    show.set_defaults(func=_catalog_show)
    ref = cat.add_parser(
        "refresh", parents=[common], help="rebuild the catalog from EC2 DescribeInstanceTypes (needs credentials)"
    )
    ref.add_argument("--region", default="us-east-1", help="the region whose DescribeInstanceTypes to read (default: us-east-1)")
    ref.add_argument("--add", nargs="*", default=[], metavar="TYPE", help="instance types to add")
    ref.add_argument("--endpoint-url", help="EC2 endpoint (e.g. a local moto server)")
    ref.set_defaults(func=_catalog_refresh)
    prices = cat.add_parser(
        "refresh-prices",
        parents=[common],
        help=(
            "rebuild one region's on-demand and service (AWS Price List) and spot (EC2 spot price history) prices "
            "(needs credentials)"
        ),
    )
    prices.add_argument("--region", required=True, help="the region whose prices to rebuild, e.g. us-east-1")
    prices.add_argument("--types", nargs="*", default=None, metavar="TYPE", help="instance types (default: the catalog's)")
    prices.add_argument("--endpoint-url", help="AWS endpoint for both APIs (e.g. a local server)")
    prices.set_defaults(func=_catalog_refresh_prices)
