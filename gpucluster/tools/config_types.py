"""Generate ``components/_shared/config_types.py``: the stack config's shape as typed dicts for component Args.

A component used from a program takes the same fields, with the same defaults and validation, as the
stack config: its Args are typed dicts whose fields mirror the config model (``NodeGroupSpec`` →
``NodeGroupConfig``), and the component validates what it is given with that model. The typed dicts
are what Pulumi's component analyzer reads to build the schema other languages use, so they are real
classes with a docstring under each field (no ``Union``, ``Literal`` or ``from __future__`` there:
the analyzer supports none of them).

Fields that name another resource (a subnet, a VPC, an AMI, a capacity reservation, a KMS key, a file
system, an IAM principal) are ``pulumi.Input``: a program may pass an ``Output`` of a resource it
creates. :data:`REFERENCES` lists them with the kind of reference each is; ``components/_shared/inputs.py``
validates such a value when it is known.

The file is never edited by hand: ``gpucluster generate`` writes it (with the other generated files;
``python -m gpucluster.tools.config_types`` writes this one alone) and ``gpucluster generate --check``
fails when it differs.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpucluster._paths import COMPONENTS_DIR
from gpucluster.config.cluster import ClusterSpec

TARGET = COMPONENTS_DIR / "_shared" / "config_types.py"

# (model, field) → reference kind (see components/_shared/inputs.py KINDS). Every other field is plain: it
# decides what gets created, so it must be known when the program runs.
REFERENCES: dict[tuple[str, str], str] = {
    ("NetworkSpec", "vpc_id"): "vpc",
    ("SubnetSpec", "id"): "subnet",
    ("NodeGroupSpec", "subnet_ids"): "subnet",
    ("NodeGroupSpec", "image_id"): "ami",
    ("NodeGroupSpec", "kms_key_id"): "kms",
    ("CapacitySpec", "reservation_id"): "capacity-reservation",
    ("CapacitySpec", "resource_group_arn"): "resource-group",
    ("LustreSpec", "file_system_id"): "file-system",
    ("LustreSpec", "kms_key_id"): "kms-arn",
    ("HeadNodeSpec", "subnet_id"): "subnet",
    ("HeadNodeSpec", "image_id"): "ami",
    ("HeadNodeSpec", "kms_key_id"): "kms-arn",
    ("KubernetesSpec", "secrets_kms_key_arn"): "kms-arn",
    ("AccessEntrySpec", "principal_arn"): "iam-principal",
}


def type_name(model: type[BaseModel]) -> str:
    """``NodeGroupSpec`` → ``NodeGroupConfig``; ``ClusterSpec`` → ``ClusterConfig``."""
    return model.__name__.removesuffix("Spec") + "Config"


def models(root: type[BaseModel] = ClusterSpec) -> list[type[BaseModel]]:
    """Every model reachable from ``root``, dependencies first (each class is defined before use)."""
    order: list[type[BaseModel]] = []

    def walk(model: type[BaseModel]) -> None:
        if model in order:
            return
        for field in model.model_fields.values():
            for inner in _leaves(field.annotation):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    walk(inner)
        order.append(model)

    walk(root)
    return order


def _leaves(annotation: object) -> list[object]:
    found = [annotation]
    for arg in typing.get_args(annotation):
        found.extend(_leaves(arg))
    return found


def _unwrap_optional(annotation: object) -> object:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"a union other than Optional cannot be a component input: {annotation}")
        return args[0]
    return annotation


def annotation(hint: object, reference: bool) -> tuple[str, list[str]]:
    """The typed-dict annotation of a model field, and what its description should add (choices)."""
    hint = _unwrap_optional(hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        if len(kinds) != 1:
            raise TypeError(f"mixed literal {hint}")
        base = next(iter(kinds)).__name__
        return base, ["One of: " + ", ".join(f"``{a}``" for a in args) + "."]
    if origin is tuple:
        inner, notes = annotation(args[0], reference)
        if reference:
            return "pulumi.Input[list[pulumi.Input[str]]]", notes
        return f"list[{inner}]", notes
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"map keys must be text: {hint}")
        inner, notes = annotation(args[1], False)
        return f"dict[str, {inner}]", notes
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return type_name(hint), []
    if hint in (str, int, float, bool):
        name = typing.cast(type, hint).__name__
        return (f"pulumi.Input[{name}]" if reference else name), []
    raise TypeError(f"no component-input form for {hint}")


def _default_text(field: FieldInfo) -> str | None:
    if field.is_required():
        return None
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is None or value == () or value == {}:
        return None
    if isinstance(value, BaseModel):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _docstring(text: str) -> str:
    text = " ".join(text.split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{text}"""'


def render() -> str:
    lines = [
        '"""The stack config\'s shape as typed dicts: the fields of component Args.',
        "",
        "GENERATED by ``gpucluster generate`` from the config model (gpucluster/config/);",
        "do not edit. Each class mirrors one model (``NodeGroupSpec`` → ``NodeGroupConfig``) field for field;",
        "the component validates its Args with that model, so defaults and errors are the stack's.",
        '"""',
        "",
        "from typing import Required, TypedDict",
        "",
        "import pulumi",
        "",
        "# (typed dict, field) → the kind of resource a field names (components/_shared/inputs.py KINDS).",
        "REFERENCES: dict[tuple[str, str], str] = {",
    ]
    for (model_name, field_name), kind in sorted(REFERENCES.items()):
        config_name = model_name.removesuffix("Spec") + "Config"
        lines.append(f'    ("{config_name}", "{field_name}"): "{kind}",')
    lines.append("}")
    seen_refs: set[tuple[str, str]] = set()
    for model in models():
        lines += ["", "", f"class {type_name(model)}(TypedDict, total=False):"]
        doc = " ".join(inspect.cleandoc(model.__doc__ or "").split("\n\n")[0].split())  # the first paragraph
        lines.append(f"    {_docstring(doc or type_name(model))}")
        lines.append("")
        for name, field in model.model_fields.items():
            reference = (model.__name__, name) in REFERENCES
            if reference:
                seen_refs.add((model.__name__, name))
            hint, notes = annotation(field.annotation, reference)
            if field.is_required():
                hint = f"Required[{hint}]"
            description = (field.description or "").strip()
            if not description:
                raise ValueError(f"{model.__name__}.{name} has no docstring")
            parts = [description, *notes]
            default = _default_text(field)
            if field.is_required() and "required" not in description.lower():
                parts.append("Required.")
            elif default is not None and "default" not in description.lower():
                parts.append(f"Default: ``{default}``.")
            if reference:
                parts.append("May be an Output of another resource.")
            lines.append(f"    {name}: {hint}")
            lines.append(f"    {_docstring(' '.join(parts))}")
    names = "".join(f'    "{type_name(m)}",\n' for m in sorted(models(), key=type_name))
    lines[lines.index("# (typed dict, field) → the kind of resource a field names (components/_shared/inputs.py KINDS).")] = (
        f"__all__ = [\n{names}]\n\n# (typed dict, field) → the kind of resource a field names (components/_shared/inputs.py KINDS)."
    )
    missing = set(REFERENCES) - seen_refs
    if missing:
        raise ValueError(f"REFERENCES names fields the model does not have: {sorted(missing)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    text = render()
    if check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run gpucluster generate", file=sys.stderr)
            return 1
        return 0
    Path(TARGET).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
