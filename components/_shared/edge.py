"""The component edge: a program's Args in, the stack's config model out, and one error type for what is wrong.

Every component turns its Args into resolved values here, the same way, before any resource exists:

- :func:`config_part` takes the fields of the stack's config section out of the Args (the rest is wiring: ids of
  other resources, names, tags);
- :func:`required` names the wiring fields a program left out;
- :func:`validate` checks a plain dict with the stack's model (Outputs already stood in by
  :class:`~gpucluster.components._shared.inputs.Inputs`);
- :func:`renamed` turns a finding's path from the stack config's spelling (``gpucluster:slurm.headNode``) into the
  caller's Args spelling (``args.headNode``), with the component's own :data:`Renames`;
- :func:`at_edge` wraps the whole adapter: whatever it raises (a :class:`ConfigError` from a model or a check, a
  stand-in refused by :class:`Inputs`) leaves the component as one :class:`ArgsError`.

The adapter itself is spelt one way: the module that defines a component with config-shaped Args defines
``from_args(args) -> Adapted[Resolved, Wiring]``, and the constructor hands ``adapted.resolved`` and
``adapted.wiring`` to the family's builder, as the stack program hands its own resolved values and wiring.

:class:`ArgsError` is Pulumi's ``InputPropertiesError``: under the component provider (a TypeScript, Go or YAML
program) each finding reaches ``pulumi up`` as a property error with its path and reason; in a Python program it
stops the program with every finding listed; ``gpucluster plan`` reports it as an invalid config (exit 2).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pulumi
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel  # the config model's own alias rule

from gpucluster.config.errors import ConfigError, Finding, error, errors_in

Renames = Sequence[tuple[re.Pattern[str], str]]
"""Stack-config (or model) path → Args path, first match wins: ``(re.compile(r"^gpucluster:slurm\\.?"), "args.")``."""


R = TypeVar("R")
W = TypeVar("W")


@dataclass(frozen=True)
class Adapted(Generic[R, W]):
    """What a component's ``from_args`` returns: its Args, checked and resolved, split the way its builder takes them."""

    resolved: R
    """What the stack's model, checks and resolution decided from the Args' config fields (defaults filled in)."""
    wiring: W
    """What the program connects the component to and the builder places unjudged: ids and Outputs of other
    resources, names, tags, and the :class:`~gpucluster.components._shared.inputs.Inputs` that gives back the
    Outputs that stood in while the config was checked."""


class ArgsError(pulumi.InputPropertiesError):
    """A component's Args are invalid: every finding, each with the field path in the caller's spelling, the value
    and the fix. Raised before any resource exists."""

    def __init__(self, component: str, findings: Iterable[Finding]) -> None:
        self.component = component
        self.findings: list[Finding] = errors_in(findings) or list(findings)
        message = f"{component} args are invalid:\n" + "\n".join(f"  {f.render()}" for f in self.findings)
        super().__init__(
            message,
            [{"property_path": f.path, "reason": f"{f.message}. {f.fix}" if f.fix else f.message} for f in self.findings],
        )

    def __str__(self) -> str:
        return self.message


def args_path(path: str, renames: Renames) -> str:
    """The Args field a stack-config (or model) path is about; unchanged when no rename matches."""
    for pattern, replacement in renames:
        if pattern.match(path):
            return pattern.sub(replacement, path, count=1).rstrip(".") or "args"
    return path


def renamed(findings: Iterable[Finding], renames: Renames) -> list[Finding]:
    """``findings`` with their paths in the caller's Args spelling."""
    return [dataclasses.replace(f, path=args_path(f.path, renames)) for f in findings]


@contextmanager
def at_edge(component: str, renames: Renames = ()) -> Iterator[None]:
    """Run a component's Args adapter: any problem it raises leaves as one :class:`ArgsError` of ``component``."""
    try:
        yield
    except ArgsError as exc:
        raise ArgsError(component, renamed(exc.findings, renames)) from None
    except ConfigError as exc:
        raise ArgsError(component, renamed(exc.findings, renames)) from None


def config_part(args: Mapping[str, Any], args_type: type, config_type: type) -> dict[str, Any]:
    """The fields of ``args`` for the stack's config model: all but the wiring ``args_type`` adds to ``config_type``
    (the generated typed dict it extends). A key neither declares stays, so the model names a typo."""
    wiring = set(args_type.__annotations__) - set(config_type.__annotations__)
    return {k: v for k, v in args.items() if k not in wiring}


def required(
    args: Mapping[str, Any], fields: Mapping[str, str], why: str = "pass it (an Output of another resource is fine)"
) -> list[Finding]:
    """A finding for each of ``fields`` (snake_case → the Args spelling) that ``args`` lacks or leaves empty."""
    return [
        error(f"args.{camel}", "is required", why)
        for key, camel in fields.items()
        if args.get(key) is None or (isinstance(args.get(key), (list, tuple, dict, str)) and not args.get(key))
    ]


def validate(model: type[BaseModel], plain: Mapping[str, Any], source: str, path: str = "args") -> Any:
    """``model`` validated from ``plain`` (snake_case keys), a :class:`ConfigError` naming each bad field."""
    try:
        return model.model_validate(plain)
    except ValidationError as exc:
        findings = []
        for err in exc.errors():
            loc = ".".join(to_camel(str(p)) if isinstance(p, str) else f"[{p}]" for p in err["loc"]).replace(".[", "[")
            findings.append(error(f"{path}.{loc}" if loc else path, err["msg"], "see the field's description", err.get("input")))
        raise ConfigError(findings, source=source) from None
