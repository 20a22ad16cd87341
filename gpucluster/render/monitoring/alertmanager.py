"""The Alertmanager definition of an AMP workspace (``aws.amp.AlertManagerDefinition(definition=…)``).

AMP's format (Amazon Managed Service for Prometheus user guide, "Create an alert manager configuration"): a YAML
document with ``template_files`` (name → Go template text) and ``alertmanager_config`` (standalone
Alertmanager's configuration, as a string). AMP's only receiver is SNS; its ``sns_configs`` must not set
``api_url`` or ``http_config`` and its ``sigv4`` must name the region. SNS replaces a subject that has control
characters and truncates one over 100 characters, so the subject is one short line.

Routing: one receiver (the cluster's SNS topic); alerts grouped by cluster and alert name; criticals repeat
every hour, warnings every 4 hours (AMP caps ``repeat_interval`` at 5 days). A critical alert on a GPU inhibits
that GPU's warnings (a GPU at 86 °C is not also "hot"; a GPU being replaced is not also "throttling").
"""

from __future__ import annotations

import re
from typing import Any

from gpucluster.render.core import to_yaml

RECEIVER = "sns"
TEMPLATE_NAME = "gpucluster"
GROUP_BY = ("cluster", "alertname")
_ARN_RE = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}")
_REGION_RE = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")

# Go templates (Alertmanager's template language). The subject stays ASCII and one line.
TEMPLATE = """{{ define "gpucluster.subject" }}[{{ .Status | toUpper }}] {{ .CommonLabels.cluster }}: \
{{ .CommonLabels.alertname }} ({{ .Alerts | len }}){{ end }}
{{ define "gpucluster.message" }}{{ range .Alerts }}{{ .Labels.severity | toUpper }} {{ .Labels.alertname }}: \
{{ .Annotations.summary }}
What to do: {{ .Annotations.runbook }}
Started: {{ .StartsAt }}{{ if eq .Status "resolved" }}, resolved: {{ .EndsAt }}{{ end }}

{{ end }}{{ end }}
"""


def alertmanager_config(receiver: dict[str, Any]) -> dict[str, Any]:
    """The routing tree, inhibition and templates around ``receiver`` (the test swaps in a webhook receiver
    with the same name, so the tree it runs is this one)."""
    return {
        "templates": [TEMPLATE_NAME],
        "route": {
            "receiver": RECEIVER,
            "group_by": list(GROUP_BY),
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [{"receiver": RECEIVER, "matchers": ['severity="critical"'], "repeat_interval": "1h"}],
        },
        "inhibit_rules": [
            {
                # UUID: the one GPU label both exporters set that names a GPU on its own (Hostname is being
                # renamed upstream; ``gpu`` is only an index)
                "source_matchers": ['severity="critical"', 'UUID=~".+"'],
                "target_matchers": ['severity="warning"', 'UUID=~".+"'],
                "equal": ["cluster", "UUID"],
            }
        ],
        "receivers": [receiver],
    }


def sns_receiver(sns_topic_arn: str, region: str) -> dict[str, Any]:
    if not _ARN_RE.fullmatch(sns_topic_arn):
        raise ValueError(f"sns_topic_arn {sns_topic_arn!r} is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)")
    if not _REGION_RE.fullmatch(region):
        raise ValueError(f"region {region!r} is not an AWS region name (e.g. us-east-1)")
    return {
        "name": RECEIVER,
        "sns_configs": [
            {
                "topic_arn": sns_topic_arn,
                "sigv4": {"region": region},
                "subject": '{{ template "gpucluster.subject" . }}',
                "message": '{{ template "gpucluster.message" . }}',
                "attributes": {"cluster": "{{ .CommonLabels.cluster }}", "severity": "{{ .CommonLabels.severity }}"},
            }
        ],
    }


def alertmanager_definition(sns_topic_arn: str, region: str) -> str:
    """AMP's alert manager definition: every alert to ``sns_topic_arn`` (an SNS topic in ``region``)."""
    config = to_yaml(alertmanager_config(sns_receiver(sns_topic_arn, region))) + "\n"
    return to_yaml({"template_files": {TEMPLATE_NAME: TEMPLATE}, "alertmanager_config": config}) + "\n"
