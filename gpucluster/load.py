"""Load a stack's ``gpucluster:`` config into a validated, resolved :class:`ClusterSpec`.

Input is the flat Pulumi config map (``{"gpucluster:nodeGroups": "[...]", "aws:region": "us-east-1"}``;
structured values may arrive as JSON text, as Pulumi passes them). Every problem — unknown keys,
wrong types, failed validators — is collected and raised as one :class:`ConfigError` before the
program registers a single resource.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gpucluster.config.base import FIX_MARK, control_character
from gpucluster.config.checks.cluster import GROUP_CHECKS, validate_cluster
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import storage_sizing
from gpucluster.config.errors import ConfigError, Finding, error, errors_in
from gpucluster.config.network import NetworkSpec
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.config.sizing import Sizing
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.resolve.cluster import resolve

NAMESPACE = "gpucluster"
REGION_KEY = "aws:region"


@dataclass(frozen=True)
class LoadResult:
    spec: ClusterSpec
    """The resolved spec: every default chosen."""
    findings: tuple[Finding, ...]
    """Warnings and notes (errors would have raised)."""
    sizing: Sizing | None = None
    """The storage sizing with every tier considered (before resolution fixed the chosen one)."""


def config_keys() -> dict[str, str]:
    """``{config key: ClusterSpec field alias}`` for every key the namespace accepts."""
    keys = {f"{NAMESPACE}:{field.alias or name}": field.alias or name for name, field in ClusterSpec.model_fields.items()}
    keys[REGION_KEY] = "region"
    del keys[f"{NAMESPACE}:region"]
    return keys


def _decode(value: object) -> object:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def load_spec(
    config: Mapping[str, object],
    *,
    stack: str,
    catalog: Catalog | None = None,
    source: str | None = None,
) -> LoadResult:
    """Parse, validate and resolve. Raises :class:`ConfigError` listing every problem."""
    catalog = catalog or load_catalog()
    source = source or f"stack {stack!r}"
    keys = config_keys()
    findings: list[Finding] = []
    raw: dict[str, Any] = {}
    for key, value in config.items():
        if key in keys:
            raw[keys[key]] = _decode(value)
        elif key.startswith(f"{NAMESPACE}:"):
            close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.6)
            findings.append(
                error(
                    key,
                    f"unknown config key {key!r}",
                    f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(sorted(keys))}",
                    None,
                    "unknown-key",
                )
            )
    raw.setdefault("name", stack)
    if "region" not in raw:
        fix = "run `pulumi config set aws:region us-east-1` (or your region)"
        findings.append(error(REGION_KEY, "no AWS region set", fix, None, "missing"))
        raw["region"] = "us-east-1"  # placeholder so the rest still gets checked; we raise below
    return _load(raw, findings, catalog, source)


def load_args(args: Mapping[str, Any], *, catalog: Catalog, source: str, path: str = "args") -> LoadResult:
    """The stack's load path for a component's Args: the same parse, checks and resolution as
    :func:`load_spec`, so a ``GpuCluster`` built from Args gets exactly the stack's defaults and errors.

    ``args`` holds the stack config's fields (snake_case or camelCase names, any depth; ``name`` and
    ``region`` included). Findings name ``<path>.<camelCase field>`` (``args.nodeGroups[0].maxSize``)
    instead of the stack key, since the Args' schema names are the stack's keys.
    """
    names = {name: field.alias or name for name, field in ClusterSpec.model_fields.items()}
    raw = {names.get(key, key): value for key, value in args.items()}
    try:
        result = _load(raw, [], catalog, source)
    except ConfigError as exc:
        raise ConfigError([_args_path(f, path) for f in exc.findings], source) from None
    return LoadResult(result.spec, tuple(_args_path(f, path) for f in result.findings), result.sizing)


def _args_path(finding: Finding, path: str) -> Finding:
    """``gpucluster:nodeGroups[0].max_size`` → ``args.nodeGroups[0].maxSize``; ``aws:region`` → ``args.region``."""
    rest = finding.path.removeprefix(f"{NAMESPACE}:")
    if finding.path == REGION_KEY or finding.path.startswith(REGION_KEY):
        rest = "region" + finding.path.removeprefix(REGION_KEY)
    elif rest == finding.path:
        return finding
    camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), rest)
    return dataclasses.replace(finding, path=f"{path}.{camel}")


def _load(raw: dict[str, Any], findings: list[Finding], catalog: Catalog, source: str) -> LoadResult:
    """Parse ``raw`` (ClusterSpec's fields by alias), check it against ``catalog``, resolve it."""
    findings.extend(control_findings(raw))
    try:
        spec = ClusterSpec.model_validate(raw)
    except ValidationError as exc:
        findings.extend(pydantic_findings(exc))
        findings.extend(partial_findings(raw, catalog))
        raise ConfigError(findings, source) from None
    findings.extend(validate_cluster(spec, catalog))
    if errors_in(findings):
        raise ConfigError(findings, source)
    return LoadResult(resolve(spec, catalog), tuple(findings), storage_sizing(spec, catalog))


def control_findings(raw: Mapping[str, Any]) -> list[Finding]:
    """Every string of the config — values and map keys, at any depth — that holds a control character.

    Config values reach shell scripts, env files, fstab, systemd units, slurm.conf and YAML, where a
    newline, carriage return, NUL or U+2028 can end a line and start another: none is allowed anywhere.
    """
    out: list[Finding] = []

    def walk(value: object, path: str) -> None:
        if isinstance(value, str):
            where = control_character(value, path.rsplit(".", 1)[-1])
            if where:
                out.append(
                    error(
                        path,
                        f"contains a control character ({where}); config values must be printable text",
                        "remove the newline, tab, carriage return, NUL or other control character from the value",
                        value,
                        "control-character",
                    )
                )
        elif isinstance(value, Mapping):
            for key, item in value.items():
                key_text = str(key)
                where = control_character(key_text)
                if where:
                    out.append(
                        error(
                            path,
                            f"has a key with a control character ({where}); keys must be printable text",
                            "remove the newline, tab, carriage return, NUL or other control character from the key",
                            key_text,
                            "control-character",
                        )
                    )
                    continue
                walk(item, f"{path}.{key_text}")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    for key, value in raw.items():
        walk(value, render_path((key,)))
    return out


def partial_findings(raw: Mapping[str, Any], catalog: Catalog) -> list[Finding]:
    """Semantic findings for the node groups that parse, when something else in the config did not.

    So one run reports a misspelt instance type in one group together with a bad type elsewhere.
    """
    try:
        network = NetworkSpec.model_validate(raw.get("network", {}))
        partial = ClusterSpec.model_construct(
            name=str(raw.get("name")), region=str(raw.get("region")), network=network, node_groups=(), tags={}
        )
    except ValidationError:
        return []
    groups = raw.get("nodeGroups")
    if not isinstance(groups, list):
        return []
    out: list[Finding] = []
    for i, item in enumerate(groups):
        try:
            group = NodeGroupSpec.model_validate(item)
        except ValidationError:
            continue
        facts = catalog.get(group.instance_type)
        for check in GROUP_CHECKS:
            out.extend(check(i, group, facts, partial, catalog))
    return errors_in(out)


# --- YAML files ----------------------------------------------------------------------------------------

MAX_YAML_NODES = 100_000
"""How many values a YAML document may expand to once its aliases are followed. Stack files hold a few
hundred; an alias bomb (``a: &a [x, x, …]``, ``b: &b [*a, *a, …]``, …) holds billions."""


class YamlError(ValueError):
    """A YAML file the loader refuses: not YAML, a duplicate key, too many values through aliases."""


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses duplicate mapping keys (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader refuses it below with its own message
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: yaml.Node, limit: int, source: str) -> int:
    """How many nodes ``root`` holds with every alias followed (shared nodes counted each time)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise YamlError(f"{source} line {node.start_mark.line + 1}: an alias refers to the value that contains it")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total += size(child)
                if total > limit:
                    break
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
                if total > limit:
                    break
        open_nodes.discard(key)
        sizes[key] = total
        return total

    return size(root)


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document strictly: duplicate keys and alias bombs are refused with
    :class:`YamlError` (naming ``source`` and the line), as is anything that is not YAML."""
    try:
        loader = _StrictLoader(text)
    except yaml.reader.ReaderError as exc:  # a NUL or another character YAML refuses: binary data, not text
        char = f"U+{ord(exc.character):04X}" if isinstance(exc.character, str) else f"byte 0x{exc.character:02x}"
        raise YamlError(f"{source}: not UTF-8 text YAML: {char} at character {exc.position} (binary data?)") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, MAX_YAML_NODES, source) > MAX_YAML_NODES:
            raise YamlError(
                f"{source}: more than {MAX_YAML_NODES} values once its aliases (*name) are expanded; "
                "write the values out, or use fewer nested aliases"
            )
        return loader.construct_document(node)  # type: ignore[no-untyped-call]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise YamlError(f"{source}{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"{source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()


# --- pydantic errors → findings ------------------------------------------------------------------------


def render_path(loc: Sequence[int | str]) -> str:
    head, *rest = loc
    key = REGION_KEY if head == "region" else f"{NAMESPACE}:{head}"
    out = key
    for part in rest:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _model_classes(annotation: object) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _model_classes(arg)
    return found


def model_at(loc: Sequence[int | str], root: type[BaseModel] = ClusterSpec) -> type[BaseModel] | None:
    """The model class whose fields live at ``loc`` (aliases, list indexes skipped)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return None
        classes = _model_classes(field.annotation)
        model = classes[0] if classes else None
    return model


_KIND = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}


def field_doc(loc: Sequence[int | str]) -> str:
    """First sentence of the field's docstring at ``loc``, with its type and bounds."""
    parent = model_at(loc[:-1])
    if parent is None or not isinstance(loc[-1], str):
        return ""
    for name, field in parent.model_fields.items():
        if loc[-1] in (name, field.alias):
            doc = (field.description or "").replace("\n", " ").split(". ")[0].rstrip(".")
            args = typing.get_args(field.annotation) or (field.annotation,)
            kinds = [_KIND[a] for a in args if a in _KIND]
            bounds = [
                f"{sym} {getattr(m, attr)}"
                for m in field.metadata
                for attr, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
                if getattr(m, attr, None) is not None
            ]
            shape = ", ".join(([kinds[0]] if kinds else []) + bounds)
            return f"{doc} ({shape})." if shape else f"{doc}."
    return ""


def pydantic_findings(exc: ValidationError) -> list[Finding]:
    out: list[Finding] = []
    errs = exc.errors(include_url=False)
    item_locs = [tuple(e["loc"]) for e in errs]
    for err in errs:
        loc = tuple(err["loc"])
        if err["type"] == "too_short" and any(len(o) > len(loc) and o[: len(loc)] == loc for o in item_locs):
            continue  # the items failed, so fewer survived; their own errors say why
        kind = err["type"]
        msg = str(err["msg"])
        value: object = err.get("input")
        path = render_path(loc) if loc else "gpucluster"
        if kind == "missing":
            out.append(error(path, "is required but missing", f"set it: {field_doc(loc)}", None, "missing"))
        elif kind == "extra_forbidden":
            parent = model_at(loc[:-1])
            valid = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.6)
            fix = f"did you mean {close[0]!r}?" if close else f"valid fields here: {', '.join(valid)}"
            out.append(error(path, f"unknown field {loc[-1]!r}", fix, None, "unknown-field"))
        elif kind in ("value_error", "assertion_error"):
            text = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            text, _, fix = text.partition(FIX_MARK)  # validators may say how to fix it after FIX_MARK
            shown = value if not isinstance(value, (dict, list)) else None
            out.append(error(path, text, fix, shown, "invalid"))
        else:
            shown = value if not isinstance(value, (dict, list)) or kind.endswith("_type") else None
            doc = field_doc(loc) if loc and isinstance(loc[-1], str) else ""
            out.append(error(path, f"{msg[0].lower()}{msg[1:]}", f"expected: {doc}" if doc else "", shown, kind))
    return out
