"""``gpucluster baseline --stack X [--group G] [--bucket B] [--json]``: each node group's re-baseline figures, read
from the cluster's artifact bucket (``baselines/<group>/``, written by the head node's agent:
``gpucluster_agents/power/baseline.py``): per image its GEMM, HBM copy and all-reduce figures, which image is
the baseline, and the verdict of each image against the one before it.

The bucket is found by the stack's cluster name (``<name>-slurm-…``, tagged ``Name=<name>-slurm-artifacts``:
``components/slurm/_artifact.py``) unless ``--bucket`` names it. Needs AWS credentials that may list the
account's buckets and read the bucket; without them one line says what to set (exit 1), never a traceback."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpucluster.tools.cli_common import EXIT_OK, CliError, add_stack_option

METRIC_NAMES = {"gemm_tflops": "GEMM TFLOP/s", "hbm_copy_gbps": "HBM GB/s", "nccl_busbw_gbps": "busbw GB/s"}


def register(sub: Any, common: argparse.ArgumentParser, values: argparse.ArgumentParser) -> None:
    b = sub.add_parser(
        "baseline",
        parents=[common, values],
        help="each node group's performance figures per image, the baseline and the verdicts (needs AWS credentials)",
    )
    add_stack_option(b)
    b.add_argument("--group", "-g", help="only this node group")
    b.add_argument("--bucket", help="the cluster's artifact bucket (default: found by the cluster's name and tag)")
    b.add_argument("--endpoint-url", help="AWS endpoint (e.g. a local moto server)")
    b.add_argument("--json", action="store_true", help="print the groups, their index and results as JSON")
    b.set_defaults(func=run)


def find_bucket(client: Any, cluster: str) -> str:
    """The artifact bucket of ``cluster``: named ``<cluster>-slurm-…`` and tagged ``Name=<cluster>-slurm-artifacts``."""
    from botocore.exceptions import ClientError

    names = [str(b["Name"]) for b in client.list_buckets().get("Buckets", []) if str(b["Name"]).startswith(f"{cluster}-slurm-")]
    found: list[str] = []
    for name in names:
        try:
            tags = client.get_bucket_tagging(Bucket=name).get("TagSet", [])
        except ClientError:
            continue
        if {"Key": "Name", "Value": f"{cluster}-slurm-artifacts"} in tags:
            found.append(name)
    if not found:
        raise CliError(
            f"no artifact bucket of cluster {cluster!r} in this account and region (is the Slurm stack deployed?); "
            "give it with --bucket"
        )
    if len(found) > 1:
        raise CliError(f"several artifact buckets of cluster {cluster!r}: {', '.join(found)}; choose one with --bucket")
    return found[0]


def collect(store: Any, only: str | None) -> list[dict[str, Any]]:
    """Per group: its index and each listed image's stored result (None where the object is missing)."""
    groups = [only] if only else store.groups()
    out: list[dict[str, Any]] = []
    for group in groups:
        index = store.index(group)
        results = {str(i["image_id"]): store.result(group, str(i["image_id"])) for i in index.get("images") or []}
        out.append({"group": group, "baseline": index.get("baseline"), "images": index.get("images") or [], "results": results})
    return out


def render_text(stack: str, bucket: str, groups: list[dict[str, Any]]) -> str:
    lines = [f"gpucluster baseline - stack {stack} (bucket {bucket})"]
    if not groups:
        lines.append("  no figures yet: the agent re-baselines a group when its image changes (updates.baseline)")
    for g in groups:
        lines.append(f"group {g['group']}: baseline {g['baseline'] or '(none passed yet)'}")
        for item in g["images"]:
            image = str(item["image_id"])
            res = g["results"].get(image) or {}
            figures = res.get("figures") or {}
            shown = ", ".join(f"{METRIC_NAMES[m]} {figures[m]:g}" for m in METRIC_NAMES if m in figures) or "no figures"
            mark = "passed" if item.get("ok") else "FAILED"
            tail = " (baseline)" if image == g["baseline"] else ""
            prev = (res.get("previous") or {}).get("image_id")
            lines.append(f"  {image}  {item.get('time', '?')}  {mark}{tail}  {shown}")
            lines.append(f"      {'vs ' + str(prev) + ': ' if prev else ''}{item.get('why', '')}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

    from gpucluster.load import load_spec
    from gpucluster.tools.catalog_refresh import CREDENTIALS_FIX
    from gpucluster.tools.cli_common import overrides
    from gpucluster.tools.plan.run.stackfile import as_config, load_stack_config
    from gpucluster_agents.contract.baseline import Baseline, Store

    project, config, _ = load_stack_config(args.stack, Path(args.project_dir))
    config.update(as_config(project, overrides(args))[0])
    spec = load_spec(config, stack=args.stack).spec
    from boto3.session import Session

    try:
        client = Session(region_name=spec.region).client("s3", endpoint_url=args.endpoint_url)
        bucket = args.bucket or find_bucket(client, spec.name)
        groups = collect(Store(Baseline(bucket=bucket), client), args.group)
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise CliError(f"no AWS credentials ({exc}); {CREDENTIALS_FIX}") from None
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise CliError(f"AWS refused {exc.operation_name}: {err.get('Code')}: {err.get('Message')}") from None
    except BotoCoreError as exc:
        raise CliError(f"cannot reach AWS: {exc}") from None
    if args.json:
        sys.stdout.write(json.dumps({"stack": args.stack, "bucket": bucket, "groups": groups}, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(args.stack, bucket, groups))
    return EXIT_OK
