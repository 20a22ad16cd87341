"""User data as the instance will read it, and the secrets that must never be in it.

User data reaches EC2 base64-encoded and often gzipped (the Slurm head node and compute nodes), as
MIME multi-part (EKS nodes, whose parts may be base64 or gzip themselves), or as a cloud-config whose
``write_files`` carry base64 or gzip+base64 content. :func:`decode` unwraps every layer into the texts
a person would read, each labelled with where it came from; :func:`find_secrets` looks through them.

Anyone who can describe the instance or the launch template (``ec2:DescribeLaunchTemplateVersions``,
``ec2:DescribeInstanceAttribute``) and every process on the node that reaches the instance metadata
service can read user data, and Pulumi keeps it in the stack state: a secret belongs in Secrets Manager
or SSM and is read at boot (as the munge key is), never written into user data.
"""

from __future__ import annotations

import base64
import binascii
import email
import gzip
import json
import re
import zlib
from dataclasses import dataclass

import yaml

_MAX_DEPTH = 6  # layers of encoding unwrapped at most: a loop guard, real user data has three or four


def _unwrap_bytes(raw: bytes) -> bytes:
    """gzip undone, as cloud-init does for gzipped user data and parts."""
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            return raw
    return raw


def _b64(text: str) -> bytes | None:
    compact = "".join(text.split())
    if not compact or len(compact) % 4:
        return None
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def decode(value: str, *, base64_encoded: bool, where: str = "user data") -> list[tuple[str, str]]:
    """Every readable text in a user data value, as ``(where, text)``: the whole user data first, then
    each MIME part and each ``write_files`` file. ``base64_encoded`` is how the property carries it
    (a launch template's ``userData`` and an instance's ``userDataBase64`` are base64; an instance's
    ``userData`` is the text itself). Content that does not decode is read as it is. A files bundle (the Slurm head
    node's, ``render/slurm/headfiles.py``: ``{"files": [{path, content}]}``) opens to its files too."""
    raw: bytes = value.encode()
    if base64_encoded:
        decoded = _b64(value)
        if decoded is not None:
            raw = decoded
    out: list[tuple[str, str]] = []
    _walk(where, _text(_unwrap_bytes(raw)), out, 0)
    return out


def _walk(where: str, text: str, out: list[tuple[str, str]], depth: int) -> None:
    out.append((where, text))
    if depth >= _MAX_DEPTH:
        return
    head = text.lstrip()[:200].lower()
    if head.startswith(("mime-version:", "content-type: multipart")):
        _mime_parts(where, text, out, depth)
    elif head.startswith("#cloud-config"):
        _cloud_config_files(where, text, out, depth)
    elif head.startswith('{"files":'):
        _bundle_files(where, text, out, depth)


def _mime_parts(where: str, text: str, out: list[tuple[str, str]], depth: int) -> None:
    message = email.message_from_string(text)
    for index, part in enumerate(message.walk()):
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)  # undoes base64 / quoted-printable transfer encodings
        raw = payload if isinstance(payload, bytes) else str(part.get_payload()).encode()
        label = part.get_filename() or f"part {index} ({part.get_content_type()})"
        _walk(f"{where}, MIME {label}", _text(_unwrap_bytes(raw)), out, depth + 1)


def _bundle_files(where: str, text: str, out: list[tuple[str, str]], depth: int) -> None:
    try:
        entries = json.loads(text)["files"]
    except (ValueError, KeyError, TypeError):
        return  # not a bundle after all: the raw text was scanned already
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            _walk(f"{where}, file {entry['path']}", str(entry.get("content", "")), out, depth + 1)


_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _cloud_config_files(where: str, text: str, out: list[tuple[str, str]], depth: int) -> None:
    try:
        doc = yaml.load(text, Loader=_SAFE_LOADER)  # libyaml's safe loader where PyYAML has it
    except yaml.YAMLError:
        return  # not YAML after all: the raw text was scanned already
    if not isinstance(doc, dict):
        return
    # Commands as cloud-init runs them (YAML may have folded a long one over two lines).
    for key in ("bootcmd", "runcmd"):
        commands = doc.get(key)
        for i, command in enumerate(commands if isinstance(commands, list) else []):
            line = " ".join(map(str, command)) if isinstance(command, list) else str(command)
            out.append((f"{where}, {key}[{i}]", line))
    for entry in doc.get("write_files") or []:
        if not isinstance(entry, dict):
            continue
        path, content, encoding = str(entry.get("path", "?")), str(entry.get("content", "")), str(entry.get("encoding", ""))
        encoding = encoding.lower()
        if encoding in ("b64", "base64", "gz+b64", "gzip+base64", "gz+base64", "gzip+b64"):
            decoded = _b64(content)
            if decoded is None:
                continue
            content = _text(_unwrap_bytes(decoded))
        elif encoding in ("gz", "gzip"):
            content = _text(_unwrap_bytes(content.encode("latin-1", errors="replace")))
        _walk(f"{where}, file {path}", content, out, depth + 1)


# --- what a secret looks like ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SecretFinding:
    where: str  # "user data, file /etc/slurm/slurmdbd.conf"
    line: int  # 1-based, in that text
    kind: str  # "a private key", "an AWS access key id", …
    excerpt: str  # the line with the secret itself masked

    def describe(self) -> str:
        return f"{self.kind} in {self.where}, line {self.line} ({self.excerpt})"


_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_ACCESS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")
_SECRET_ACCESS_KEY = re.compile(
    r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
)
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9_])(?P<value>gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{32,}|pul-[a-f0-9]{40})"
)
# `KEY = value`, `KEY: value`, `--password value`: a key that *ends* in one of these words (so
# `secret_name` or `token_file` do not count), and a literal value (no `$VAR`, `{{ }}`, call or path).
_ASSIGNED = re.compile(
    r"(?i)(?P<flag>--)?(?P<key>[A-Za-z0-9_.-]*(?:password|passwd|passphrase|pwd|storagepass|secret|secret_?key|token|api_?key|"
    r"access_?key|private_?key|client_?secret|auth_?key))[\"']?"
    r"(?P<sep>\s*[:=]\s*|\s+)(?P<quote>[\"']?)(?P<value>[^\s\"'$`{}()<>\[\],;#|&\\]{8,})(?P=quote)(?=\s|$|[,;}\]])"
)
# An ARN names a secret, it is none: `…:secret:gpucluster/ad-bind-AbCdEf` must not read as `secret: <value>`.
_ARN = re.compile(r"\barn:aws[a-z-]*:[a-z0-9-]+:[^\s\"'`]*")
_NOT_A_SECRET = re.compile(r"(?i)^(?:true|false|null|none|required|optional|enabled|disabled|\*+|x+|<.*>|/.*)$")
# The munge key written from a literal: `echo <base64> | base64 -d > /etc/munge/munge.key` or
# `printf '…' > …/munge.key`. Reading it from Secrets Manager at boot is the way.
_MUNGE_LITERAL = re.compile(r"(?i)(?:echo|printf)\s+(?:-\w+\s+)*[\"']?[A-Za-z0-9+/=]{32,}.*munge\.key")


def _mask(line: str, secret: str) -> str:
    shown = secret[:4] + "…" if len(secret) > 8 else "…"
    return line.strip().replace(secret, shown)[:120]


def find_secrets(texts: list[tuple[str, str]]) -> list[SecretFinding]:
    """Key material, AWS keys, tokens, a literal munge key and password-like assignments in the texts
    :func:`decode` returned, at most one finding per line (the first kind that matches)."""
    found: list[SecretFinding] = []
    for where, text in texts:
        for number, line in enumerate(text.splitlines(), start=1):
            hit = _line_secret(line, where)
            if hit is not None:
                kind, secret = hit
                found.append(SecretFinding(where, number, kind, _mask(line, secret)))
    return found


def _line_secret(line: str, where: str) -> tuple[str, str] | None:
    if m := _PRIVATE_KEY.search(line):
        return "a private key", m.group(0)
    if m := _ACCESS_KEY_ID.search(line):
        return "an AWS access key id", m.group(0)
    if m := _SECRET_ACCESS_KEY.search(line):
        return "an AWS secret access key", m.group("value")
    if m := _TOKENS.search(line):
        return "an API token", m.group("value")
    if m := _MUNGE_LITERAL.search(line):
        return "a munge key", m.group(0)
    if where.endswith("munge.key") and line.strip():
        return "a munge key (a file written with it)", line.strip()
    for m in _ASSIGNED.finditer(_ARN.sub("<arn>", line)):
        value = m.group("value")
        if not m.group("sep").strip() and not m.group("flag"):
            continue  # "secret generated at boot" is prose; only `--password value` takes a space
        if not _NOT_A_SECRET.match(value) and not _looks_like_code(value, m.group("sep"), m.group("quote")):
            return f"a secret assigned to {m.group('key')}", value
    return None


def _looks_like_code(value: str, sep: str, quote: str) -> bool:
    """``token = response.read`` or ``secret = make_key`` are code, not secrets: a dotted name, or a
    bare identifier after a spaced ``=`` (Python's style; shell and config files write ``KEY=value``)."""
    if quote:
        return False
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+", value):
        return True
    return value.isidentifier() and sep.strip() == "=" and sep != "="
