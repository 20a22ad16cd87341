"""Generate ``docs/components-reference.md``: every public component, its Args and outputs, from the docstrings.

The source is the one the provider schema is built from (:mod:`gpucluster.tools.provider`): Pulumi's component
analyzer, with the workaround that finds inherited fields' descriptions, run over ``PUBLIC_COMPONENTS``. So the
reference says what ``pulumi package add`` tells other languages: each component's token and docstring, each Args
field with its Python key (and the schema's name where it differs), its type, whether it is required or its
default, and its description; each output; then every type the Args use.

The default is read from the field's description, where the Args docstrings state it (``Default: none.``,
``Default 7.``): the schema carries no defaults, the config model validates them at construction. A field whose
description states none shows ``—``.

The file is never edited by hand: ``gpucluster generate`` writes it and ``gpucluster generate --check`` fails
when it differs.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from gpucluster.tools.provider import NAME, PUBLIC_COMPONENTS
from gpucluster.tools.provider.docstrings import InheritingAnalyzer

# "Default: none." / "Default 7." / "Default ``1.33``. Supported …": the sentence ends at a full stop before a
# blank or the end, so "``storage.protectData``" or "1.33" inside it does not end it.
_DEFAULT = re.compile(r"(?:^|(?<=\s))Default:?\s+(?P<value>.+?)\.(?=\s|$)")
# "``on-demand`` (default), ``spot`` …": a choice marked as the default inside the sentence.
_INLINE_DEFAULT = re.compile(r"``(?P<value>[^`]+)`` \(default[):]")
_TYPES = f"#/types/{NAME}:index:"


def _text(value: str) -> str:
    """One table cell: blanks collapsed, pipes escaped."""
    return " ".join(value.split()).replace("|", "\\|")


def split_default(description: str) -> tuple[str | None, str]:
    """``(default, the description without its "Default …" sentence)``; ``(None, description)`` when it states
    none. A choice marked "(default)" inside a sentence is the default too; that sentence stays."""
    text = " ".join(description.split())
    found = _DEFAULT.search(text)
    if found is None:
        inline = _INLINE_DEFAULT.search(text)
        return (f"``{inline.group('value')}``" if inline else None), text
    rest = (text[: found.start()] + text[found.end() :]).strip()
    return found.group("value"), " ".join(rest.split())


def type_text(prop: Any) -> str:
    """A property's type in words: ``string``, ``list of string``, ``map of string``, a link to a type."""
    if prop.ref:
        if prop.ref.startswith(_TYPES):
            name = prop.ref[len(_TYPES) :]
            return f"[{name}](#{name.lower()})"
        return f"`{prop.ref}`"
    if prop.items is not None:
        return f"list of {type_text(prop.items)}"
    if prop.additional_properties is not None:
        return f"map of {type_text(prop.additional_properties)}"
    return prop.type.value if prop.type is not None else "any"


def _name(schema_name: str, mapping: Mapping[str, str]) -> str:
    python = mapping.get(schema_name, schema_name)
    return f"`{python}`" + (f" (`{schema_name}`)" if python != schema_name else "")


def field_rows(properties: Mapping[str, Any], mapping: Mapping[str, str]) -> list[str]:
    """The table of an Args class or a type: field, type (``Input``: an Output is accepted), default, description."""
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for schema_name, prop in properties.items():
        default, rest = split_default(prop.description or "")
        if not prop.optional:
            default = "required"
        kind = type_text(prop) + ("" if prop.plain else ", Input")
        rows.append(f"| {_name(schema_name, mapping)} | {kind} | {_text(default or '—')} | {_text(rest)} |")
    return rows


def _output_rows(properties: Mapping[str, Any], mapping: Mapping[str, str]) -> list[str]:
    rows = ["| output | type | description |", "|---|---|---|"]
    for schema_name, prop in properties.items():
        optional = ", may be absent" if prop.optional else ""
        rows.append(f"| {_name(schema_name, mapping)} | {type_text(prop)}{optional} | {_text(prop.description or '')} |")
    return rows


def _component(cls: type[pulumi.ComponentResource], definition: Any) -> list[str]:
    args = inspect.get_annotations(cls.__init__)["args"]
    return [
        f"## {definition.name}",
        "",
        f"`{NAME}:index:{definition.name}`, in Python `gpucluster.{definition.name}(name, args: {args.__name__}, opts)`.",
        "",
        inspect.cleandoc(definition.description or ""),
        "",
        f"**{args.__name__}**",
        "",
        *field_rows(definition.inputs, definition.inputs_mapping),
        "",
        "**Outputs**",
        "",
        *_output_rows(definition.outputs, definition.outputs_mapping),
        "",
    ]


def _type(definition: Any) -> list[str]:
    description = inspect.cleandoc(definition.description or "")
    if description.startswith(f"{definition.name}("):  # a dataclass without a docstring: its signature, not prose
        description = ""
    lines = [f"### {definition.name}", ""]
    lines += [description, ""] if description else []
    return [*lines, *field_rows(definition.properties, definition.properties_mapping), ""]


def components_reference(components: Sequence[type[pulumi.ComponentResource]] = PUBLIC_COMPONENTS) -> str:
    analysis = InheritingAnalyzer(NAME).analyze(list(components))
    definitions = analysis["component_definitions"]
    lines = [
        "# Components reference",
        "",
        "Generated by `gpucluster generate` from the component Args classes' docstrings, by the analysis that builds",
        "the provider schema (`pulumi package add`); do not edit. Each field: its Python key (the schema's name, which",
        "other languages use, in parentheses where it differs), its type (`Input`: an Output of another resource is",
        "accepted; every other field must be known when the program runs), `required` or its default, and what it",
        "does. The stack file's keys: [config-reference.md](config-reference.md).",
        "",
    ]
    for cls in components:
        lines += _component(cls, definitions[cls.__name__])
    lines += ["## Types", "", "The nested types the Args above use.", ""]
    for name in sorted(analysis["type_definitions"]):
        lines += _type(analysis["type_definitions"][name])
    return "\n".join(lines).rstrip("\n") + "\n"
