"""What a policy rule reads and what it returns, independent of who asks.

The same rule functions run in two places: the Pulumi policy pack (``policy/``), where the engine hands
over a resource's inputs with preview-time unknowns in them, and ``gpucluster policy``, which reads
the offline plan JSON. Both turn their resources into :class:`Resource` first, so a rule never knows
which one called it. A value that is not known yet (an output of a resource still to be created) is
:data:`UNKNOWN`; a rule treats it as "cannot tell" and reports nothing for it, so a preview is never
refused for what only ``pulumi up`` will decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    """The one value standing for "known only after ``pulumi up``" (a preview-time unknown)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        raise TypeError("an unknown value has no truth value: compare it with `is UNKNOWN` first")


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class Resource:
    """One resource as the rules see it.

    ``props`` are the inputs (the pack's resource validations, the plan JSON) or the outputs known so
    far (the pack's stack validations), camelCase as Pulumi names them. ``retain_on_delete`` is
    ``None`` where the caller cannot see it (Pulumi hands policy packs ``protect`` but not
    ``retainOnDelete``). ``property_dependencies`` maps a property to the URNs of the resources its value
    came from: how a stack rule links a flow log to its VPC before either has an id.
    """

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    protect: bool = False
    retain_on_delete: bool | None = None
    id: Any = None
    property_dependencies: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def get(self, *path: str | int) -> Any:
        """The value at ``path`` (keys and list indexes), ``None`` where any step is missing,
        :data:`UNKNOWN` where a step is unknown."""
        return dig(self.props, *path)

    def refers_to(self, prop: str, target: Resource, *target_props: str) -> bool | None:
        """Whether this resource's ``prop`` names ``target``: through a property dependency, or by
        value (``target``'s id or one of ``target_props``). ``None`` when it cannot be told yet."""
        deps = self.property_dependencies.get(prop) or ()
        if target.urn in deps:
            return True
        value = self.get(prop)
        if value is UNKNOWN:
            # Known to come from other resources only, or not known at all before `pulumi up`.
            return False if deps else None
        if value is None:
            return False
        names = [target.id, *(target.get(p) for p in target_props)]
        return any(n is not UNKNOWN and n is not None and n == value for n in names)


def dig(value: Any, *path: str | int) -> Any:
    for step in path:
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(value, Sequence) or isinstance(value, str) or step >= len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, Mapping):
                return None
            value = value.get(step)
    return value


def items(value: Any) -> list[Any]:
    """A list property as a list: ``None`` and unknowns as no items, one object as a list of one
    (some pulumi-aws properties are a single block or a list of them)."""
    if value is None or value is UNKNOWN:
        return []
    if isinstance(value, Mapping) or isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return list(value)
    return [value]


@dataclass(frozen=True)
class Violation:
    """One broken rule: which rule, which resource, which property, what is wrong and the fix."""

    rule: str
    urn: str
    type: str
    name: str
    property: str
    message: str
    fix: str

    def render(self) -> str:
        return f'{self.type} "{self.name}" {self.property}: {self.message}. Fix: {self.fix}'

    def to_json(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "property": self.property,
            "message": self.message,
            "fix": self.fix,
        }


def violation(rule: str, r: Resource, prop: str, message: str, fix: str) -> Violation:
    return Violation(rule=rule, urn=r.urn, type=r.type, name=r.name, property=prop, message=message, fix=fix)


def truthy(value: Any) -> bool | None:
    """A boolean property as the provider reads it (launch templates carry ``"true"`` as a string);
    ``None`` when unknown or unset."""
    if value is UNKNOWN or value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)
