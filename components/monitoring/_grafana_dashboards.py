"""The dashboards inside the cluster's Managed Grafana workspace (``monitoring.grafana.provisionDashboards``).

A Grafana service account (role ADMIN: creating a data source needs it) and a token for it, made through the AWS API
(``aws.grafana.WorkspaceServiceAccount`` / ``WorkspaceServiceAccountToken``); an explicit Grafana provider with the
workspace's URL and that token; the AMP data source (uid ``gpucluster-amp``, SigV4 with the workspace's role); a
folder ``gpucluster``; one dashboard per provisioned render (:mod:`gpucluster.render.monitoring.provision`).

The token is a secret in the stack's state, lives 30 days, and is made anew whenever what it provisions changes:
its name carries a digest of the data source and the dashboards, so the token is replaced before they are updated
(docs/dashboards.md says how to renew it by hand for a ``pulumi refresh`` after it expired).
"""

from __future__ import annotations

import hashlib

import pulumi
import pulumi_aws as aws
import pulumiverse_grafana as grafana

from gpucluster.render.monitoring.provision import (
    AMP_DATASOURCE_NAME,
    AMP_DATASOURCE_UID,
    FOLDER_UID,
    TOKEN_SECONDS,
    amp_datasource_json,
    dashboard_url,
    provisioned_dashboards,
)
from gpucluster.render.monitoring.rules import cluster_schedulers
from gpucluster.resolve.cluster import ResolvedCluster


def grafana_dashboards(
    parent: pulumi.Resource,
    name: str,
    cluster: ResolvedCluster,
    workspace: aws.grafana.Workspace,
    prometheus_endpoint: pulumi.Input[str],
) -> pulumi.Output[list[str]]:
    """The service account, its token, the provider, the data source, the folder and the dashboards; the dashboards'
    URLs (``https://<workspace endpoint>/d/<uid>``)."""
    child = pulumi.ResourceOptions(parent=parent)
    boards = provisioned_dashboards(cluster_schedulers(cluster))
    datasource_json = amp_datasource_json(cluster.region)
    digest = hashlib.sha256("\n".join([datasource_json, *boards.values()]).encode()).hexdigest()[:10]
    account = aws.grafana.WorkspaceServiceAccount(
        f"{name}-grafana-provisioner",
        name=f"{cluster.name}-provisioner",
        grafana_role="ADMIN",
        workspace_id=workspace.id,
        opts=child,
    )
    token = aws.grafana.WorkspaceServiceAccountToken(
        f"{name}-grafana-token",
        name=f"{cluster.name}-provisioner-{digest}",
        service_account_id=account.service_account_id,
        seconds_to_live=TOKEN_SECONDS,
        workspace_id=workspace.id,
        opts=child,
    )
    provider = grafana.Provider(
        f"{name}-grafana-api",
        url=workspace.endpoint.apply(lambda host: f"https://{host}"),
        auth=token.key,
        opts=child,
    )
    on_grafana = pulumi.ResourceOptions(parent=parent, provider=provider)
    datasource = grafana.oss.DataSource(
        f"{name}-grafana-amp",
        name=AMP_DATASOURCE_NAME,
        uid=AMP_DATASOURCE_UID,
        type="prometheus",
        url=prometheus_endpoint,
        access_mode="proxy",
        is_default=True,
        json_data_encoded=datasource_json,
        opts=on_grafana,
    )
    # Grafana deletes a folder's dashboards with it: one people saved there keeps the folder (the delete fails).
    folder = grafana.oss.Folder(
        f"{name}-grafana-folder",
        title=f"gpucluster {cluster.name}",
        uid=FOLDER_UID,
        prevent_destroy_if_not_empty=True,
        opts=on_grafana,
    )
    for uid, config in boards.items():
        grafana.oss.Dashboard(
            f"{name}-{uid}",
            config_json=config,
            folder=folder.uid,
            message="gpucluster: rendered by the stack; edits made in Grafana are replaced on the next change",
            opts=pulumi.ResourceOptions.merge(on_grafana, pulumi.ResourceOptions(depends_on=[datasource])),
        )
    return workspace.endpoint.apply(lambda host: [dashboard_url(host, uid) for uid in boards])
