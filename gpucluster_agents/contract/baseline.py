# pyright: strict
"""``updates.baseline`` of the agent config: re-baselining a node group's performance after an image change
(``power/baseline.py``). Absent (or without a bucket), nothing is re-baselined and the roll does not wait.

- ``bucket`` (required), ``prefix`` ``baselines/``, ``endpoint_url`` (tests: moto): where the figures go,
  ``s3://<bucket>/<prefix><group>/<image id>.json``, and each group's ``index.json`` (which image is the
  baseline, the images measured). The head node's role reads and writes these keys; it never lists the bucket.
- ``nodes`` 2: how many nodes of a group run the deep check on a new image (the first nodes that would boot it).
  Two, so one slow node does not decide alone; the figures compared are medians over all their GPUs.
- ``duration_minutes`` 120: the maintenance reservation's length and the deep job's time limit; a job that has
  not reported by then fails the image (DCGM level 3 takes about 15 minutes, the whole deep mode is budgeted an
  hour: docs/health.md).
- ``thresholds`` ``{gemm_tflops: 5, hbm_copy_gbps: 5, nccl_busbw_gbps: 10}``: the largest drop, in percent of the
  previous image's figure, that still passes. See docs/images.md "Re-baseline" for why these values.
- ``groups``: the groups to re-baseline (default every group; the renderer names the GPU groups).
- ``python`` ``/usr/bin/python3`` and ``package_dir`` ``/opt/gpucluster/lib``: how the deep job starts the node
  package on the compute nodes.

:class:`Store` reads and writes those objects: the head node's pass (``power/baseline.py``) and ``gpucluster baseline``
on the operator's machine (read only) share it, so both read the same layout.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, cast

from .jsonread import Reader

METRICS = ("gemm_tflops", "hbm_copy_gbps", "nccl_busbw_gbps")
DEFAULT_THRESHOLDS: tuple[tuple[str, float], ...] = (("gemm_tflops", 5.0), ("hbm_copy_gbps", 5.0), ("nccl_busbw_gbps", 10.0))
_PREFIX_RE = re.compile(r"^(?:[A-Za-z0-9_.-]+/)+$")
BASELINE_KEYS = frozenset(
    ("bucket", "prefix", "endpoint_url", "nodes", "duration_minutes", "thresholds", "groups", "python", "package_dir")
)


@dataclass(frozen=True)
class Baseline:
    bucket: str
    prefix: str = "baselines/"
    endpoint_url: str | None = None
    nodes: int = 2
    duration_minutes: int = 120
    thresholds: tuple[tuple[str, float], ...] = DEFAULT_THRESHOLDS
    groups: tuple[str, ...] | None = None
    python: str = "/usr/bin/python3"
    package_dir: str = "/opt/gpucluster/lib"

    def key(self, group: str, image_id: str) -> str:
        return f"{self.prefix}{group}/{image_id}.json"

    def index_key(self, group: str) -> str:
        return f"{self.prefix}{group}/index.json"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bucket": self.bucket, "prefix": self.prefix, "nodes": self.nodes}
        out.update(duration_minutes=self.duration_minutes, thresholds=dict(self.thresholds), python=self.python)
        out["package_dir"] = self.package_dir
        if self.endpoint_url:
            out["endpoint_url"] = self.endpoint_url
        if self.groups is not None:
            out["groups"] = list(self.groups)
        return out

    def covers(self, group: str) -> bool:
        return self.groups is None or group in self.groups


def _thresholds(r: Reader, raw: Any, path: str) -> tuple[tuple[str, float], ...]:
    if raw is None:
        return DEFAULT_THRESHOLDS
    if not isinstance(raw, dict):
        r.err(path, f"must be an object of metric: percent, got {raw!r}")
        return DEFAULT_THRESHOLDS
    out = dict(DEFAULT_THRESHOLDS)
    for key, value in cast("dict[str, Any]", raw).items():
        if key not in METRICS:
            r.err(f"{path}.{key}", f"unknown metric (known: {', '.join(METRICS)})")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 100:
            r.err(f"{path}.{key}", f"must be a percent in [0, 100), got {value!r}")
        else:
            out[key] = float(value)
    return tuple((m, out[m]) for m in METRICS)


def parse_baseline(r: Reader, raw: Any, path: str) -> Baseline | None:
    """Read ``updates.baseline`` (absent or null: None); problems go to ``r`` with their key path."""
    obj = r.section(raw, BASELINE_KEYS, path)
    if obj is None:
        return None
    bucket = r.bucket(obj, path)
    prefix = r.string(obj, "prefix", path, default="baselines/", pattern=_PREFIX_RE, hint="path segments ending in '/'")
    endpoint = r.string(obj, "endpoint_url", path, nullable=True, pattern=re.compile(r"^https?://"), hint="an http(s) URL")
    groups_raw = obj.get("groups")
    groups: tuple[str, ...] | None = None
    if groups_raw is not None:
        if not isinstance(groups_raw, list) or not all(isinstance(g, str) and g for g in cast("list[Any]", groups_raw)):
            r.err(f"{path}.groups", f"must be a list of node group names, got {groups_raw!r}")
        else:
            groups = tuple(cast("list[str]", groups_raw))
    python = r.string(obj, "python", path, default="/usr/bin/python3", pattern=re.compile(r"^/\S+$"), hint="an absolute path")
    package = r.string(
        obj, "package_dir", path, default="/opt/gpucluster/lib", pattern=re.compile(r"^/\S+$"), hint="an absolute path"
    )
    out = Baseline(
        bucket=bucket or "",
        prefix=prefix or "baselines/",
        endpoint_url=endpoint,
        nodes=r.integer(obj, "nodes", path, default=2, minimum=1, maximum=64),
        duration_minutes=r.integer(obj, "duration_minutes", path, default=120, minimum=10, maximum=24 * 60),
        thresholds=_thresholds(r, obj.get("thresholds"), f"{path}.thresholds"),
        groups=groups,
        python=python or "/usr/bin/python3",
        package_dir=package or "/opt/gpucluster/lib",
    )
    return out if bucket else None


class Store:
    """The objects above, through an S3 client (boto3). Errors propagate: callers log and retry next pass."""

    def __init__(self, spec: Baseline, client: Any) -> None:
        """``client``: an S3 client, or a function making one (called on first use: most passes need none)."""
        self.spec, self._client = spec, client

    @property
    def client(self) -> Any:
        if callable(self._client):
            self._client = self._client()
        return self._client

    def _get(self, key: str) -> dict[str, Any] | None:
        try:
            body = self.client.get_object(Bucket=self.spec.bucket, Key=key)["Body"].read()
        except Exception as exc:  # botocore ClientError: NoSuchKey (or AccessDenied for a missing key without ListBucket)
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "AccessDenied"):
                return None
            raise
        data = json.loads(body)
        return cast("dict[str, Any]", data) if isinstance(data, dict) else None

    def _put(self, key: str, doc: dict[str, Any]) -> None:
        body = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
        self.client.put_object(Bucket=self.spec.bucket, Key=key, Body=body, ContentType="application/json")

    def index(self, group: str) -> dict[str, Any]:
        return self._get(self.spec.index_key(group)) or {"group": group, "baseline": None, "images": []}

    def result(self, group: str, image_id: str) -> dict[str, Any] | None:
        return self._get(self.spec.key(group, image_id))

    def record(self, group: str, image_id: str, doc: dict[str, Any]) -> None:
        """Write the image's result, then the index (the baseline moves to this image when it passed)."""
        self._put(self.spec.key(group, image_id), doc)
        index = self.index(group)
        images = [i for i in cast("list[dict[str, Any]]", index.get("images") or []) if i.get("image_id") != image_id]
        ok = bool(cast("dict[str, Any]", doc["verdict"])["ok"])
        images.append({"image_id": image_id, "time": doc["time"], "ok": ok, "why": doc["verdict"]["why"]})
        index["images"] = images
        if ok:
            index["baseline"] = image_id
        self._put(self.spec.index_key(group), index)

    def groups(self) -> list[str]:
        """The groups with an index (lists the bucket: the operator's ``gpucluster baseline``, not the agent)."""
        out: list[str] = []
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.spec.bucket, Prefix=self.spec.prefix, Delimiter="/"
        )
        for page in pages:
            for p in cast("list[dict[str, Any]]", page.get("CommonPrefixes") or []):
                out.append(str(p["Prefix"])[len(self.spec.prefix) :].rstrip("/"))
        return sorted(out)
