"""The preview's verbs, registered on the main parser by :func:`register`:

- ``gpucluster preview --base DIR --head DIR --out DIR`` plans both checkouts and writes the comment
  (:mod:`~gpucluster.tools.ci.preview`; its exit status gates the pull request);
- ``gpucluster preview-scope --base DIR --head DIR`` prints ``code-changed=…`` and ``stacks=…`` lines for
  ``$GITHUB_OUTPUT``, so the workflow installs the base's code only when the change needs it;
- ``gpucluster preview-comment FILE --repo OWNER/NAME --pr N`` creates or edits the sticky comment
  (:mod:`~gpucluster.tools.ci.github`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def _dir(text: str) -> Path:
    path = Path(text)
    if not (path / "Pulumi.yaml").is_file():
        raise argparse.ArgumentTypeError(f"{text}: not a checkout of a gpucluster project (no Pulumi.yaml there)")
    return path


def _preview(args: argparse.Namespace) -> int:
    from gpucluster.tools.ci.preview import run

    try:
        status, p = run(
            args.base,
            args.head,
            Path(args.out),
            base_gpucluster=args.base_gpucluster,
            allow_data_loss=args.allow_data_loss,
            base_ref=args.base_ref,
            head_ref=args.head_ref,
        )
    except ValueError as exc:
        print(f"gpucluster preview: {exc}", file=sys.stderr)
        return 1
    for r in p.results:
        state = "invalid config" if r.error else "DATA LOSS" if r.data_loss else "changes" if r.changed else "no changes"
        print(f"{r.stack}: {state}", file=sys.stderr)
    print(f"wrote {args.out}/comment.md (exit {status})", file=sys.stderr)
    return status


def _scope(args: argparse.Namespace) -> int:
    from gpucluster.tools.ci.scope import scope

    sc = scope(args.base, args.head)
    print(f"code-changed={'true' if sc.code_changed else 'false'}")
    print(f"stacks={','.join(sc.stacks)}")
    return 0


def _comment(args: argparse.Namespace) -> int:
    from gpucluster.tools.ci.github import GitHubError, upsert_comment

    token = os.environ.get("GITHUB_TOKEN", "")
    if not token:
        print("gpucluster preview-comment: GITHUB_TOKEN is not set; no comment posted", file=sys.stderr)
        return 1
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    try:
        what, ident = upsert_comment(api, token, args.repo, args.pr, Path(args.file).read_text())
    except GitHubError as exc:
        print(f"gpucluster preview-comment: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"gpucluster preview-comment: cannot read {args.file}: {exc}", file=sys.stderr)
        return 1
    print(f"{what} comment {ident} on {args.repo}#{args.pr}", file=sys.stderr)
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the preview verbs to the main parser's subcommands."""
    both = argparse.ArgumentParser(add_help=False)
    both.add_argument("--base", type=_dir, required=True, help="checkout of the pull request's base")
    both.add_argument("--head", type=_dir, required=True, help="checkout of the pull request's head")
    p = sub.add_parser("preview", parents=[common, both], help="plan a pull request's base and head offline; write the comment")
    p.add_argument("--out", required=True, help="directory for plans, comment.md, summary.md and preview.json")
    p.add_argument("--base-gpucluster", help="the base's own gpucluster executable (needed when the change touches code)")
    p.add_argument("--allow-data-loss", action="store_true", help="exit 0 even when a change loses data")
    p.add_argument("--base-ref", default="", help="label of the base in the comment (e.g. a short commit id)")
    p.add_argument("--head-ref", default="", help="label of the head in the comment")
    p.set_defaults(func=_preview)
    s = sub.add_parser("preview-scope", parents=[common, both], help="which stacks a change affects (for $GITHUB_OUTPUT)")
    s.set_defaults(func=_scope)
    c = sub.add_parser("preview-comment", parents=[common], help="create or edit the pull request's sticky preview comment")
    c.add_argument("file", help="the comment's markdown (comment.md from `gpucluster preview`)")
    c.add_argument("--repo", required=True, help="OWNER/NAME")
    c.add_argument("--pr", type=int, required=True, help="pull request number")
    c.set_defaults(func=_comment)
