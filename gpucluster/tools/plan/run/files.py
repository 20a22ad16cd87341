"""The files a plan shows: user data and each file its cloud-config writes (decoded), the node agent's
zip as a listing, Helm values as the YAML ``helm install -f`` takes, ConfigMap entries — read from the
inputs the program registered, one extractor per resource type."""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
from collections.abc import Callable
from typing import Any

import yaml

from gpucluster.tools.plan.run.monitor import Registration

FileExtractor = Callable[[Registration], dict[str, str]]
BUNDLE_LISTING = "files-bundle.list"
"""A files bundle's listing in the plan's files (``<resource>/files-bundle.list``), next to the files it writes."""


def _user_data(r: Registration) -> dict[str, str]:
    """The user data, then each file its cloud-config writes (decoded), as ``<resource><path>``."""
    data = r.inputs.get("userData") or r.inputs.get("userDataBase64")
    if not isinstance(data, str) or not data:
        return {}
    text = decode_user_data(data)
    return {f"{r.name}/user-data": text, **cloud_config_files(r.name, text)}


def decode_user_data(data: str) -> str:
    """User data as a person reads it: base64 undone, gzip undone (as cloud-init takes it); text that is
    neither, or does not decode, stays as is."""
    try:
        raw = base64.b64decode(data, validate=True)
        return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    except (binascii.Error, UnicodeDecodeError, OSError, EOFError):
        return data


def cloud_config_text(text: str) -> str | None:
    """The cloud-config of user data: the text itself, or the ``text/cloud-config`` part of MIME
    multi-part user data (EKS nodes)."""
    if text.startswith("#cloud-config"):
        return text
    if text.startswith("MIME-Version:"):
        import email

        message = email.message_from_string(text)
        for part in message.walk():
            if part.get_content_type() == "text/cloud-config":
                payload = part.get_payload()
                return payload if isinstance(payload, str) else None
    return None


def cloud_config_files(name: str, text: str) -> dict[str, str]:
    """``write_files`` of a cloud-config, decoded (``gz+b64``, ``b64``), keyed ``<name><path>``."""
    from gpucluster.render.core import SafeLoader, WriteFile

    doc = cloud_config_text(text)
    if doc is None:
        return {}
    try:
        data = yaml.load(doc, Loader=SafeLoader)
    except yaml.YAMLError:
        return {}
    out: dict[str, str] = {}
    for entry in (data or {}).get("write_files") or []:
        path, content, encoding = entry.get("path"), str(entry.get("content", "")), entry.get("encoding")
        if not isinstance(path, str):
            continue
        if encoding in ("b64", "base64"):
            content = base64.b64decode(content).decode()
        elif encoding:
            content = WriteFile(path, content, encoding="gz+b64").text()
        out[f"{name}{path}"] = content
    return out


def _bucket_object(r: Registration) -> dict[str, str]:
    """A zip object (the Slurm node agent's package) as the list of what it holds; the head node's files' bundle as a
    listing and each file it writes (``<resource><path>``, as a user data's)."""
    import io
    import zipfile

    if r.inputs.get("contentType") == "application/json":
        return _files_bundle(r)
    data = r.inputs.get("contentBase64")
    if not isinstance(data, str) or r.inputs.get("contentType") != "application/zip":
        return {}
    raw = base64.b64decode(data)
    names = zipfile.ZipFile(io.BytesIO(raw)).infolist()
    lines = [f"zip archive, {len(names)} files, {len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()}"]
    lines += [f"{i.file_size:>8}  {i.filename}" for i in names]
    return {f"{r.name}/{r.inputs.get('key')}": "\n".join(lines) + "\n"}


def _files_bundle(r: Registration) -> dict[str, str]:
    """``{"files": [{path, permissions, content}]}`` (render/slurm/headfiles.py): a listing, then each file."""
    text = r.inputs.get("content")
    try:
        entries = json.loads(text)["files"] if isinstance(text, str) else None
    except (ValueError, KeyError, TypeError):
        entries = None
    if not isinstance(entries, list):
        return {}
    raw = text.encode() if isinstance(text, str) else b""
    # No sizes: they follow the cluster's name, and the same config under another stack name compares equal.
    lines = [f"files bundle, {len(entries)} files, sha256 {hashlib.sha256(raw).hexdigest()}"]
    lines += [f"{e.get('permissions')}  {e.get('path')}" for e in entries]
    # The listing's name carries no hash (the key does): the same files under another stack name compare equal.
    out = {f"{r.name}/{BUNDLE_LISTING}": "\n".join(lines) + "\n"}
    out.update({f"{r.name}{e['path']}": str(e.get("content", "")) for e in entries if isinstance(e.get("path"), str)})
    return out


def summarize_binary(inputs: dict[str, Any]) -> dict[str, Any]:
    """Binary object contents appear in the JSON plan as their size and sha256, not as base64. A files bundle's JSON
    stays: the diff traces the resources whose values flow into it (``carried``), as into a user data."""
    data = inputs.get("contentBase64")
    if isinstance(data, str) and len(data) > 1024:
        raw = base64.b64decode(data)
        return {**inputs, "contentBase64": f"<{len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()}>"}
    return inputs


def _helm_values(r: Registration) -> dict[str, str]:
    """A Helm release's values, as the YAML file ``helm install -f`` would take."""
    from gpucluster.render.core import to_yaml

    values = r.inputs.get("values")
    # Keys sorted: the engine hands maps back in no particular order.
    return {f"{r.name}/values.yaml": to_yaml(json.loads(json.dumps(values, sort_keys=True))) + "\n"} if values else {}


def _config_map(r: Registration) -> dict[str, str]:
    """Every entry of a ConfigMap (the example training job ships in one)."""
    data = r.inputs.get("data") or {}
    return {f"{r.name}/{key}": str(text) for key, text in sorted(data.items())}


def _text_input(key: str, file_name: str) -> FileExtractor:
    """A monitoring resource's text input (rules, Alertmanager definition, scraper configuration, a Grafana
    dashboard) as a file."""

    def extract(r: Registration) -> dict[str, str]:
        text = r.inputs.get(key)
        return {f"{r.name}/{file_name}": text} if isinstance(text, str) and text else {}

    return extract


FILE_EXTRACTORS: dict[str, FileExtractor] = {
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": _text_input("data", "rules.yaml"),
    "aws:amp/alertManagerDefinition:AlertManagerDefinition": _text_input("definition", "alertmanager.yaml"),
    "aws:amp/scraper:Scraper": _text_input("scrapeConfiguration", "scraper.yaml"),
    "grafana:oss/dashboard:Dashboard": _text_input("configJson", "dashboard.json"),
    "aws:ec2/launchTemplate:LaunchTemplate": _user_data,
    "aws:ec2/instance:Instance": _user_data,
    "aws:s3/bucketObjectv2:BucketObjectv2": _bucket_object,
    "kubernetes:helm.sh/v3:Release": _helm_values,
    "kubernetes:core/v1:ConfigMap": _config_map,
}
