"""``gpucluster dashboards --out DIR``: write the Grafana dashboards as JSON files, to import into any Grafana (the
stack output ``monitoring.dashboards`` names this command where the stack provisions none).

The files are the shipped ones (:mod:`gpucluster.render.monitoring.dashboards`: every panel, a ``datasource``
variable to pick the Prometheus data source on import). The folder is created if missing; a file of the same name
that differs (a copy someone edited) is refused, never overwritten."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from gpucluster.tools.cli_common import EXIT_OK, CliError


def dashboard_files() -> dict[str, str]:
    """``{file name: text}``, as the package ships them."""
    from gpucluster.render.monitoring.dashboards import dashboards

    return {name: json.dumps(board, indent=2, sort_keys=True) + "\n" for name, board in sorted(dashboards().items())}


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out} is a file; give a folder (it is created if missing)")
    files = dashboard_files()
    differ = sorted(n for n, text in files.items() if (out / n).exists() and (out / n).read_text(errors="replace") != text)
    if differ:
        raise CliError(
            f"--out {out} already holds {', '.join(differ)} with other content (an edited copy?); "
            "give another folder, or move those files away"
        )
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, out / name)
    print(f"wrote {len(files)} dashboards to {out.resolve()}: import each in Grafana (Dashboards → New → Import)")
    for name in files:
        print(f"  {(out / name).resolve()}")
    return EXIT_OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    d = sub.add_parser("dashboards", parents=[common], help="write the Grafana dashboards as JSON files to import")
    d.add_argument("--out", required=True, metavar="DIR", help="folder to write them to (created if missing)")
    d.set_defaults(func=run)
