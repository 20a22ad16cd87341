"""The base every spec model shares: frozen, strict about unknown keys, camelCase in config files.

Fields are snake_case in Python and camelCase in the stack config (``instance_type`` ↔
``instanceType``), the usual Pulumi config style. Each field is documented by the docstring under it;
``docs/config-reference.md`` is generated from those docstrings (``gpucluster docs``).
"""

from __future__ import annotations

import re
import types
import typing

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$|^[a-z]$")


class SpecModel(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
        str_strip_whitespace=True,
        # ``.inf``, ``1e400``, ``nan``: no field means "unbounded", and a non-finite number would
        # overflow the sizing arithmetic or end up as ``Infinity`` (invalid JSON) in ``plan --json``.
        allow_inf_nan=False,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _strict_scalars(cls, value: object, info: ValidationInfo) -> object:
        """Counts are whole numbers and switches are booleans, nothing pydantic would coerce.

        Refused: ``true`` for a number (pydantic reads it as 1), ``2.5`` or ``2.0`` for a count, ``1`` or
        ``"yes"`` for a switch. Accepted, because the Pulumi CLI hands config values over as text: a
        whole number written as text (``"4"``) and the texts ``"true"``/``"false"``.
        """
        field = cls.model_fields.get(info.field_name or "")
        if field is None:
            return value
        kinds = _scalar_kinds(field.annotation)
        if int in kinds:
            return strict_int(value)
        if float in kinds:
            return strict_float(value)
        if bool in kinds:
            return strict_bool(value)
        if dict in kinds and isinstance(value, dict):
            args = typing.get_args(_unwrap_optional(field.annotation))
            if len(args) == 2 and args[1] is int:
                return {k: strict_int(v) for k, v in value.items()}
        return value


def _unwrap_optional(annotation: object) -> object:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _scalar_kinds(annotation: object) -> set[type]:
    """``{int}`` for ``int`` / ``int | None`` (likewise float, bool); ``{dict}`` for a dict."""
    inner = _unwrap_optional(annotation)
    if inner in (int, float, bool):
        return {typing.cast(type, inner)}
    if typing.get_origin(inner) is dict:
        return {dict}
    return set()


def strict_int(value: object) -> object:
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a whole number, not the boolean {v}", {"v": str(value).lower()})
    if isinstance(value, float):
        raise PydanticCustomError("int_type", "Input should be a whole number, not the decimal {v}", {"v": str(value)})
    if isinstance(value, str):
        if not re.fullmatch(r"-?[0-9]+", value.strip()):
            raise PydanticCustomError(
                "int_type", "Input should be a whole number such as 4, not the text {v}", {"v": repr(value)}
            )
        return int(value)
    return value


def strict_float(value: object) -> object:
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "Input should be a number, not the boolean {v}", {"v": str(value).lower()})
    return value


def strict_bool(value: object) -> object:
    if isinstance(value, str) and value.strip() in ("true", "false"):
        return value.strip() == "true"
    if value is not None and not isinstance(value, bool):
        raise PydanticCustomError("bool_type", "Input should be true or false, not {v}", {"v": repr(value)})
    return value


def check_name(value: str, what: str) -> str:
    """Names end up in AWS resource names, Slurm node names and Kubernetes labels: keep them DNS-safe."""
    if not NAME_RE.match(value):
        raise ValueError(
            f"{what} {value!r} is not a valid name: use 1-32 lowercase letters, digits and '-', "
            "starting with a letter and not ending with '-'"
        )
    return value
