"""``gpucluster images lock --stack S``: resolve each node group's SSM image parameter once and record the AMI in the
stack file (``nodeGroups[].imageLock``), so later plans and deploys use that AMI until the lock is made again.

The stack file is edited as text (its comments and layout stay): under each group's ``- name: <group>`` line an
``imageLock:`` block (``imageId``, ``ssmParameter``, ``lockedAt``) replaces any earlier one; the edited file is loaded
again and must give the locked AMIs, or nothing is written."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster.tools.cli_common import EXIT_CONFIG, EXIT_OK, CliError, add_stack_option


@dataclass(frozen=True)
class Lock:
    group: str
    image_id: str
    parameter: str
    previous: str | None
    """The AMI the group was locked to before (None: it was unpinned)."""
    previous_at: str | None


def wanted_locks(cluster: Any) -> list[tuple[str, str, str | None, str | None]]:
    """``(group, parameter, previous AMI, previous date)`` for every group whose image comes from an SSM parameter (EKS
    groups boot their ``amiType``'s image and are left out)."""
    out = []
    for g in cluster.node_groups:
        if g.scheduler == "kubernetes" or g.spec.image_id is not None:
            continue
        lock = g.spec.image_lock
        parameter = g.image.locked_from or (g.image.value if g.image.source == "ssm-parameter" else None)
        if parameter is None:
            continue
        out.append((g.name, parameter, lock.image_id if lock else None, lock.locked_at if lock else None))
    return out


def lock_block(indent: str, lock: Lock, today: str) -> list[str]:
    return [
        f"{indent}imageLock:  # `gpucluster images lock`: {lock.parameter} named this AMI on {today}\n",
        f"{indent}  imageId: {lock.image_id}\n",
        f"{indent}  ssmParameter: {lock.parameter}\n",
        f'{indent}  lockedAt: "{today}"\n',
    ]


def edit_stack_text(text: str, locks: list[Lock], today: str) -> str:
    """``text`` (a stack file) with each group's ``imageLock`` block written (an earlier one replaced)."""
    lines = text.splitlines(keepends=True)
    for lock in locks:
        pattern = re.compile(rf"^(\s*)- name:\s*['\"]?{re.escape(lock.group)}['\"]?\s*(#.*)?$")
        starts = [i for i, line in enumerate(lines) if pattern.match(line.rstrip("\n"))]
        if not starts:
            raise CliError(
                f"cannot find `- name: {lock.group}` in the stack file: add nodeGroups[].imageLock by hand "
                f"(imageId: {lock.image_id}, ssmParameter: {lock.parameter}, lockedAt: {today})",
                EXIT_CONFIG,
            )
        start = starts[0]  # nodeGroups comes before slurm.nodeGroups in a stack file; the reload below checks
        match = pattern.match(lines[start].rstrip("\n"))
        if match is None:  # starts holds only lines the pattern matched
            raise CliError(f"stack file line {start + 1} changed while it was read; run the lock again", EXIT_CONFIG)
        indent = match.group(1) + "  "
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end].startswith(indent)):
            end += 1
        body = lines[start + 1 : end]
        i = next((k for k, line in enumerate(body) if re.match(rf"^{indent}imageLock:", line)), None)
        if i is not None:
            j = i + 1
            while j < len(body) and body[j].startswith(indent + " "):
                j += 1
            body[i:j] = []
        lines[start + 1 : end] = lock_block(indent, lock, today) + body
    return "".join(lines)


def _fix_for(exc: Exception) -> str:
    """What to set when SSM could not be asked: the same words as preflight's and baseline's, or the offline way."""
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError

    from gpucluster.tools.catalog_refresh import CREDENTIALS_FIX

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return (
            f"; {CREDENTIALS_FIX} (or lock by hand: set nodeGroups[].imageLock {{imageId, ssmParameter, lockedAt}}, "
            "docs/images.md)"
        )
    return ""


def run(args: argparse.Namespace, ssm: Any = None, today: dt.date | None = None) -> int:
    from gpucluster.load import load_spec
    from gpucluster.tools.plan.run.stackfile import _config_dir, load_stack_config

    project_dir = Path(args.project_dir)
    _, config, _ = load_stack_config(args.stack, project_dir)
    cluster = load_spec(config, stack=args.stack).cluster
    wanted = wanted_locks(cluster)
    if not wanted:
        print(f"stack {args.stack}: no node group reads its image from an SSM parameter; nothing to lock")
        return EXIT_OK
    if ssm is None:
        import boto3

        ssm = boto3.client("ssm", region_name=cluster.spec.region, endpoint_url=getattr(args, "endpoint_url", None))
    locks = []
    for group, parameter, previous, previous_at in wanted:
        try:
            value = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
        except Exception as exc:
            raise CliError(f"node group {group}: cannot read SSM parameter {parameter}: {exc}{_fix_for(exc)}") from None
        if not re.fullmatch(r"ami-[0-9a-f]{8,17}", str(value)):
            raise CliError(f"node group {group}: SSM parameter {parameter} holds {value!r}, not an AMI id")
        locks.append(Lock(group, str(value), parameter, previous, previous_at))
    day = (today or dt.datetime.now(dt.timezone.utc).date()).isoformat()
    path = _config_dir(project_dir) / f"Pulumi.{args.stack}.yaml"
    edited = edit_stack_text(path.read_text(), locks, day)
    tmp = path.with_name(path.name + ".lock-tmp")
    tmp.write_text(edited)
    try:
        os.replace(path, path.with_name(path.name + ".before-lock"))
        os.replace(tmp, path)
        _, config, _ = load_stack_config(args.stack, project_dir)
        reloaded = {g.name: g.image.value for g in load_spec(config, stack=args.stack).cluster.node_groups}
        bad = [lock.group for lock in locks if reloaded.get(lock.group) != lock.image_id]
        if bad:
            raise CliError(f"the edited stack file does not lock {', '.join(bad)}; it was left unchanged: add imageLock by hand")
    except BaseException:
        os.replace(path.with_name(path.name + ".before-lock"), path)
        raise
    finally:
        tmp.unlink(missing_ok=True)
    path.with_name(path.name + ".before-lock").unlink(missing_ok=True)
    for lock in locks:
        was = f"was {lock.previous} (locked {lock.previous_at})" if lock.previous else "was unpinned"
        same = " (unchanged)" if lock.previous == lock.image_id else ""
        print(f"{lock.group}: image {lock.image_id}{same} from {lock.parameter}; {was}")
    print(f"wrote {path}: commit it; `gpucluster plan` now uses these AMIs until you lock again")
    return EXIT_OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    images = sub.add_parser("images", parents=[common], help="node images: lock the base images of a stack")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    lock = images_sub.add_parser(
        "lock",
        parents=[common],
        help="resolve each node group's SSM image parameter now and record the AMI in the stack file (needs credentials)",
    )
    add_stack_option(lock)
    lock.add_argument("--endpoint-url", help="SSM endpoint (e.g. a local moto server)")
    lock.set_defaults(func=run)
