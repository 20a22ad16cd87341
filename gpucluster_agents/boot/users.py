"""The declared users' file on a Slurm node (head, login, compute): ``python3 -I -c USERS_MAIN <package dir> <command>``.

- ``fetch <boot helper config>`` (``gpucluster-users.service``'s first step, at boot and every 2 minutes): reads the
  users bundle at :data:`USERS_KEY` in the artifact bucket (the bucket the node package comes from) and writes
  ``/etc/gpucluster/users.json`` from it when it changed. The object has a fixed key, so a user added or removed or
  a team's members changed update it in place and no user data changes (EC2 caps user data at 16 KB, and a changed
  one stops the head node). Nothing pins it, so it may hold nothing that runs: its one entry must be
  :data:`~gpucluster_agents.contract.users.USERS_PATH`, mode 0644, and its content must pass the users contract's
  strict parser, or nothing is written (the node keeps the accounts it has).
- ``records <users.json>``: the file, parsed strictly again, as the lines the users program
  (``/usr/local/sbin/gpucluster-users``) reads (:func:`gpucluster_agents.contract.users.records`); a bad file is
  refused with every problem named, and the program then changes no account.

Installed with the node package, not in the user data."""

from __future__ import annotations

import json
import sys
from typing import Any

from gpucluster_agents.boot import helper
from gpucluster_agents.contract import ConfigError
from gpucluster_agents.contract import users as contract

USERS_KEY = contract.USERS_KEY


def _entries(body: bytes, source: str) -> list[dict[str, Any]]:
    try:
        entries = json.loads(body)["files"]
    except (ValueError, KeyError, TypeError):
        sys.exit(f"{source}: not a files bundle: nothing written")
    ok = (
        isinstance(entries, list)
        and len(entries) == 1  # pyright: ignore[reportUnknownArgumentType]
        and isinstance(entries[0], dict)
        and entries[0].get("path") == contract.USERS_PATH  # pyright: ignore[reportUnknownMemberType]
        and str(entries[0].get("permissions", "0644")) == "0644"  # pyright: ignore[reportUnknownMemberType]
        and isinstance(entries[0].get("content"), str)  # pyright: ignore[reportUnknownMemberType]
    )
    if not ok:
        sys.exit(f"{source}: refusing it (only {contract.USERS_PATH}, mode 0644, may come from there): nothing written")
    try:
        contract.parse(json.loads(entries[0]["content"]), source)
    except ValueError as exc:  # ConfigError and a JSON error both
        sys.exit(f"refusing {source}: {exc}: nothing written")
    return entries  # pyright: ignore[reportUnknownVariableType]


def fetch(cfg: helper.BootConfig) -> None:
    """Write the users file from the bucket when it changed (see the module)."""
    bucket = json.loads(helper._read(helper.on_root(cfg.package_file)))["bucket"]  # pyright: ignore[reportPrivateUsage]
    source = f"s3://{bucket}/{USERS_KEY}"
    body = helper.s3_client(cfg).get_object(Bucket=bucket, Key=USERS_KEY)["Body"].read()
    helper.write_entries(cfg, _entries(body, source), source)


def print_records(path: str) -> int:
    try:
        sys.stdout.write(contract.records(contract.load(path)))
    except ConfigError as exc:
        print(f"gpucluster-users: refusing {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``fetch <boot helper config>`` or ``records <users.json>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("fetch", "records"):
        sys.exit("usage: users fetch <boot helper config> | users records <users.json>")
    if args[0] == "records":
        return print_records(args[1])
    fetch(helper.load_config(args[1]))
    return 0
