"""Findings and the configuration error.

A *finding* is what every validator returns: a level, the config path it is about (as the user wrote
it, e.g. ``gpucluster:nodeGroups[0].instanceType``), what is wrong and how to fix it. A
:class:`ConfigError` carries every error-level finding of a config at once, so the user fixes them all
in one round instead of one per ``pulumi up``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Level(str, enum.Enum):
    """How bad a finding is. Errors stop the program before any resource exists."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    """One validation result.

    ``path`` names the config field; ``value`` is the offending value as the user wrote it (or ``None``
    when the problem is a missing field); ``fix`` says what would be valid.
    """

    level: Level
    path: str
    message: str
    fix: str = ""
    value: object = None
    code: str = ""

    def render(self) -> str:
        text = f"{self.path}: {self.message}"
        if self.value is not None and repr(self.value) not in self.message:
            text += f" (got {self.value!r})"
        if self.fix:
            text += f" Fix: {self.fix}"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "level": self.level.value,
            "code": self.code,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
            "value": self.value if _jsonable(self.value) else repr(self.value),
        }


def _jsonable(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


def error(path: str, message: str, fix: str = "", value: object = None, code: str = "") -> Finding:
    return Finding(Level.ERROR, path, message, fix, value, code)


def warning(path: str, message: str, fix: str = "", value: object = None, code: str = "") -> Finding:
    return Finding(Level.WARNING, path, message, fix, value, code)


def info(path: str, message: str, fix: str = "", value: object = None, code: str = "") -> Finding:
    return Finding(Level.INFO, path, message, fix, value, code)


def group_path(index: int, field: str = "") -> str:
    """The config path of node group ``index`` (and its ``field``), as findings name it."""
    return f"gpucluster:nodeGroups[{index}]" + (f".{field}" if field else "")


def errors_in(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.level is Level.ERROR]


class ConfigError(Exception):
    """The stack config is invalid. ``findings`` holds every problem; ``str()`` lists them all."""

    def __init__(self, findings: Iterable[Finding], source: str = "stack config") -> None:
        self.findings = list(findings)
        self.source = source
        super().__init__(self._format())

    @property
    def errors(self) -> list[Finding]:
        return errors_in(self.findings)

    def _format(self) -> str:
        errs = self.errors
        noun = "problem" if len(errs) == 1 else "problems"
        lines = [f"{self.source} is invalid: {len(errs)} {noun}, nothing was created."]
        lines += [f"  - {f.render()}" for f in errs]
        return "\n".join(lines)


def raise_for(findings: Iterable[Finding], source: str = "stack config") -> list[Finding]:
    """Raise :class:`ConfigError` when any finding is an error; otherwise return them all."""
    found = list(findings)
    if errors_in(found):
        raise ConfigError(found, source)
    return found
