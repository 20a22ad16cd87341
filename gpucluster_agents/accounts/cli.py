# pyright: strict
"""``gpucluster-agent accounts reconcile [--file PATH] [--dry-run]`` — run by the head node's
``gpucluster-accounts`` unit at boot and whenever accounts.json changes.

Exit status: 0 in step (or, with ``--dry-run``, the plan printed), 75 (EX_TEMPFAIL) when slurmdbd is unreachable
(the unit retries; nothing was removed), 1 for a bad file or a change slurmdbd refused, 2 for a bad command line.
Logs go to stderr (the journal): one line per change, then ``accounts: N changes, M kept (reasons)``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from ..contract import ConfigError
from ..contract.accounts import DEFAULT_PATH, load
from .reconcile import EX_FAILED, getent_members, reconcile
from .slurmdb import SlurmDb, subprocess_runner

__all__ = ["main"]

EX_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucluster-agent accounts", description="Keep slurmdbd in step with accounts.json")
    p.add_argument("action", choices=("reconcile",))
    p.add_argument("--file", default=os.environ.get("GPUCLUSTER_ACCOUNTS_FILE", DEFAULT_PATH), help="the accounts contract")
    p.add_argument("--dry-run", action="store_true", help="print the changes, make none")
    p.add_argument("--slurm-bin-dir", default="/usr/bin", help="where sacctmgr and squeue are")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(list(sys.argv[2:] if argv is None else argv))
    except SystemExit as exc:
        return EX_USAGE if exc.code else 0
    logger = logging.getLogger("gpucluster_agents.accounts")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        try:
            contract = load(args.file)
        except ConfigError as exc:
            sys.stderr.write(f"gpucluster-agent accounts: {exc}\n")
            return EX_FAILED
        runner = subprocess_runner()
        db = SlurmDb(runner, args.slurm_bin_dir)
        outcome = reconcile(contract, db, getent_members(runner), dry_run=args.dry_run)
        if args.dry_run:
            sys.stdout.write("".join(f"{line}\n" for line in outcome.changes))
        return outcome.status
    finally:
        logger.removeHandler(handler)
