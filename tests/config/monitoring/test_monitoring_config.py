"""``gpucluster:monitoring``: its checks name the field, the value and the fix (its resolution and cost:
tests/resolve/monitoring/)."""

from __future__ import annotations

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.load import load_spec
from tests.conftest import TWO_ZONES, group, make_config

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def slurm_cluster(**monitoring):
    return make_config(
        group(desiredSize=2, maxSize=4), slurm={"nodeGroups": [{"name": "gpu", "mode": "static"}]}, monitoring=monitoring
    )


def eks_config(**monitoring):
    return make_config(group(maxSize=2), network=TWO_ZONES, kubernetes={}, monitoring=monitoring)


def refused(config, path: str, fragment: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_spec(config, stack="m")
    found = [f for f in caught.value.errors if f.path == path]
    assert found, [(f.path, f.message) for f in caught.value.errors]
    assert any(fragment in f.message for f in found), [f.message for f in found]
    assert all(f.fix for f in found)
    return str(caught.value)


@pytest.mark.parametrize(
    ("monitoring", "path", "fragment"),
    [
        ({"logRetentionDays": 100}, "gpucluster:monitoring.logRetentionDays", "100 days is not a retention CloudWatch Logs"),
        ({"logRetentionDays": 0}, "gpucluster:monitoring.logRetentionDays", "0 days is not a retention"),
        ({"scrapeIntervalSeconds": 5}, "gpucluster:monitoring.scrapeIntervalSeconds", "10"),
        ({"alarmEmails": ["oncall"]}, "gpucluster:monitoring.alarmEmails", "'oncall' is not an e-mail address"),
        ({"alarmEmails": ["a@example.com", "a@example.com"]}, "gpucluster:monitoring.alarmEmails", "listed twice"),
        (
            {"subscriptions": [{"protocol": "https", "endpoint": "http://hooks.example.com/x"}]},
            "gpucluster:monitoring.subscriptions[0]",
            "is not an https:// URL",
        ),
        (
            {"subscriptions": [{"protocol": "http", "endpoint": "http://hooks.example.com/x"}]},
            "gpucluster:monitoring.subscriptions[0].protocol",
            "",
        ),
        (
            {"subscriptions": [{"protocol": "sms", "endpoint": "555-0100"}]},
            "gpucluster:monitoring.subscriptions[0]",
            "E.164",
        ),
        ({"kmsKeyArn": "alias/monitoring"}, "gpucluster:monitoring.kmsKeyArn", "is not a key ARN"),
        ({"kmsKeyArn": KEY.replace("us-east-1", "eu-west-1")}, "gpucluster:monitoring.kmsKeyArn", "eu-west-1"),
        ({"enabled": False, "grafana": {"enabled": True}}, "gpucluster:monitoring.grafana.enabled", "monitoring is off"),
        ({"grafana": {"authentication": "LDAP"}}, "gpucluster:monitoring.grafana.authentication", ""),
    ],
)
def test_bad_monitoring_is_refused_naming_the_field(monitoring, path, fragment):
    refused(slurm_cluster(**monitoring), path, fragment)
