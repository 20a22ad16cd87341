#!/usr/bin/python3 -I
"""The boot helper ``gpucluster-aws``: the AWS steps of a Slurm node's boot (boto3, the instance role's credentials).

Commands: ``munge-key [--create]`` (Secrets Manager -> /etc/munge/munge.key: made once by the head node);
``install-agent`` (the node agent package) and ``apply-files`` (head node: its files' bundle), from S3, checked against
their sha256; ``apply-user-data`` (head node, every boot: rewrite its user data's files, then apply-files, install-agent);
``health`` (GPU node, before slurmd); ``node-name`` (compute node). The user data writes this file's source, less its
docs, to ``/usr/local/sbin/gpucluster-aws``, its config next to it (``.json``). It runs BEFORE the node agent package is
installed (it installs it): stdlib and boto3 only, Python 3.9. Tests point :data:`ROOT` at a directory of their own."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from typing import Any

KEY_FILE = os.environ.get("GPUCLUSTER_MUNGE_KEY", "/etc/munge/munge.key")
WAIT_SECONDS = 900
ROOT = os.environ.get("GPUCLUSTER_ROOT", "/")
IMDS = os.environ.get("GPUCLUSTER_IMDS", "http://169.254.169.254")
CONFIG_SUFFIX = ".json"
# The boot check's verdict for slurmd's side (HealthCheckProgram and Prolog wrappers): one line, the reason,
# only while this boot's check found a fault. Under /run, so a reboot clears it and the check runs anew.
HEALTH_BOOT_FAULT = "/run/gpucluster/health-boot.reason"
HEALTH_BOOT_TIMEOUT = 300  # s: the boot mode's own budget is 120 s; past this it hangs (a GPU off the bus)
# Root runs the health program as python3 -I -c HEALTH_MAIN <package dir> <mode> ... from / (docs/health.md)
HEALTH_MAIN = "import sys; sys.path.insert(0, sys.argv.pop(1)); from gpucluster_agents.health.cli import main; sys.exit(main())"


@dataclasses.dataclass(frozen=True)
class BootConfig:
    """The cluster's values for the helper, written by the user data as JSON (:meth:`to_json`). ``secret_name``: the munge
    key's secret; ``package_file``: JSON naming the agent package (bucket, key, sha256, dest); ``agent_owned``: paths the
    agent rewrites, written at the first boot only; ``node_maps``: s3://bucket/prefix/ of the launches' node maps (compute
    nodes); ``head_files``: JSON naming the head node's bundle (bucket, key, sha256). Here, not in every user data."""

    cluster: str
    region: str
    secret_name: str
    package_file: str
    agent_owned: tuple[str, ...]
    node_maps: str | None = None
    head_files: str | None = None

    def to_json(self) -> str:
        doc = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"


class BootConfigError(ValueError):
    """The helper's config is not what :class:`BootConfig` describes; the message lists every problem."""


_STRINGS = ("cluster", "region", "secret_name", "package_file")
_KEYS = (*_STRINGS, "agent_owned")
_OPTIONAL = ("node_maps", "head_files")
NODE_MAPS_RE = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/((?:[A-Za-z0-9_.-]+/)+)$")
TOKEN_RE = re.compile(r"^[0-9a-f]{32}$")  # the agent's launch tokens (uuid4 hex)
NODE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}-[1-9][0-9]{0,5}$")  # contract.node_name: <prefix>-<N>
# = contract.TAG_NODE_NAME and TAG_LAUNCH_TOKEN (the same on every instance of a launch): this file imports nothing of it
TAG_NODE_NAME = "gpucluster:node-name"
BATCH_TAG = "gpucluster:launch-token"


def parse_config(doc: Any) -> BootConfig:
    """A :class:`BootConfig` from decoded JSON. Strict: a missing, unknown or mistyped key is an error (never a silent
    default on a node that then fails much later), all reported at once: every problem in :class:`BootConfigError`."""
    if not isinstance(doc, dict):
        raise BootConfigError(f"must be a JSON object, got {type(doc).__name__}")
    allowed = (*_KEYS, *_OPTIONAL)
    errors = [f"{key}: unknown key (allowed: {', '.join(sorted(allowed))})" for key in sorted(set(doc) - set(allowed))]
    errors += [f"{key}: required key is missing" for key in _KEYS if key not in doc]
    for key in _STRINGS:
        if key in doc and (not isinstance(doc[key], str) or not doc[key]):
            errors.append(f"{key}: must be a non-empty string, got {doc[key]!r}")
    for key in ("package_file", "head_files"):
        if key in doc and not (isinstance(doc[key], str) and doc[key].startswith("/")):
            errors.append(f"{key}: must be an absolute path, got {doc[key]!r}")
    owned = doc.get("agent_owned", [])
    if not isinstance(owned, list) or not all(isinstance(p, str) and p.startswith("/") for p in owned):
        errors.append(f"agent_owned: must be a list of absolute paths, got {owned!r}")
    maps = doc.get("node_maps")
    if maps is not None and not (isinstance(maps, str) and NODE_MAPS_RE.match(maps)):
        errors.append(f"node_maps: must be s3://<bucket>/<prefix>/ (the prefix ends with '/'), got {maps!r}")
    if errors:
        raise BootConfigError("; ".join(errors))
    return BootConfig(
        doc["cluster"], doc["region"], doc["secret_name"], doc["package_file"], tuple(owned), maps, doc.get("head_files")
    )


def load_config(path: str) -> BootConfig:
    """The config at ``path``; any problem ends the helper with a message that names the file."""
    try:
        with open(path) as fh:
            return parse_config(json.load(fh))
    except (OSError, ValueError) as exc:  # BootConfigError and JSONDecodeError are ValueErrors
        sys.exit(f"gpucluster-aws: bad config {path}: {exc}")


def log(msg: str, err: bool = False) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(stamp, "gpucluster-aws:", msg, flush=True, file=sys.stderr if err else sys.stdout)


def read_key(sm: Any, secret: str) -> bytes | None:
    from botocore.exceptions import ClientError

    try:
        return sm.get_secret_value(SecretId=secret)["SecretBinary"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None  # the secret has no value yet
        raise


def munge_key(cfg: BootConfig, create: bool) -> None:
    import boto3

    secret = cfg.secret_name
    sm = boto3.client("secretsmanager", region_name=cfg.region, endpoint_url=os.environ.get("GPUCLUSTER_SM_ENDPOINT"))
    deadline = time.monotonic() + WAIT_SECONDS
    key = read_key(sm, secret)
    if key is None and create:
        sm.put_secret_value(SecretId=secret, SecretBinary=os.urandom(1024))
        log(f"created the munge key in {secret}")
        key = read_key(sm, secret)  # whatever is current now, should another writer have raced us
    while key is None and time.monotonic() < deadline:
        log(f"{secret} has no value yet (the head node creates it); waiting")
        time.sleep(10)
        key = read_key(sm, secret)
    if key is None:
        sys.exit(f"no munge key in {secret} after {WAIT_SECONDS} s")
    munge = next(((u.pw_uid, u.pw_gid) for u in pwd.getpwall() if u.pw_name == "munge"), None)
    write_file(KEY_FILE, key, 0o400, munge)
    log(f"munge key written to {KEY_FILE} ({len(key)} bytes)")


def open_directory(path: str) -> int:
    """Directory ``path`` opened (made 0755 where missing) one part at a time, following no link but root's in root's."""
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    for part in [p for p in path.split("/") if p]:
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            st = os.lstat(part, dir_fd=fd)
            link = stat.S_ISLNK(st.st_mode)
            if link and (st.st_uid != 0 or os.fstat(fd).st_uid != 0):
                raise PermissionError(f"{path}: {part!r} is a link of uid {st.st_uid}; not following it")
            sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | (0 if link else os.O_NOFOLLOW), dir_fd=fd)
        finally:
            os.close(fd)
        fd = sub
    return fd


def write_file(path: str, data: bytes, mode: int, owner: tuple[int, int] | None = None, first_only: bool = False) -> bool:
    """Write ``path`` following no link another user made: a new file (O_EXCL|O_NOFOLLOW), mode and owner (default:
    the old file's) set on its descriptor, renamed over ``path``. False when ``path`` holds ``data`` or ``first_only``."""
    directory, name = os.path.split(path)
    dfd, tmp = open_directory(directory), name + ".gpucluster-new"
    try:
        try:
            old: os.stat_result | None = os.lstat(name, dir_fd=dfd)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISREG(old.st_mode):
            with os.fdopen(os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd), "rb") as fh:
                if first_only or fh.read() == data:
                    return False
            owner = owner or (old.st_uid, old.st_gid)
        elif old is not None and first_only:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd), "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if owner is not None:
                os.fchown(fh.fileno(), *owner)
            os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return True
    finally:
        os.close(dfd)


def on_root(path: str) -> str:
    return os.path.join(ROOT, path.lstrip("/"))


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def s3_client(cfg: BootConfig) -> Any:
    import boto3

    return boto3.client("s3", region_name=cfg.region, endpoint_url=os.environ.get("GPUCLUSTER_S3_ENDPOINT"))


def fetch_checked(cfg: BootConfig, ref: dict[str, str], verb: str) -> bytes:
    """The object ``ref`` names (bucket, key); the helper ends unless its sha256 is ``ref``'s."""
    body: bytes = s3_client(cfg).get_object(Bucket=ref["bucket"], Key=ref["key"])["Body"].read()
    got = hashlib.sha256(body).hexdigest()
    if got != ref["sha256"]:
        sys.exit(f"s3://{ref['bucket']}/{ref['key']} has sha256 {got}, expected {ref['sha256']}: not {verb} it")
    return body


def install_agent(cfg: BootConfig) -> None:
    package = json.loads(_read(on_root(cfg.package_file)))
    dest = on_root(package["dest"])
    marker = os.path.join(dest, ".sha256")
    if os.path.exists(marker) and _read(marker).strip() == package["sha256"]:
        log(f"node agent {package['sha256'][:12]} already installed")
        return
    body, got = fetch_checked(cfg, package, "installing"), package["sha256"]
    new = dest + ".new"
    shutil.rmtree(new, ignore_errors=True)
    zipfile.ZipFile(io.BytesIO(body)).extractall(new)
    with open(os.path.join(new, ".sha256"), "w") as fh:
        fh.write(got + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(new, dest)
    log(f"node agent {got[:12]} installed in {dest}")


def imds_token() -> dict[str, str]:
    ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "300"}
    with urllib.request.urlopen(urllib.request.Request(IMDS + "/latest/api/token", method="PUT", headers=ttl), timeout=10) as r:
        return {"X-aws-ec2-metadata-token": r.read().decode()}


def imds_get(path: str) -> str | None:
    """``/latest/<path>`` from the instance metadata service (IMDSv2), or None if it has no such entry."""
    headers = imds_token()
    try:
        with urllib.request.urlopen(urllib.request.Request(IMDS + "/latest/" + path, headers=headers), timeout=10) as r:
            return r.read().decode().strip()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def name_from_map(s3: Any, maps: str, token: str, instance_id: str) -> str | None:
    """This instance's node in its launch's node map; None while the map is not there (yet) or lacks it."""
    from botocore.exceptions import ClientError

    m = NODE_MAPS_RE.match(maps)
    if m is None:
        raise ValueError("node_maps is not s3://bucket/prefix (parse_config checks it)")
    try:
        body = s3.get_object(Bucket=m.group(1), Key=f"{m.group(2)}{token}.json")["Body"].read()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code in ("NoSuchKey", "404", "AccessDenied", "403"):  # not written yet (AccessDenied: no ListBucket)
            return None
        raise
    doc = json.loads(body)
    node = doc.get("nodes", {}).get(instance_id) if isinstance(doc, dict) else None
    return node if isinstance(node, str) else None


def node_name(cfg: BootConfig, wait: float = WAIT_SECONDS, sleep: Any = time.sleep, clock: Any = time.monotonic) -> str:
    """The Slurm node name of this instance: its node-name tag (static nodes, adopted or already tagged instances), else
    its launch's node map in S3. Both may come late: retried with backoff (errors included) until ``wait`` s passed."""
    deadline = clock() + wait
    delay, s3, attempt = 1.0, None, 0
    while True:
        attempt += 1
        node = None
        try:
            node = imds_get(f"meta-data/tags/instance/{TAG_NODE_NAME}")
            token = imds_get(f"meta-data/tags/instance/{BATCH_TAG}")
            if not node and cfg.node_maps and token and TOKEN_RE.match(token):
                s3 = s3 or s3_client(cfg)
                node = name_from_map(s3, cfg.node_maps, token, imds_get("meta-data/instance-id") or "")
        except Exception as exc:  # IMDS, S3 or a torn map: all worth another try until the deadline
            log(f"node name: attempt {attempt} failed: {exc!r}", err=True)
        if node and NODE_RE.match(node):
            return node
        if node:
            sys.exit(f"refusing node name {node!r}: not <prefix>-<N>")
        if clock() + delay > deadline:
            sys.exit(f"no {TAG_NODE_NAME} tag and no node map entry for this instance after {wait:.0f} s")
        log(f"node name: not known yet (attempt {attempt}); retrying in {delay:.0f} s", err=True)
        sleep(delay)
        delay = min(delay * 2, 10.0)


def current_user_data() -> str:
    with urllib.request.urlopen(urllib.request.Request(IMDS + "/latest/user-data", headers=imds_token()), timeout=10) as r:
        raw: bytes = r.read()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()  # the head node's is gzipped


def write_entries(cfg: BootConfig, entries: list[dict[str, Any]], source: str) -> None:
    """Write ``entries`` (path, permissions, plain content; agent_owned at the first boot only), or none if one is unsafe."""
    bad = [e.get("path") for e in entries if not re.match(r"/(?!.*\.\.)", str(e.get("path"))) or e.get("encoding")]
    if bad:
        sys.exit(f"{source}: refusing {bad!r} (not absolute, '..' or encoded): nothing written")
    changed: list[str] = []
    for entry in entries:
        mode, first_only = int(str(entry.get("permissions", "0644")), 8), entry["path"] in cfg.agent_owned
        if write_file(on_root(entry["path"]), str(entry.get("content", "")).encode(), mode, first_only=first_only):
            changed.append(entry["path"])
    log("rewrote " + (", ".join(changed) if changed else f"nothing: {source} did not change"))
    if ROOT == "/" and any(p.startswith("/etc/systemd/") for p in changed):
        subprocess.run(["systemctl", "daemon-reload"], check=False)


def apply_files(cfg: BootConfig) -> None:
    """The head node's bundle, named by its pointer file (``head_files``): refused unless its sha256 is the pointer's."""
    if not cfg.head_files:
        sys.exit("no head_files in the config")
    ptr = json.loads(_read(on_root(cfg.head_files)))
    write_entries(cfg, json.loads(fetch_checked(cfg, ptr, "applying"))["files"], f"s3://{ptr['bucket']}/{ptr['key']}")


def apply_user_data(cfg: BootConfig) -> None:
    import yaml

    write_entries(cfg, yaml.safe_load(current_user_data()).get("write_files") or [], "the user data")
    if cfg.head_files:
        apply_files(cfg)
    install_agent(cfg)


def boot_health(cfg: BootConfig, timeout: float = HEALTH_BOOT_TIMEOUT) -> int:
    """The installed program's ``boot --json``: its exit status, and on a fault (1) or a hang its reason in
    :data:`HEALTH_BOOT_FAULT`, else the file removed. A hung check is killed, never waited for (docs/health.md)."""
    dest = on_root(json.loads(_read(on_root(cfg.package_file)))["dest"])
    argv = [sys.executable, "-I", "-c", HEALTH_MAIN, dest, "boot", "--json", "--config", on_root("/etc/gpucluster/health.json")]
    fault = on_root(HEALTH_BOOT_FAULT)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fault)
    proc = subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # no wait(): a check in uninterruptible sleep is not reaped until its call returns
        reason, code = f"gpucluster: health boot timed out after {timeout:.0f} s (reboot)", 1
    else:
        sys.stdout.write(out)
        code, reason = proc.returncode, ""
        if code == 1:
            try:
                reason = str(json.loads(out)["reason"])
            except (ValueError, KeyError, TypeError):
                reason = ""
            if not reason.startswith("gpucluster:"):
                reason = "gpucluster: health boot found a fault (see /var/log/gpucluster/health.jsonl)"
    if reason:
        os.makedirs(os.path.dirname(fault), exist_ok=True)
        with open(fault + ".new", "w") as fh:
            fh.write(" ".join(reason.split())[:256] + "\n")  # one line, Slurm's reason limit
        os.replace(fault + ".new", fault)
        log(f"boot check failed: {reason}")
    return code


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="gpucluster-aws")
    sub = p.add_subparsers(dest="command", required=True)
    commands: dict[str, Any] = {
        "munge-key": lambda c: munge_key(c, args.create),
        "install-agent": install_agent,
        "apply-files": apply_files,
        "apply-user-data": apply_user_data,
        "health": lambda c: sys.exit(boot_health(c)),
        "node-name": lambda c: print(node_name(c)),
    }
    parsers = {command: sub.add_parser(command) for command in commands}
    parsers["munge-key"].add_argument("--create", action="store_true")
    args = p.parse_args(argv)
    commands[args.command](load_config(os.path.abspath(__file__) + CONFIG_SUFFIX))


if __name__ == "__main__":
    main(sys.argv[1:])
