"""One sticky pull-request comment through GitHub's REST API (stdlib only, so the workflow needs no
third-party action with write access): find this workflow's comment by its marker, edit it, or create it.

The token is the workflow's ``GITHUB_TOKEN`` with ``pull-requests: write``; the API root is ``GITHUB_API_URL``
(set by Actions, and pointing at GitHub Enterprise where that is the host). A pull request from a fork gets a
read-only token: the comment is then skipped with a message — the job summary still carries the preview.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from gpucluster.tools.ci.preview import MARKER


class GitHubError(Exception):
    pass


def _call(api: str, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        api.rstrip("/") + path,
        data=data,
        method=method,
        headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "gpucluster-preview",
            **({"Content-Type": "application/json"} if data else {}),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise GitHubError(f"{method} {path}: HTTP {exc.code} {detail}") from None
    except urllib.error.URLError as exc:
        raise GitHubError(f"{method} {path}: {exc.reason}") from None
    return json.loads(raw) if raw else None


def find_comment(api: str, token: str, repo: str, pr: int) -> int | None:
    """The id of the comment that carries :data:`MARKER`, or ``None``. Comments are listed 100 per page."""
    page = 1
    while True:
        batch = _call(api, token, "GET", f"/repos/{repo}/issues/{pr}/comments?per_page=100&page={page}")
        for c in batch or []:
            if MARKER in (c.get("body") or ""):
                return int(c["id"])
        if not batch or len(batch) < 100:
            return None
        page += 1


def upsert_comment(api: str, token: str, repo: str, pr: int, body: str) -> tuple[str, int]:
    """Edit this workflow's comment on ``pr`` or create it; returns ``("updated"|"created", id)``."""
    if MARKER not in body:
        body = MARKER + "\n" + body
    existing = find_comment(api, token, repo, pr)
    if existing is not None:
        _call(api, token, "PATCH", f"/repos/{repo}/issues/comments/{existing}", {"body": body})
        return "updated", existing
    made = _call(api, token, "POST", f"/repos/{repo}/issues/{pr}/comments", {"body": body})
    return "created", int(made["id"])
