"""The update-safety entries of a cluster's day-two parts, merged into :data:`gpucluster.tools.plan.diff.safety.TABLE`:
monitoring (``components/monitoring/``, its Grafana resources too), baked images (``components/images/``) and the spot
warnings queue (``components/slurm/_spot_events.py``).

Sources are terraform-provider-aws' force-new schema fields (which pulumi-aws bridges), as for the rest of the table.
Image Builder components, recipes and images are immutable: a change to what they are is a new one. A new image is a
new AMI for the launch templates (a ``template`` disruption: the agent rolls nodes onto it, docs/rolling-updates.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucluster.tools.plan.diff.safety.types import TF, Safety

GRAFANA = "https://github.com/grafana/terraform-provider-grafana/blob/main/internal/resources/grafana/"


def _tf(path: str) -> str:
    return TF + path


DAY2_TABLE: Mapping[str, Safety] = {
    # --- monitoring -----------------------------------------------------------------------------------
    "aws:amp/workspace:Workspace": Safety(
        _tf("amp/workspace.go"),
        replace_on=("kmsKeyArn",),
        holds_data="the metrics stored in the workspace (a new one starts empty)",
    ),
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": Safety(
        _tf("amp/rule_group_namespace.go"), replace_on=("name", "workspaceId")
    ),
    "aws:amp/alertManagerDefinition:AlertManagerDefinition": Safety(
        _tf("amp/alert_manager_definition.go"), replace_on=("workspaceId",)
    ),
    "aws:amp/scraper:Scraper": Safety(_tf("amp/scraper.go"), replace_on=("source",)),
    # The EKS nodes' Fluent Bit: UpdatePodIdentityAssociation changes the role, not what the association binds.
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": Safety(
        _tf("eks/pod_identity_association.go"), replace_on=("clusterName", "namespace", "serviceAccount")
    ),
    # A service account and its token cannot be updated: any change makes a new one (the provider's docs say so).
    "aws:grafana/workspaceServiceAccount:WorkspaceServiceAccount": Safety(
        _tf("grafana/workspace_service_account.go"), replace_on=("name", "grafanaRole", "workspaceId")
    ),
    "aws:grafana/workspaceServiceAccountToken:WorkspaceServiceAccountToken": Safety(
        _tf("grafana/workspace_service_account_token.go"),
        replace_on=("name", "secondsToLive", "serviceAccountId", "workspaceId"),
    ),
    # Inside Grafana (terraform-provider-grafana, which pulumiverse-grafana bridges): what a replacement loses is
    # what people changed by hand in Grafana; the stack renders the rest again.
    "grafana:oss/dashboard:Dashboard": Safety(
        GRAFANA + "resource_dashboard.go",
        replace_on=("orgId",),
        holds_data="edits made in Grafana since the last deploy, and the dashboard's version history",
    ),
    "grafana:oss/folder:Folder": Safety(
        GRAFANA + "resource_folder.go",
        replace_on=("orgId",),
        holds_data="dashboards people saved into it (preventDestroyIfNotEmpty: the delete fails while any is there)",
    ),
    "grafana:oss/dataSource:DataSource": Safety(GRAFANA + "resource_data_source.go", replace_on=("orgId",)),
    "aws:cloudwatch/metricAlarm:MetricAlarm": Safety(_tf("cloudwatch/metric_alarm.go"), replace_on=("name",)),
    "aws:sns/topic:Topic": Safety(_tf("sns/topic.go"), replace_on=("name", "namePrefix", "fifoTopic")),
    "aws:sns/topicPolicy:TopicPolicy": Safety(_tf("sns/topic_policy.go"), replace_on=("arn",)),
    "aws:sns/topicSubscription:TopicSubscription": Safety(
        _tf("sns/topic_subscription.go"), replace_on=("topic", "protocol", "endpoint")
    ),
    # --- baked images ---------------------------------------------------------------------------------
    "aws:imagebuilder/component:Component": Safety(
        _tf("imagebuilder/component.go"),
        replace_on=(
            "name",
            "version",
            "platform",
            "data",
            "uri",
            "kmsKeyId",
            "description",
            "changeDescription",
            "supportedOsVersions",
        ),
    ),
    "aws:imagebuilder/imageRecipe:ImageRecipe": Safety(
        _tf("imagebuilder/image_recipe.go"),
        replace_on=(
            "name",
            "version",
            "parentImage",
            "components",
            "blockDeviceMappings",
            "workingDirectory",
            "description",
            "systemsManagerAgent",
            "userDataBase64",
        ),
    ),
    "aws:imagebuilder/image:Image": Safety(
        _tf("imagebuilder/image.go"),
        replace_on=(
            "imageRecipeArn",
            "infrastructureConfigurationArn",
            "distributionConfigurationArn",
            "imageTestsConfiguration",
            "enhancedImageMetadataEnabled",
            "containerRecipeArn",
            "workflows",
            "executionRole",
        ),
        disruption="template",
    ),
    "aws:imagebuilder/distributionConfiguration:DistributionConfiguration": Safety(
        _tf("imagebuilder/distribution_configuration.go"), replace_on=("name",)
    ),
    "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration": Safety(
        _tf("imagebuilder/infrastructure_configuration.go"), replace_on=("name",)
    ),
    # --- spot and capacity-block warnings --------------------------------------------------------------
    "aws:sqs/queue:Queue": Safety(
        _tf("sqs/queue.go"),
        replace_on=("name", "namePrefix", "fifoQueue"),
        holds_data="the warnings waiting in the queue (the agent has not acted on them yet)",
    ),
    "aws:sqs/queuePolicy:QueuePolicy": Safety(_tf("sqs/queue_policy.go"), replace_on=("queueUrl",)),
    "aws:cloudwatch/eventRule:EventRule": Safety(_tf("events/rule.go"), replace_on=("name", "namePrefix", "eventBusName")),
    "aws:cloudwatch/eventTarget:EventTarget": Safety(_tf("events/target.go"), replace_on=("rule", "targetId", "eventBusName")),
}
