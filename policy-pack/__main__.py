"""gpucluster's Pulumi policy pack: the rules of :mod:`gpucluster.policy` as mandatory policies.

Pulumi runs this file when a preview or an update names the pack (``pulumi preview --policy-pack
policy-pack``); it hands each resource's inputs to the resource policies, and every resource of the stack
to the stack policies. Both become :class:`~gpucluster.policy.model.Resource`, with Pulumi's
preview-time unknowns as :data:`~gpucluster.policy.model.UNKNOWN`, and go to the same rule functions
``gpucluster policy`` runs over the offline plan. The pack reads the rules of the checkout it sits in,
so a preview checks a stack against the rules of the same commit.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import gpucluster.policy  # noqa: F401 - installed (the project's own virtualenv)
except ImportError:  # the pack's virtualenv (policy-pack/venv) holds only pulumi-policy: use this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyPack,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
)
from pulumi_policy.secret import Secret

from gpucluster.policy.evaluate import RULES, Rule
from gpucluster.policy.model import UNKNOWN, Resource, Violation

PACK_NAME = "gpucluster"
_SENTINELS = frozenset(
    (
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_OBJECT_VALUE,
        UNKNOWN_STRING_VALUE,
    )
)


def _target(container: Any) -> Any:
    """What pulumi-policy's proxy wraps (reading it through the proxy raises on an unknown)."""
    try:
        return container["__target"]
    except (KeyError, IndexError, TypeError):
        return container


def plain(value: Any) -> Any:
    """Plain dicts and lists with :data:`UNKNOWN` where Pulumi does not know a value yet."""
    if isinstance(value, Secret):
        value = value.value
    if isinstance(value, str):
        return UNKNOWN if value in _SENTINELS else value
    if isinstance(value, Mapping):
        raw = _target(value)
        return {str(k): plain(raw[k]) for k in raw}
    if isinstance(value, Sequence):
        return [plain(v) for v in _target(value)]
    return value


def from_args(args: ResourceValidationArgs) -> Resource:
    return Resource(
        type=args.resource_type,
        name=args.name,
        urn=args.urn,
        props=plain(args.props),
        protect=bool(args.opts.protect),
    )


def from_policy_resource(r: PolicyResource) -> Resource:
    props = plain(r.props)
    return Resource(
        type=r.resource_type,
        name=r.name,
        urn=r.urn,
        props=props,
        protect=bool(r.opts.protect),
        id=props.get("id"),
        property_dependencies={k: [d.urn for d in deps] for k, deps in r.property_dependencies.items()},
    )


def _report(found: list[Violation], report: ReportViolation) -> None:
    for v in found:
        report(f"{v.property}: {v.message}. Fix: {v.fix}", v.urn)


def policy(rule: Rule) -> Policy:
    """One mandatory Pulumi policy calling ``rule``'s check."""
    if rule.stack:

        def validate_stack(args: StackValidationArgs, report: ReportViolation) -> None:
            _report(rule.check([from_policy_resource(r) for r in args.resources]), report)

        return StackValidationPolicy(
            name=rule.name,
            description=rule.description,
            validate=validate_stack,
            enforcement_level=EnforcementLevel.MANDATORY,
        )

    def validate_resource(args: ResourceValidationArgs, report: ReportViolation) -> None:
        _report(rule.check(from_args(args)), report)

    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate_resource,
        enforcement_level=EnforcementLevel.MANDATORY,
    )


def policies() -> list[Policy]:
    return [policy(rule) for rule in RULES]


if __name__ == "__main__":  # Pulumi runs the pack; PolicyPack serves it over gRPC until Pulumi stops it
    PolicyPack(name=PACK_NAME, policies=policies(), enforcement_level=EnforcementLevel.MANDATORY)
