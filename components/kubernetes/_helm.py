"""One way to install a pinned Helm chart, for every component that installs one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

Chart = tuple[str, str, str]
"""``(repository, chart, version)``; an ``oci://`` repository is part of the chart reference."""


def helm_release(
    resource_name: str,
    release: str,
    chart: Chart,
    namespace: str,
    parent: pulumi.Resource,
    values: Mapping[str, Any] | None = None,
    create_namespace: bool = True,
    provider: pulumi.ProviderResource | None = None,
    depends_on: list[pulumi.Resource] | None = None,
) -> k8s.helm.v3.Release:
    """The release ``release`` of ``chart`` in ``namespace``, a child of ``parent`` (which carries the provider, or
    ``provider`` where the parent is not a Kubernetes component)."""
    repo, name, version = chart
    oci = repo.startswith("oci://")
    return k8s.helm.v3.Release(
        resource_name,
        k8s.helm.v3.ReleaseArgs(
            name=release,
            chart=f"{repo}/{name}" if oci else name,
            version=version,
            repository_opts=None if oci else k8s.helm.v3.RepositoryOptsArgs(repo=repo),
            namespace=namespace,
            create_namespace=create_namespace,
            values=dict(values) if values else None,
        ),
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on),
    )
