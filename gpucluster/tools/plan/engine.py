"""Run the real stack program offline and collect what ``pulumi up`` would create.

:func:`run_plan` reads ``Pulumi.yaml`` and ``stacks/Pulumi.<stack>.yaml`` the way the Pulumi CLI
does, hands the config to the Pulumi runtime, installs :mod:`gpucluster.tools.plan.mocks` in place of the
engine and providers, and runs ``__main__.py`` inside a stack — the same program, the same config.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import gzip
import hashlib
import json
import logging
import runpy
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.mocks import set_mocks
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

from gpucluster._paths import PACKAGE_DIR
from gpucluster.config.errors import ConfigError
from gpucluster.facts.catalog import load_catalog
from gpucluster.resolve.cost import restore_nulls
from gpucluster.tools.plan.mocks import PlanMocks, RecordingMonitor, Registration


def find_project_dir(start: Path | None = None) -> Path:
    """The Pulumi project holding ``start`` (default: the current directory): the nearest directory with a
    ``Pulumi.yaml``; else the checkout this package runs from; else ``start`` itself (commands then say
    that no ``Pulumi.yaml`` is there)."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "Pulumi.yaml").is_file():
            return candidate
    checkout = PACKAGE_DIR.parent
    return checkout if (checkout / "Pulumi.yaml").is_file() else here


PROJECT_DIR = find_project_dir()
SECRET = "[secret]"


class PlanError(Exception):
    """The plan could not run (no such stack, no project) — not a config finding. Exit code 1."""


class StackFileError(PlanError):
    """A stack or project file that is not a valid config document (not YAML, a duplicate key, the
    wrong shape, an alias bomb). The CLI treats it as an invalid config: exit code 2."""


@dataclass
class Plan:
    project: str
    stack: str
    region: str | None
    resources: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    invokes: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    """What the program logged through ``pulumi.log`` (warnings show up as findings too)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def of_type(self, token: str) -> list[Registration]:
        return [r for r in self.resources if r.type == token]

    def children(self, urn: str) -> list[Registration]:
        return [r for r in self.resources if r.parent == urn]

    def by_name(self, name: str) -> Registration:
        for r in self.resources:
            if r.name == name:
                return r
        raise KeyError(name)


# --- config ---------------------------------------------------------------------------------------------


def stack_names(project_dir: Path = PROJECT_DIR) -> list[str]:
    config_dir = _config_dir(project_dir)
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in config_dir.glob("Pulumi.*.yaml"))


def _read_yaml(path: Path, shown: str) -> Any:
    from gpucluster.load import YamlError, load_yaml

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"cannot read {shown}: {exc}") from None
    try:
        return load_yaml(text, shown)
    except YamlError as exc:
        raise StackFileError(str(exc)) from None


def _project(project_dir: Path) -> dict[str, Any]:
    if not project_dir.is_dir():
        raise PlanError(f"project directory {project_dir} does not exist; pass --project-dir DIR (the folder with Pulumi.yaml)")
    path = project_dir / "Pulumi.yaml"
    if not path.is_file():
        raise PlanError(f"no Pulumi.yaml in {project_dir}; pass --project-dir DIR (the folder with Pulumi.yaml)")
    doc = _read_yaml(path, str(path)) or {}
    if not isinstance(doc, Mapping):
        raise StackFileError(f"{path}: the document must be a mapping (name:, runtime:, …), not {_kind(doc)}")
    return dict(doc)


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"{type(value).__name__} {value!r}"[:60]


def _config_dir(project_dir: Path) -> Path:
    return project_dir / str(_project(project_dir).get("stackConfigDir", "."))


def _as_pulumi_value(value: Any) -> str:
    """How the Pulumi CLI hands a config value to a program: scalars as text, objects as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)  # YAML dates and the like as text, as the Pulumi CLI does
    return str(value)


def read_stack_file(stack: str, project_dir: Path = PROJECT_DIR) -> dict[str, Any]:
    """``stacks/Pulumi.<stack>.yaml`` as a mapping, checked for shape (``config:`` a mapping of keys)."""
    path = _config_dir(project_dir) / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stack_names(project_dir)) or "none"
        shown = path.relative_to(project_dir) if path.is_relative_to(project_dir) else path
        raise PlanError(f"no stack config {shown} (stacks: {known})")
    doc = _read_yaml(path, path.name)
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise StackFileError(f"{path.name}: the document must be a mapping with a `config:` key, not {_kind(doc)}")
    config = doc.get("config")
    if config is not None and not isinstance(config, Mapping):
        raise StackFileError(f"{path.name}: `config:` must be a mapping of `namespace:key: value`, not {_kind(config)}")
    env = doc.get("environment")
    if env is not None and not (isinstance(env, list) and all(isinstance(e, str) for e in env)):
        raise StackFileError(f"{path.name}: `environment:` must be a list of ESC environment names, not {_kind(env)}")
    return dict(doc)


def stack_environments(stack: str, project_dir: Path = PROJECT_DIR) -> list[str]:
    """The Pulumi ESC environments a stack file imports (``environment:``); the offline plan cannot
    open them, so their values must be given with ``--config``/``--config-file``."""
    return list(read_stack_file(stack, project_dir).get("environment") or [])


ESC_NOTE = (
    "imports Pulumi ESC environment(s) {envs}; the offline plan cannot see ESC values, so keys they set "
    "look unset here. Give them with --config KEY=VALUE or --config-file values.yaml."
)


def load_stack_config(stack: str, project_dir: Path = PROJECT_DIR) -> tuple[str, dict[str, str], list[str]]:
    """``(project name, {namespaced key: value text}, secret keys)`` for a stack."""
    project = _project(project_dir)
    name = str(project.get("name", "project"))
    doc = read_stack_file(stack, project_dir)
    raw: dict[str, Any] = {}
    project_config = project.get("config") or {}
    if not isinstance(project_config, Mapping):
        raise StackFileError(f"Pulumi.yaml: `config:` must be a mapping, not {_kind(project_config)}")
    for key, spec in project_config.items():  # project-level defaults
        if isinstance(spec, Mapping) and ("value" in spec or "default" in spec):
            raw[str(key)] = spec.get("value", spec.get("default"))
    raw.update({str(k): v for k, v in (doc.get("config") or {}).items()})
    return (name, *as_config(name, raw))


def as_config(project: str, raw: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """``({namespaced key: value text}, secret keys)`` from config values as a stack file holds them."""
    config: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in raw.items():
        full = key if ":" in key else f"{project}:{key}"
        if isinstance(value, Mapping) and set(value) == {"secure"}:
            config[full], _ = SECRET, secrets.append(full)
        else:
            config[full] = _as_pulumi_value(value)
    return config, secrets


# --- files shown in the plan ------------------------------------------------------------------------------

FileExtractor = Callable[[Registration], dict[str, str]]


def _user_data(r: Registration) -> dict[str, str]:
    """The user data, then each file its cloud-config writes (decoded), as ``<resource><path>``."""
    data = r.inputs.get("userData") or r.inputs.get("userDataBase64")
    if not isinstance(data, str) or not data:
        return {}
    try:
        raw = base64.b64decode(data, validate=True)
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()  # gzipped user data, as cloud-init takes it
    except (binascii.Error, UnicodeDecodeError):
        text = data
    return {f"{r.name}/user-data": text, **cloud_config_files(r.name, text)}


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
    from gpucluster.render.core import WriteFile

    doc = cloud_config_text(text)
    if doc is None:
        return {}
    try:
        data = yaml.safe_load(doc)
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
    """A zip object (the Slurm node agent's package) as the list of what it holds."""
    import io
    import zipfile

    data = r.inputs.get("contentBase64")
    if not isinstance(data, str) or r.inputs.get("contentType") != "application/zip":
        return {}
    raw = base64.b64decode(data)
    names = zipfile.ZipFile(io.BytesIO(raw)).infolist()
    lines = [f"zip archive, {len(names)} files, {len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()}"]
    lines += [f"{i.file_size:>8}  {i.filename}" for i in names]
    return {f"{r.name}/{r.inputs.get('key')}": "\n".join(lines) + "\n"}


def _summarize_binary(inputs: dict[str, Any]) -> dict[str, Any]:
    """Binary object contents appear in the JSON plan as their size and sha256, not as base64."""
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


FILE_EXTRACTORS: dict[str, FileExtractor] = {
    "aws:ec2/launchTemplate:LaunchTemplate": _user_data,
    "aws:ec2/instance:Instance": _user_data,
    "aws:s3/bucketObjectv2:BucketObjectv2": _bucket_object,
    "kubernetes:helm.sh/v3:Release": _helm_values,
    "kubernetes:core/v1:ConfigMap": _config_map,
}


# --- running ----------------------------------------------------------------------------------------------


def run_plan(stack: str, project_dir: Path = PROJECT_DIR, *, config_overrides: Mapping[str, Any] | None = None) -> Plan:
    """Plan ``stack``: the real ``__main__.py`` under mocks. Config errors land in ``Plan.error``.

    ``config_overrides`` (``--config``/``--config-file``) win over the stack file; keys without a
    namespace take the project's, as ``pulumi config set`` does."""
    project, config, secrets = load_stack_config(stack, project_dir)
    extra, extra_secrets = as_config(project, {str(k): v for k, v in (config_overrides or {}).items()})
    config.update(extra)
    secrets = [s for s in secrets if s not in extra] + extra_secrets
    if not (project_dir / "__main__.py").is_file():
        raise PlanError(f"no __main__.py in {project_dir}; pass --project-dir DIR (the folder with the stack program)")
    return run_program(project, stack, config, secrets, project_dir)


def run_program(
    project: str, stack: str, config: dict[str, str], secrets: list[str] | None = None, project_dir: Path = PROJECT_DIR
) -> Plan:
    """Run ``project_dir/__main__.py`` with ``config`` under the mocks."""
    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))

    def program() -> None:
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")

    return execute(program, project=project, stack=stack, config=config, secrets=secrets)


def execute(
    program: Callable[[], object],
    *,
    project: str = "gpucluster",
    stack: str = "test",
    config: Mapping[str, str] | None = None,
    secrets: list[str] | None = None,
    mocks: PlanMocks | None = None,
) -> Plan:
    """Run ``program`` inside a fresh stack under the mocks and return what it registered.

    The tests use this directly to build single components; :func:`run_program` runs the stack program.
    """
    config = dict(config or {})
    region = config.get("aws:region")
    mocks = mocks or PlanMocks(region=region or "us-east-1", catalog=load_catalog())
    monitor = RecordingMonitor(mocks)
    plan = Plan(project=project, stack=stack, region=region)
    _fresh_event_loop()
    logger = logging.getLogger(f"gpucluster.plan.{stack}")
    logger.propagate = False
    logger.handlers = [_ListHandler(plan.logs)]
    set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger)
    set_all_config(config, list(secrets or []))
    pulumi_settings.ROOT.set(None)  # set_mocks made a throwaway stack; run our own
    try:

        def body() -> None:
            program()

        _sync_await(run_in_stack(body))
    except pulumi.RunError as exc:
        plan.error = str(exc)
        cause = exc.__cause__
        if isinstance(cause, ConfigError):
            plan.findings = [f.as_dict() for f in cause.findings]
    finally:
        pulumi_settings.ROOT.set(None)
        _stop_worker_threads()
    plan.resources = [r for r in monitor.registrations if r.type != "pulumi:pulumi:Stack"]
    stack_regs = [r for r in monitor.registrations if r.type == "pulumi:pulumi:Stack"]
    if stack_regs:
        plan.outputs = _plain(monitor.outputs.get(stack_regs[0].urn, {}))
        if isinstance(plan.outputs.get("estimate"), dict):
            plan.outputs["estimate"] = restore_nulls(plan.outputs["estimate"])
    if plan.ok:
        plan.findings = list(plan.outputs.get("findings", []))
    for r in plan.resources:
        r.inputs = _plain(r.inputs)
        r.state = _plain(r.state)
        extractor = FILE_EXTRACTORS.get(r.type)
        if extractor:
            plan.files.update(extractor(r))
        if r.type == "aws:s3/bucketObjectv2:BucketObjectv2":
            r.inputs = _summarize_binary(r.inputs)
    plan.invokes = [token for token, _ in mocks.calls]
    return plan


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__()
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(f"{record.levelname.lower()}: {record.getMessage()}")


def _fresh_event_loop() -> None:
    """Each plan runs on a loop of its own (closed by :func:`_stop_worker_threads`)."""
    asyncio.set_event_loop(asyncio.new_event_loop())


def _stop_worker_threads() -> None:
    """Join the executor threads the runtime ran RPCs on: each holds an event loop of its own, which
    otherwise is only collected at interpreter exit, noisily."""
    loop = asyncio.get_event_loop()
    if not loop.is_running():
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


def _plain(value: Any) -> Any:
    """Mock outputs as plain JSON values: integral floats back to ints, secrets masked."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        if "4dabf18193072939515e22adb298388d" in value:  # a serialized secret or resource reference
            sig = value["4dabf18193072939515e22adb298388d"]
            if sig == "1b47061264138c4ac30d75fd1eb44270":
                return SECRET
            return {k: _plain(v) for k, v in value.items() if k != "4dabf18193072939515e22adb298388d"}
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
