"""``gpucluster bundle --stack X --out DIR [--outputs FILE]``: write the bundle a site installs on its own
slurmctld host (:mod:`gpucluster.render.hybrid.bundle`).

Offline the values only AWS knows are placeholders (the bundle can be reviewed, not installed); ``--outputs``
fills them from ``pulumi stack output --json`` (the whole document, or just its ``hybrid`` object).
The folder is created if missing; a folder that holds anything but an earlier bundle is refused, so nothing
of the user's is ever overwritten."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from gpucluster.tools.cli_common import EXIT_CONFIG, EXIT_OK, CliError, add_stack_option


def _aws_values(path: str | None) -> Any:
    from gpucluster.render.hybrid.bundle import AwsValues

    if path is None:
        return AwsValues()
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"--outputs {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--outputs {path}: not JSON (line {exc.lineno}: {exc.msg}); write it with `pulumi stack output --json`"
        ) from None
    if isinstance(doc, dict) and "hybrid" in doc:
        doc = doc["hybrid"]
    if not isinstance(doc, dict):
        raise CliError(f"--outputs {path}: expected the stack outputs (an object with hybrid)", EXIT_CONFIG)
    try:
        return AwsValues.from_output(doc)
    except ValueError as exc:
        raise CliError(f"--outputs {path}: {exc}", EXIT_CONFIG) from None


def _target(out: Path, names: set[str]) -> None:
    """Refuse a folder with files that are not the bundle's (an earlier bundle is replaced)."""
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out} is a file; give a folder (it is created if missing)")
    if out.is_dir():
        foreign = sorted(
            p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.relative_to(out).as_posix() not in names
        )
        if foreign:
            shown = ", ".join(foreign[:5]) + (" …" if len(foreign) > 5 else "")
            raise CliError(f"--out {out} holds files that are not a bundle's ({shown}); give an empty or new folder")


def run(args: argparse.Namespace) -> int:
    from gpucluster.load import load_spec
    from gpucluster.render.hybrid.bundle import PLACEHOLDER_RE, bundle_files
    from gpucluster.render.hybrid.bundle_slurm import BundleError, site_of
    from gpucluster.tools.cli_common import overrides
    from gpucluster.tools.plan.run.stackfile import as_config, load_stack_config

    project, config, _ = load_stack_config(args.stack, Path(args.project_dir))
    config.update(as_config(project, overrides(args))[0])
    cluster = load_spec(config, stack=args.stack).cluster
    aws = _aws_values(args.outputs)
    try:
        site = site_of(cluster)
    except BundleError as exc:
        raise CliError(str(exc), EXIT_CONFIG) from None
    files = bundle_files(site, aws)
    out = Path(args.out)
    _target(out, {f.path for f in files})
    for f in files:
        path = out / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(f.content)
        tmp.chmod(f.mode)
        os.replace(tmp, path)
    missing = sorted(
        {m for f in files if f.path in ("agent.json", "aws-config") for m in PLACEHOLDER_RE.findall(f.content.decode())}
    )
    print(f"wrote {len(files)} files to {out} for {site.controller.host} (Slurm {site.ctx.slurm_version}); read {out}/INSTALL.md")
    if missing:
        print(
            f"note: not installable yet: {', '.join(missing)} come from the stack's hybrid output; after `pulumi up` run "
            f"`pulumi stack output --json > outputs.json` and add --outputs outputs.json"
        )
    return EXIT_OK


def register(sub: Any, common: argparse.ArgumentParser, values: argparse.ArgumentParser) -> None:
    b = sub.add_parser(
        "bundle", parents=[common, values], help="write the bundle a hybrid site installs on its own slurmctld host"
    )
    add_stack_option(b, "a stack with gpucluster:hybrid.controller")
    b.add_argument("--out", required=True, metavar="DIR", help="folder to write the bundle to (created if missing)")
    b.add_argument("--outputs", metavar="FILE", help="`pulumi stack output --json`: fills launch templates, subnets, ARNs")
    b.set_defaults(func=run)
