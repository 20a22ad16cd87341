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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from gpucluster.config.base import control_character
from gpucluster.config.checks.cluster import GROUP_CHECKS, validate_cluster
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import storage_sizing
from gpucluster.config.errors import ConfigError, Finding, error, errors_in
from gpucluster.config.network import NetworkSpec
from gpucluster.config.pydantic_errors import NAMESPACE, REGION_KEY, pydantic_findings, render_path
from gpucluster.config.storage.sizing import Sizing
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.resolve.cluster import ResolvedCluster, resolve
from gpucluster.resolve.cost.services import override_findings


@dataclass(frozen=True)
class LoadResult:
    cluster: ResolvedCluster
    """The resolved cluster: every default chosen, what renderers and components are built from."""
    findings: tuple[Finding, ...]
    """Warnings and notes (errors would have raised)."""
    sizing: Sizing | None = None
    """The storage sizing with every tier considered (before resolution fixed the chosen one)."""

    @property
    def spec(self) -> ClusterSpec:
        """The resolved spec: every default chosen."""
        return self.cluster.spec


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
    meant: set[str] = set()
    for key, value in config.items():
        if key in keys:
            raw[keys[key]] = _decode(value)
        elif key.startswith(f"{NAMESPACE}:"):
            close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.6)
            findings.append(_unknown_key(key, close[0] if close else None, keys, config))
            meant.update(c for c in close if c not in config)
    raw.setdefault("name", stack)
    if "region" not in raw:
        fix = "run `pulumi config set aws:region us-east-1` (or your region)"
        findings.append(error(REGION_KEY, "no AWS region set", fix, None, "missing"))
        raw["region"] = "us-east-1"  # placeholder so the rest still gets checked; we raise below
    try:
        return _load(raw, findings, catalog, source)
    except ConfigError as exc:  # a key that is "missing" because it was misspelt: its unknown-key finding says so
        raise ConfigError([f for f in exc.findings if not (f.code == "missing" and f.path in meant)], source) from None


def _unknown_key(key: str, close: str | None, keys: Mapping[str, str], config: Mapping[str, object]) -> Finding:
    if close is None:
        return error(key, f"unknown config key {key!r}", f"valid keys: {', '.join(sorted(keys))}", None, "unknown-key")
    required = close not in config and close != REGION_KEY and ClusterSpec.model_fields[_field(keys[close])].is_required()
    fix = f"rename the key to {close}" + (", which is required" if required else "")
    return error(key, f"unknown config key {key!r}; did you mean {close!r}?", fix, None, "unknown-key")


def _field(alias: str) -> str:
    return next(name for name, f in ClusterSpec.model_fields.items() if (f.alias or name) == alias)


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
    return LoadResult(result.cluster, tuple(_args_path(f, path) for f in result.findings), result.sizing)


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
    cluster = resolve(spec, catalog)
    findings.extend(override_findings(spec, [i.key for i in cluster.estimate.fixed]))
    if errors_in(findings):
        raise ConfigError(findings, source)
    return LoadResult(cluster, tuple(findings), storage_sizing(spec, catalog))


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
