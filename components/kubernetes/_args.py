"""The one path from ``EksClusterArgs`` / ``KubernetesPlatformArgs`` to a :class:`ResolvedKubernetes`
(:func:`resolve_section`, behind both components' ``from_args``):
Outputs in reference fields stand in, the Kubernetes section and the node groups are validated with the
stack's models, run through the stack's checks and resolved by the stack's resolution, so a component
used on its own gets exactly the stack's defaults. Every problem is raised before any resource, as one
``ArgsError`` (``components/_shared/edge.py``) naming ``args.<field>``. Also the wiring helper both paths share:
each node group's subnets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from gpucluster.components._shared.config_types import KubernetesConfig, NodeGroupConfig
from gpucluster.components._shared.edge import ArgsError, Renames, config_part, renamed, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.config.checks.cluster import validate_node_group
from gpucluster.config.checks.kubernetes import check_kubernetes
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.errors import ConfigError, Finding, error, errors_in
from gpucluster.config.kubernetes import KubernetesSpec
from gpucluster.config.network import NetworkSpec
from gpucluster.facts.catalog import Catalog
from gpucluster.resolve.cluster import resolve_group
from gpucluster.resolve.kubernetes import ResolvedKubernetes, resolve_kubernetes

# --- wiring: node-group subnets ---------------------------------------------------------------------

RENAMES: Renames = ((re.compile(r"^gpucluster:kubernetes"), "args"), (re.compile(r"^gpucluster:nodeGroups"), "args.nodeGroups"))


def resolve_section(
    component: str,
    args: Mapping[str, Any],
    catalog: Catalog,
    *,
    args_type: type,
    region: str,
    lustre: bool,
    instance_store_for_pods: bool = True,
) -> tuple[ResolvedKubernetes, Inputs]:
    """``args`` validated, checked and resolved like the stack's; the :class:`Inputs` gives Outputs back."""
    inputs = Inputs(component, region)
    try:
        # The Kubernetes section's fields and any key neither declares (the model names a typo); not the wiring.
        plain = inputs.prepare(config_part(args, args_type, KubernetesConfig), KubernetesConfig)
        groups_in: Sequence[Mapping[str, Any]] = args.get("node_groups", [])
        plain_groups = [inputs.prepare(g, NodeGroupConfig, f"args.nodeGroups[{i}]") for i, g in enumerate(groups_in)]
        spec: KubernetesSpec = validate(KubernetesSpec, plain, f"{component} args")
        groups: list[NodeGroupSpec] = [
            validate(NodeGroupSpec, {"scheduler": "kubernetes", **g}, f"{component} args", f"args.nodeGroups[{i}]")
            for i, g in enumerate(plain_groups)
        ]
    except ConfigError as exc:
        raise _input_error(component, exc.errors) from None
    findings: list[Finding] = []
    for i, group in enumerate(groups):
        findings.extend(validate_node_group(group, catalog, f"args.nodeGroups[{i}]"))
    context = ClusterSpec.model_construct(
        name=args["cluster_name"], region=region, network=NetworkSpec(), node_groups=tuple(groups), kubernetes=spec, tags={}
    )
    # The network is the caller's (subnets come as wiring): checks of the stack's own network do not apply.
    findings.extend(f for f in renamed(check_kubernetes(context, catalog), RENAMES) if f.path.startswith("args"))
    problems = errors_in(findings)
    if problems:
        raise _input_error(component, problems)
    resolved = resolve_kubernetes(
        spec,
        [resolve_group(g, catalog) for g in groups],
        catalog,
        cluster_name=args["cluster_name"],
        lustre=lustre,
        instance_store_for_pods=instance_store_for_pods,
    )
    return resolved, inputs


def _input_error(component: str, problems: Sequence[Finding]) -> ArgsError:
    return ArgsError(component, problems)


def node_group_subnets(
    resolved: ResolvedKubernetes, inputs: Inputs, given: Mapping[str, pulumi.Input[Sequence[pulumi.Input[str]]]]
) -> dict[str, pulumi.Input[Sequence[pulumi.Input[str]]]]:
    """Each node group's subnets: ``nodeGroupSubnetIds`` or else the group's own ``subnetIds``."""
    out: dict[str, pulumi.Input[Sequence[pulumi.Input[str]]]] = {}
    missing = []
    for i, group in enumerate(g.group for g in resolved.node_groups):
        if group.name in given:
            out[group.name] = given[group.name]
        elif group.subnet_ids:
            out[group.name] = inputs.real_list(group.subnet_ids)
        else:
            missing.append((i, group.name))
    if missing:
        raise ArgsError(
            "EksCluster",
            [
                error(
                    f"args.nodeGroupSubnetIds.{n}",
                    "is missing",
                    f"give node group {n!r} subnets here or in nodeGroups[{i}].subnetIds",
                )
                for i, n in missing
            ],
        )
    return out
