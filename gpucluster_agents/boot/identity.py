#!/usr/bin/python3 -I
"""The identity helper ``gpucluster-identity``: root's boot steps for a directory's users and the login nodes' SSH
host keys (boto3, the instance role's credentials).

Commands:

- ``sssd-conf --secret-arn ARN --region R``: reads the directory's bind password (the secret's string) and writes
  ``/etc/sssd/sssd.conf`` (0600 root:root, a new file renamed into place) from the rendered template
  ``/etc/gpucluster/sssd.conf.in``, with ``ldap_default_authtok_type = password`` and ``ldap_default_authtok = <it>``
  inserted after ``ldap_default_bind_dn`` in the ``[domain/…]`` section. The password is never printed, logged or put
  in an error. A template that already holds an authtok is refused (the password belongs in Secrets Manager only).
- ``ssh-host-keys --secret-arn ARN --region R [--create]``: the login nodes' shared SSH host keys (one host behind
  the load balancer). With ``--create`` (the head node, once) the keys are made with ``ssh-keygen`` into the secret when
  it has no value yet; without (login nodes) the helper waits for them, then installs the private keys 0600 and the
  public ones 0644 in ``/etc/ssh/gpucluster``.

The user data writes this file's source, without its documentation, to ``/usr/local/sbin/gpucluster-identity``. It
imports nothing from ``gpucluster_agents`` and never ``gpucluster``: stdlib and boto3 only, Python 3.9.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.environ.get("GPUCLUSTER_ROOT", "/")  # tests write into a directory of their own
WAIT_SECONDS = float(os.environ.get("GPUCLUSTER_IDENTITY_WAIT", "900"))
SSSD_TEMPLATE = "/etc/gpucluster/sssd.conf.in"
SSSD_CONF = "/etc/sssd/sssd.conf"
HOST_KEY_DIR = "/etc/ssh/gpucluster"
HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")
AUTHTOK_KEYS = ("ldap_default_authtok", "ldap_default_authtok_type")
_KEY_RE = re.compile(r"^\s*([A-Za-z0-9_]+)\s*=")
_SECTION_RE = re.compile(r"^\s*\[([^\]]+)\]\s*$")


class IdentityError(Exception):
    """A refusal with its reason (never a secret value)."""


def log(msg: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(stamp, "gpucluster-identity:", msg, flush=True, file=sys.stderr)


def on_root(path: str) -> str:
    return os.path.join(ROOT, path.lstrip("/"))


def secrets_client(region: str) -> Any:
    import boto3

    return boto3.client("secretsmanager", region_name=region, endpoint_url=os.environ.get("GPUCLUSTER_SM_ENDPOINT"))


def secret_string(sm: Any, arn: str) -> str | None:
    """The secret's current string; None while it has no value."""
    from botocore.exceptions import ClientError

    try:
        value = sm.get_secret_value(SecretId=arn).get("SecretString")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise IdentityError(f"cannot read {arn}: {exc.response.get('Error', {}).get('Code', 'error')}") from None
    return value


def with_authtok(template: str, password: str) -> str:
    """``template`` with the bind password after ``ldap_default_bind_dn`` of its ``[domain/…]`` section."""
    if not password or "\n" in password or "\r" in password:
        raise IdentityError("the bind password secret is empty or holds a line break; sssd.conf takes one line")
    lines = template.splitlines(keepends=True)
    section, out, inserted = "", [], False
    for line in lines:
        header = _SECTION_RE.match(line)
        key = _KEY_RE.match(line)
        if header:
            section = header.group(1).strip()
        elif key and key.group(1) in AUTHTOK_KEYS:
            raise IdentityError(f"the template already sets {key.group(1)}; the password belongs in Secrets Manager only")
        out.append(line)
        if key and key.group(1) == "ldap_default_bind_dn" and section.startswith("domain/"):
            if inserted:
                raise IdentityError("the template has more than one domain with ldap_default_bind_dn")
            out.append("ldap_default_authtok_type = password\n")
            out.append(f"ldap_default_authtok = {password}\n")
            inserted = True
    if not inserted:
        raise IdentityError("the template has no ldap_default_bind_dn in a [domain/...] section")
    return "".join(out)


def write_private(path: str, data: bytes, mode: int = 0o600) -> None:
    """``path`` as a new file of ``mode`` (root's when run by root), written beside it and renamed into place."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".gpucluster-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            if os.geteuid() == 0:
                os.fchown(fh.fileno(), 0, 0)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def sssd_conf(sm: Any, arn: str, template: str, output: str) -> None:
    with open(template) as fh:
        text = fh.read()
    password = secret_string(sm, arn)
    if password is None:
        raise IdentityError(f"{arn} has no value: put the directory's bind password in it")
    write_private(output, with_authtok(text, password).encode())
    log(f"wrote {output} (0600) from {template} and {arn}")


def make_host_keys() -> dict[str, str]:
    """New host keys, ``{file name: text}`` (private and .pub)."""
    keys: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in HOST_KEY_TYPES:
            name = f"ssh_host_{kind}_key"
            path = os.path.join(tmp, name)
            subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "gpucluster-login", "-f", path], check=True)
            for file in (name, name + ".pub"):
                with open(os.path.join(tmp, file)) as fh:
                    keys[file] = fh.read()
    return keys


def parse_host_keys(text: str) -> dict[str, str]:
    try:
        keys = json.loads(text)
    except ValueError:
        raise IdentityError("the host key secret is not the JSON this helper writes") from None
    expected = {f"ssh_host_{k}_key{s}" for k in HOST_KEY_TYPES for s in ("", ".pub")}
    if not isinstance(keys, dict) or set(keys) != expected or not all(isinstance(v, str) for v in keys.values()):
        raise IdentityError("the host key secret does not hold exactly the expected keys")
    return keys


def ssh_host_keys(sm: Any, arn: str, create: bool, directory: str, sleep: Any = time.sleep) -> None:
    text = secret_string(sm, arn)
    if text is None and create:
        sm.put_secret_value(SecretId=arn, SecretString=json.dumps(make_host_keys(), sort_keys=True))
        log(f"made the login nodes' SSH host keys in {arn}")
        text = secret_string(sm, arn)  # whatever is current now, should another writer have raced us
    deadline = time.monotonic() + WAIT_SECONDS
    while text is None and time.monotonic() < deadline:
        log(f"{arn} has no value yet (the head node makes the keys); waiting")
        sleep(10)
        text = secret_string(sm, arn)
    if text is None:
        raise IdentityError(f"no SSH host keys in {arn} after {WAIT_SECONDS:.0f} s")
    for name, value in sorted(parse_host_keys(text).items()):
        write_private(os.path.join(directory, name), value.encode(), 0o644 if name.endswith(".pub") else 0o600)
    log(f"SSH host keys installed in {directory}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gpucluster-identity")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sssd-conf")
    k = sub.add_parser("ssh-host-keys")
    for q in (s, k):
        q.add_argument("--secret-arn", required=True)
        q.add_argument("--region", required=True)
    s.add_argument("--template", default=SSSD_TEMPLATE)
    s.add_argument("--output", default=SSSD_CONF)
    k.add_argument("--create", action="store_true")
    k.add_argument("--dir", default=HOST_KEY_DIR)
    args = p.parse_args(argv)
    try:
        sm = secrets_client(args.region)
        if args.command == "sssd-conf":
            sssd_conf(sm, args.secret_arn, on_root(args.template), on_root(args.output))
        else:
            ssh_host_keys(sm, args.secret_arn, args.create, on_root(args.dir))
    except (IdentityError, OSError) as exc:
        log(f"refused: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
