# pyright: strict
"""The log shipper's config (``/etc/gpucluster/logs.json``, :mod:`gpucluster_agents.logship`): which files of a node
go to which CloudWatch Logs group. Written by the render layer (``gpucluster.render.monitoring.logs``), read back
with :func:`parse_logs`, strictly: an unknown key, a path outside ``log_root`` or a bad name is an error that names
the key, and every problem is reported at once.

- ``region``, ``log_group`` (required): the cluster's group ``/gpucluster/<cluster>``, created by the stack (the node
  may only create streams in it and put events).
- ``files`` (required, 1..32): ``{name, path}``. ``name`` is the stream's last part (``<instance id>/<name>``);
  ``path`` an absolute, normalised path under ``log_root`` whose last part may be a glob (``*.log``): each file it
  matches gets its own stream ``<instance id>/<name>/<file name>``. No glob in a directory part: the shipper never
  walks into directories it was not told about.
- ``log_root`` ``/var/log``: every path must be below it (tests point it at a temporary directory).
- ``state_file`` ``/var/lib/gpucluster-logs/state.json``: the offsets shipped, by (device, inode).
- ``flush_interval_seconds`` 5: how often the files are read and shipped.
- ``endpoint_url`` (tests: moto): the CloudWatch Logs endpoint; absent: the region's own.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, cast

from .jsonread import Reader

LOGS_KEYS = frozenset(("region", "log_group", "files", "log_root", "state_file", "flush_interval_seconds", "endpoint_url"))
FILE_KEYS = frozenset(("name", "path"))
MAX_FILES = 32
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
# A log group name: 1..512 of a-z, A-Z, 0-9, '_', '-', '/', '.', '#' (CloudWatch Logs' CreateLogGroup).
_GROUP_RE = re.compile(r"^[A-Za-z0-9_/.#-]{1,512}$")
# The stream's last part: no ':' or '*' (CloudWatch refuses them in stream names), no '/' (it separates the parts).
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_PATH_RE = re.compile(r"^/[A-Za-z0-9_./*?-]*$")
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class LogFile:
    name: str
    path: str

    @property
    def is_glob(self) -> bool:
        return _GLOB.search(posixpath.basename(self.path)) is not None


@dataclass(frozen=True)
class LogsConfig:
    region: str
    log_group: str
    files: tuple[LogFile, ...]
    log_root: str = "/var/log"
    state_file: str = "/var/lib/gpucluster-logs/state.json"
    flush_interval_seconds: int = 5
    endpoint_url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"region": self.region, "log_group": self.log_group}
        out["files"] = [{"name": f.name, "path": f.path} for f in self.files]
        out.update(log_root=self.log_root, state_file=self.state_file, flush_interval_seconds=self.flush_interval_seconds)
        if self.endpoint_url:
            out["endpoint_url"] = self.endpoint_url
        return out


def logs_to_json(config: LogsConfig) -> str:
    """The config file's text (compact: compute nodes carry it in their user data)."""
    return json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"


class LogsConfigError(ValueError):
    """The config is invalid; ``errors`` lists every problem as ``"<key path>: <problem>"``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid log shipping config:\n  " + "\n  ".join(errors))
        self.errors = errors


def _path(r: Reader, raw: Any, where: str, root: str) -> str | None:
    if not isinstance(raw, str) or not _PATH_RE.match(raw):
        r.err(where, f"must be an absolute path of A-Z, a-z, 0-9, '_', '.', '/', '-' (a glob's '*', '?'), got {raw!r}")
        return None
    if posixpath.normpath(raw) != raw or "/../" in raw + "/" or "/./" in raw + "/":
        r.err(where, f"{raw!r} is not a normalised path: write it without '.', '..' or '//'")
        return None
    if not raw.startswith(root.rstrip("/") + "/"):
        r.err(where, f"{raw!r} is not under log_root {root!r}: the shipper reads logs only")
        return None
    if _GLOB.search(posixpath.dirname(raw)):
        r.err(where, f"{raw!r} has a glob in a directory: only the file name may be one ('/var/log/x/*.log')")
        return None
    return raw


def _files(r: Reader, raw: Any, root: str) -> tuple[LogFile, ...]:
    if not isinstance(raw, list) or not 1 <= len(cast("list[Any]", raw)) <= MAX_FILES:
        r.err("files", f"must be a list of 1..{MAX_FILES} {{name, path}} objects, got {raw!r}")
        return ()
    out: list[LogFile] = []
    for i, item in enumerate(cast("list[Any]", raw)):
        where = f"files[{i}]"
        if not isinstance(item, dict):
            r.err(where, f"must be an object {{name, path}}, got {item!r}")
            continue
        obj = cast("dict[str, Any]", item)
        r.unknown(obj, FILE_KEYS, where)
        name = r.string(obj, "name", where, required=True, pattern=_NAME_RE, hint="1..64 of A-Z, a-z, 0-9, '_', '.', '-'")
        path = _path(r, obj.get("path"), f"{where}.path", root) if "path" in obj else None
        if "path" not in obj:
            r.err(f"{where}.path", "required key is missing")
        if name and path:
            out.append(LogFile(name, path))
    names = [f.name for f in out]
    for name in sorted({n for n in names if names.count(n) > 1}):
        r.err("files", f"name {name!r} is used twice: each file needs its own stream")
    return tuple(out)


def parse_logs(text: str) -> LogsConfig:
    """Parse the config file's text; raises :class:`LogsConfigError` listing every problem."""
    errors: list[str] = []
    r = Reader(errors)
    try:
        raw: Any = json.loads(text)
    except ValueError as exc:
        raise LogsConfigError([f"not JSON: {exc}"]) from None
    if not isinstance(raw, dict):
        raise LogsConfigError([f"must be a JSON object, got {type(raw).__name__}"])
    obj = cast("dict[str, Any]", raw)
    r.unknown(obj, LOGS_KEYS, "")
    region = r.string(obj, "region", "", required=True, pattern=_REGION_RE, hint="an AWS region such as us-east-1")
    group = r.string(obj, "log_group", "", required=True, pattern=_GROUP_RE, hint="a CloudWatch Logs group name")
    root = r.string(obj, "log_root", "", default="/var/log", pattern=re.compile(r"^/\S*[^/]$"), hint="an absolute directory")
    state = r.string(obj, "state_file", "", default="/var/lib/gpucluster-logs/state.json", pattern=re.compile(r"^/\S+$"))
    endpoint = r.string(obj, "endpoint_url", "", nullable=True, pattern=re.compile(r"^https?://\S+$"), hint="an http(s) URL")
    interval = r.integer(obj, "flush_interval_seconds", "", default=5, minimum=1, maximum=300)
    files = _files(r, obj.get("files"), root or "/var/log") if "files" in obj else ()
    if "files" not in obj:
        r.err("files", "required key is missing")
    if errors:
        raise LogsConfigError(errors)
    return LogsConfig(
        region=region or "",
        log_group=group or "",
        files=files,
        log_root=root or "/var/log",
        state_file=state or "/var/lib/gpucluster-logs/state.json",
        flush_interval_seconds=interval,
        endpoint_url=endpoint,
    )
