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

from gpucluster_agents.contract.grammar import NAME_HINT, NAME_RE


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
        raise ValueError(f"{what} {value!r} is not a valid name: use {NAME_HINT}")
    return value


# --- text that reaches shell scripts, env files, fstab, YAML -------------------------------------------------

# C0 controls (NUL, tab, newline, CR, ESC…), DEL, C1 controls (U+0085 NEL…) and the Unicode line and
# paragraph separators (YAML and some editors break lines at U+2028/U+2029). No config value needs one,
# and each can end a line in a file a node reads.
CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

# A validator's ValueError may end with FIX_MARK and how to fix the value; the loader makes that the
# finding's ``fix``.
FIX_MARK = " Fix: "

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Kubernetes qualified names (label keys): an optional DNS-subdomain prefix (≤ 253) and '/', then a
# name of ≤ 63 alphanumerics, '-', '_', '.', beginning and ending alphanumeric. Label values: the same
# name grammar, or empty. Source: Kubernetes docs, "Labels and Selectors" (syntax and character set);
# apimachinery validation IsQualifiedName / IsValidLabelValue.
_K8S_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
K8S_NAME_RE = re.compile(rf"^{_K8S_NAME}$")
DNS_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")

# mount(8) options: comma-separated ``name`` or ``name=value``; no blanks (fstab splits fields on them).
MOUNT_OPTION_RE = re.compile(r"^[A-Za-z0-9_.+-]+(=[A-Za-z0-9_.,:/+@-]*)?$")

# Container image references, as the distribution reference grammar defines them
# (github.com/distribution/reference, reference.go): [host[:port]/]path[:tag][@digest].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?)"
_PATH_COMPONENT = r"(?:[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*)"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_RE = re.compile(rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$")
IMAGE_NAME_MAX = 255


PEM_KEYS = frozenset({"caCertificatePem", "ca_certificate_pem", "caCertificate", "ca_certificate"})
"""Config keys whose value is a PEM document, lines by definition: newlines pass there (no other control character),
and the field's validator admits only base64 lines between the BEGIN/END markers
(:class:`gpucluster.config.hybrid.access.CredentialsSpec`; ``slurm.identity.directory.caCertificate``: the
``ca-invalid`` check of :mod:`gpucluster.config.checks.slurm.identity`)."""


def control_character(value: str, key: str = "") -> str | None:
    """A description of the first control character in ``value`` (``U+000A at position 4``), or None. ``key`` is the
    config key holding the value: under one of :data:`PEM_KEYS` a newline is not counted."""
    for match in CONTROL_RE.finditer(value):
        if match.group() == "\n" and key in PEM_KEYS:
            continue
        return f"U+{ord(match.group()):04X} at position {match.start()}"
    return None


def check_env_names(env: dict[str, str], what: str) -> dict[str, str]:
    """Environment variable names, as shells and env files take them: ``^[A-Za-z_][A-Za-z0-9_]*$``."""
    for key in env:
        if not ENV_NAME_RE.fullmatch(key):
            raise ValueError(
                f"{what} name {key!r} is not an environment variable name (shells and env files would run or "
                f"drop it).{FIX_MARK}use letters, digits and '_', not starting with a digit (e.g. NCCL_DEBUG)"
            )
    return env


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label key (qualified name), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return "its prefix must be a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253) before the '/'"
    if not name or len(name) > 63 or not K8S_NAME_RE.fullmatch(name):
        return "the name must be 1-63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
    return None


def check_label_key(key: str, what: str) -> str:
    problem = label_key_problem(key)
    if problem:
        raise ValueError(
            f"{what} {key!r} is not a Kubernetes label key: {problem}.{FIX_MARK}use [prefix/]name, e.g. example.com/workload"
        )
    return key


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """Kubernetes node labels: qualified-name keys, values of ≤ 63 name characters or empty."""
    for key, value in labels.items():
        check_label_key(key, "label key")
        if value and (len(value) > 63 or not K8S_NAME_RE.fullmatch(value)):
            raise ValueError(
                f"label {key!r} has value {value!r}, which is not a Kubernetes label value.{FIX_MARK}use at most 63 "
                "letters, digits, '-', '_' or '.', beginning and ending with a letter or digit (or leave it empty)"
            )
    return labels


def check_image(value: str) -> str:
    """A container image reference: ``[registry[:port]/]repository[:tag][@digest]``."""
    head, _, last = value.split("@", 1)[0].rpartition("/")
    name = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]  # without tag and digest
    if not IMAGE_RE.fullmatch(value) or len(name) > IMAGE_NAME_MAX:
        raise ValueError(
            f"{value!r} is not a container image reference.{FIX_MARK}write [registry[:port]/]repository[:tag]"
            "[@sha256:digest], the repository in lowercase, with no spaces or '#' (e.g. public.ecr.aws/org/image:1.0)"
        )
    return value
