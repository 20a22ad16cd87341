"""Read a stack's config the way the Pulumi CLI does: ``Pulumi.yaml`` (project name, ``stackConfigDir``,
project-level defaults), ``stacks/Pulumi.<stack>.yaml`` (checked for shape), the ESC environments it
imports, and values as the CLI hands them to a program (scalars as text, objects as JSON, secrets masked).

Apart from :mod:`gpucluster.tools.plan.run.engine` because ``preflight``, ``stacks`` and ``--config-file``
read stack files without running the program."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucluster._paths import PACKAGE_DIR


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


def stack_names(project_dir: Path = PROJECT_DIR) -> list[str]:
    config_dir = _config_dir(project_dir)
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in config_dir.glob("Pulumi.*.yaml"))


def _read_yaml(path: Path, shown: str) -> Any:
    from gpucluster.load import YamlError, load_yaml

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PlanError(f"cannot read {shown}: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # binary junk, or text saved in another encoding: a config error, not a crash
        raise StackFileError(
            f"{shown} is not UTF-8 text YAML (byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8); "
            "save it as UTF-8 text, or restore it from version control"
        ) from None
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
