"""Component Args in, validated config model out: the one path from a program's inputs to the model.

A component validates its Args with the same model and checks as the stack config, before any
resource exists. Fields that name another resource (:data:`~gpucluster.components._shared.config_types.
REFERENCES`) may be Outputs, unknown until deployment: for validation each gets a *stand-in*, a
well-formed value of its kind that no real resource has (``cr-0eeee0000000000001``), so the model and
every check run as usual. Where the component then uses a model value, :meth:`Inputs.real` (one value),
:meth:`Inputs.real_list` and :meth:`Inputs.real_text` (rendered files) put the Output back. When the
Output resolves, its value is checked against its kind (a reservation id must look like ``cr-…``)
before it is used, so a wrong wiring fails the deployment with the field's name instead of reaching
EC2 or a node's user data. A stand-in therefore never reaches AWS: a value the component cannot map
back is a bug, and :meth:`Inputs.real_text` refuses text that still holds one after substitution.

Any other field that receives an Output is refused: it decides what gets created, so it must be known
when the program runs.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pydantic.alias_generators import to_camel  # the config model's own alias rule

from gpucluster.components._shared.config_types import REFERENCES
from gpucluster.config.checks.deploy import KMS_ALIAS, KMS_ARN, KMS_KEY_ID
from gpucluster.config.errors import ConfigError, Finding, error

_HEX = 0xEEEE0000000000000  # 17 hex digits: stand-ins are ``<prefix>-0eeee…`` and never collide with each other


@dataclass(frozen=True)
class Kind:
    """A kind of resource reference: how its stand-in looks and what a real value must match."""

    what: str
    example: str
    pattern: re.Pattern[str] | None
    template: str  # ``{hex}`` (17 hex digits), ``{uuid}``, ``{region}``

    def accepts(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        if self.pattern is not None:
            return bool(self.pattern.match(value))
        return bool(KMS_ARN.match(value) or KMS_KEY_ID.match(value) or KMS_ALIAS.match(value))


KINDS: dict[str, Kind] = {
    "vpc": Kind("VPC id", "vpc-0123456789abcdef0", re.compile(r"^vpc-[0-9a-f]{8,17}$"), "vpc-{hex}"),
    "subnet": Kind("subnet id", "subnet-0123456789abcdef0", re.compile(r"^subnet-[0-9a-f]{8,17}$"), "subnet-{hex}"),
    "ami": Kind("AMI id", "ami-0123456789abcdef0", re.compile(r"^ami-[0-9a-f]{8,17}$"), "ami-{hex}"),
    "capacity-reservation": Kind(
        "capacity reservation id", "cr-0123456789abcdef0", re.compile(r"^cr-[0-9a-f]{8,17}$"), "cr-{hex}"
    ),
    "file-system": Kind("FSx file system id", "fs-0123456789abcdef0", re.compile(r"^fs-[0-9a-f]{8,17}$"), "fs-{hex}"),
    "resource-group": Kind(
        "resource group ARN",
        "arn:aws:resource-groups:us-east-1:111122223333:group/my-reservations",
        re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]+$"),
        "arn:aws:resource-groups:{region}:000000000000:group/gpucluster-stand-in-{hex}",
    ),
    "kms": Kind(
        "KMS key id, alias or ARN",
        "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        None,
        "arn:aws:kms:{region}:000000000000:key/{uuid}",
    ),
    "kms-arn": Kind(
        "KMS key ARN",
        "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        KMS_ARN,
        "arn:aws:kms:{region}:000000000000:key/{uuid}",
    ),
    "iam-principal": Kind(
        "IAM role or user ARN",
        "arn:aws:iam::111122223333:role/admins",
        re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$"),
        "arn:aws:iam::000000000000:role/gpucluster-stand-in-{hex}",
    ),
}


def is_output(value: object) -> bool:
    """An Output or anything else only known later (an awaitable)."""
    return isinstance(value, pulumi.Output) or inspect.isawaitable(value)


class Inputs:
    """The Outputs one component was given, and the stand-ins that took their place in its model."""

    def __init__(self, component: str, region: str = "us-east-1") -> None:
        self.component = component
        self.region = region
        self._count = 0
        self._outputs: dict[str, pulumi.Output[str]] = {}
        self._lists: dict[str, pulumi.Output[Sequence[str]]] = {}  # one stand-in for a whole-list Output

    # --- in: typed dict → plain dict the model validates --------------------------------------------

    def prepare(self, args: Mapping[str, Any], config_type: type, path: str = "args") -> dict[str, Any]:
        """``args`` (a typed dict of ``config_type``'s shape) with every Output replaced by a stand-in.

        Raises :class:`ConfigError` naming the field when an Output is given where a plain value is needed.
        """
        findings: list[Finding] = []
        plain = self._prepare(args, config_type, path, findings)
        if findings:
            raise ConfigError(findings, source=f"{self.component} args")
        return plain

    def _prepare(self, args: Any, config_type: type, path: str, findings: list[Finding]) -> Any:
        if not isinstance(args, Mapping):
            return args  # the model says what is wrong with it
        hints = dict(config_type.__annotations__)  # real objects: the generated module has no string annotations
        plain: dict[str, Any] = {}
        for key, value in args.items():
            field_path = f"{path}.{to_camel(key)}"
            kind = REFERENCES.get((config_type.__name__, key))
            hint = _strip(hints.get(key))
            if kind is not None:
                plain[key] = self._reference(value, kind, field_path)
            elif is_output(value):
                findings.append(
                    error(
                        field_path,
                        "is an Output, but this field decides what gets created, so it must be known when the program runs",
                        "pass a plain value (only fields that name another resource, such as subnet, reservation or key ids, take Outputs)",
                    )
                )
            elif typing.is_typeddict(hint):
                plain[key] = self._prepare(value, typing.cast(type, hint), field_path, findings)
            elif typing.get_origin(hint) is list and isinstance(value, (list, tuple)):
                inner = _strip(typing.get_args(hint)[0])
                if typing.is_typeddict(inner):
                    plain[key] = [
                        self._prepare(v, typing.cast(type, inner), f"{field_path}[{i}]", findings) for i, v in enumerate(value)
                    ]
                else:
                    plain[key] = list(value)
            else:
                plain[key] = value
        return plain

    def _reference(self, value: Any, kind: str, path: str) -> Any:
        if isinstance(value, (list, tuple)):
            return [self._reference(v, kind, f"{path}[{i}]") for i, v in enumerate(value)]
        if not is_output(value):
            return value
        stand_in = self._stand_in(kind)
        checked = pulumi.Output.from_input(value).apply(lambda v, p=path, k=kind: _checked(v, k, p))
        if _is_list_field(path, kind):
            self._lists[stand_in] = checked
            return [stand_in]
        self._outputs[stand_in] = checked
        return stand_in

    def _stand_in(self, kind: str) -> str:
        self._count += 1
        number = _HEX + self._count
        digits = f"{number:017x}"
        h = f"{number:032x}"
        uuid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        return KINDS[kind].template.format(hex=digits, uuid=uuid, region=self.region)

    # --- out: model values → what resources get ----------------------------------------------------

    def real(self, value: str) -> pulumi.Input[str]:
        """The Output a stand-in took the place of; any other value unchanged."""
        return self._outputs.get(value, value)

    def real_optional(self, value: str | None) -> pulumi.Input[str] | None:
        return None if value is None else self.real(value)

    def real_list(self, values: Sequence[str]) -> pulumi.Input[Sequence[pulumi.Input[str]]]:
        """A list whose elements may be stand-ins (an Output each), or one stand-in for a whole-list Output."""
        if len(values) == 1 and values[0] in self._lists:
            return self._lists[values[0]]
        return [self.real(v) for v in values]

    def real_text(self, text: str) -> pulumi.Input[str]:
        """``text`` (a rendered file) with every stand-in replaced by its resolved value."""
        if any(s in text for s in self._lists):
            raise ValueError(f"{self.component}: a rendered file names a list given as one Output; pass the list's elements")
        present = [s for s in self._outputs if s in text]
        if not present:
            return text

        def substitute(values: list[str]) -> str:
            result = text
            for stand_in, value in zip(present, values, strict=True):
                result = result.replace(stand_in, value)
            return result

        return pulumi.Output.all(*[self._outputs[s] for s in present]).apply(substitute)

    @property
    def deferred(self) -> bool:
        """Whether any field was an Output."""
        return bool(self._outputs or self._lists)


def _is_list_field(path: str, kind: str) -> bool:
    # A whole list given as one Output (``vpc.private_subnet_ids``): stands in as a one-element list.
    return path.endswith(".subnetIds") and kind == "subnet"


def _strip(hint: Any) -> Any:
    """``Required[X]`` / ``NotRequired[X]`` / ``pulumi.Input[X]`` → ``X`` (as far as needed to see the shape)."""
    while typing.get_origin(hint) is not None and getattr(typing.get_origin(hint), "__name__", "") in ("Required", "NotRequired"):
        hint = typing.get_args(hint)[0]
    return hint


def _checked(value: Any, kind: str, path: str) -> Any:
    values = value if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if not KINDS[kind].accepts(v):
            spec = KINDS[kind]
            raise ValueError(
                f"{path}: {v!r} is not a {spec.what}; pass the {spec.what} (e.g. {spec.example}) of the resource it names"
            )
    return value


# --- lists of ids that may be one Output ------------------------------------------------------------


def as_list(ids: pulumi.Input[Sequence[pulumi.Input[str]]]) -> pulumi.Input[Sequence[pulumi.Input[str]]]:
    """A list of ids as a list (as the stack has always passed it); an Output of a list as it is."""
    return list(ids) if isinstance(ids, (list, tuple)) else ids


def with_id(
    ids: pulumi.Input[Sequence[pulumi.Input[str]]], extra: pulumi.Input[str]
) -> pulumi.Input[Sequence[pulumi.Input[str]]]:
    """``ids`` and ``extra``: a plain list stays a list of Inputs; an Output of a list is joined when known."""
    if isinstance(ids, (list, tuple)):
        return [*ids, extra]
    return pulumi.Output.all(pulumi.Output.from_input(ids), extra).apply(lambda v: [*v[0], v[1]])
