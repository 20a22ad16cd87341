"""``gpucluster:monitoring``: where the fleet's metrics, logs and alerts go.

On by default for a cluster with Slurm or EKS: an Amazon Managed Service for Prometheus (AMP) workspace with the
alert rules and an Alertmanager that publishes to an SNS topic, the collection (an AMP managed scraper on EKS;
Prometheus in agent mode on the Slurm head node), CloudWatch log groups the nodes ship their logs to, and
optionally an Amazon Managed Grafana workspace. ``enabled: false`` creates none of it.

Defaults and why:

- scrape every 30 s: HyperPod's observability add-on uses 30 s; GPU faults (XIDs, ECC, row remaps) are counters
  that a slower scrape still catches, and AMP bills per sample, so 15 s would double the bill for little.
- logs kept 180 days: AWS ParallelCluster's default (``Monitoring.Logs.CloudWatch.RetentionInDays``), long enough
  to look back over a training run and its incidents; CloudWatch Logs accepts only its fixed list of values.
- no Grafana workspace unless asked: Amazon Managed Grafana needs IAM Identity Center (or a SAML IdP) set up in the
  account, which a stack cannot assume; the dashboards are shipped as files otherwise.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpucluster.config.base import FIX_MARK, SpecModel

RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
"""The values CloudWatch Logs' PutRetentionPolicy accepts (``0``, "never expire", is refused here: logs are kept
for a stated time, policy rule ``log-groups-retained``)."""

EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
E164 = re.compile(r"\+[1-9]\d{6,14}")

Protocol = Literal["email", "email-json", "https", "sms", "sqs", "lambda"]
"""SNS protocols a subscription may use; plain ``http`` is refused (alerts would cross the network unencrypted)."""

_ENDPOINT_SHAPES: dict[str, tuple[re.Pattern[str], str]] = {
    "email": (EMAIL, "an e-mail address, e.g. oncall@example.com"),
    "email-json": (EMAIL, "an e-mail address, e.g. oncall@example.com"),
    "https": (re.compile(r"https://[^\s/]+(/\S*)?"), "an https:// URL"),
    "sms": (E164, "a phone number in E.164 form, e.g. +14155550100"),
    "sqs": (re.compile(r"arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[\w-]{1,80}(\.fifo)?"), "an SQS queue ARN"),
    "lambda": (re.compile(r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[\w-]{1,64}(:[\w$-]+)?"), "a Lambda function ARN"),
}


class SubscriptionSpec(SpecModel):
    """One subscriber of the alert topic: an SNS protocol and its endpoint."""

    protocol: Protocol
    """``email``, ``email-json``, ``https``, ``sms``, ``sqs`` or ``lambda`` (no plain ``http``). Required."""

    endpoint: str = Field(min_length=1, max_length=2048)
    """Where SNS delivers: an e-mail address, an https:// URL, an E.164 phone number or an SQS queue / Lambda
    function ARN, as the protocol needs. Required."""

    @model_validator(mode="after")
    def _endpoint_fits(self) -> SubscriptionSpec:
        shape, what = _ENDPOINT_SHAPES[self.protocol]
        if not shape.fullmatch(self.endpoint):
            raise ValueError(
                f"endpoint {self.endpoint!r} is not {what}, which protocol {self.protocol!r} needs"
                f"{FIX_MARK}give {what}, or the protocol that matches the endpoint"
            )
        return self


class GrafanaSpec(SpecModel):
    """An Amazon Managed Grafana workspace reading the AMP workspace and CloudWatch, with the dashboards."""

    enabled: bool = False
    """Create the workspace. Default false: Amazon Managed Grafana needs IAM Identity Center (``AWS_SSO``) or a SAML
    identity provider in the account; without a workspace ``gpucluster dashboards --out DIR`` writes the dashboards
    as JSON files to import into any Grafana."""

    provision_dashboards: bool = True
    """Put the AMP data source and the dashboards into the workspace (a Grafana service account, its token, a folder,
    one dashboard each). Default true. The workspace admits only its VPC endpoint, so ``pulumi up`` must reach the
    workspace from inside the cluster's VPC (a runner there, a VPN); ``false`` leaves the workspace empty, to import
    the files by hand."""

    authentication: Literal["AWS_SSO", "SAML"] = "AWS_SSO"
    """How people sign in: ``AWS_SSO`` (IAM Identity Center) or ``SAML``. Default ``AWS_SSO``."""


class MonitoringSpec(SpecModel):
    """Metrics, logs, alerts and dashboards of the fleet. On by default for a cluster with Slurm or EKS."""

    enabled: bool = True
    """Create the monitoring resources. Default true (for a cluster with ``slurm`` or ``kubernetes``; a cluster of
    plain node groups has no collector). ``false`` creates none of them."""

    scrape_interval_seconds: int = Field(default=30, ge=10, le=300)
    """Seconds between two scrapes of every exporter. Default 30 (HyperPod's observability add-on's figure; the
    GPU fault counters need no more, and AMP bills per sample); 10 to 300."""

    log_retention_days: int = 180
    """Days CloudWatch Logs keeps the nodes' logs. Default 180 (AWS ParallelCluster's default). One of CloudWatch's
    values: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288,
    3653."""

    alarm_emails: tuple[str, ...] = ()
    """E-mail addresses subscribed to the alert topic (each confirms the subscription from the mail SNS sends).
    Default: none."""

    subscriptions: tuple[SubscriptionSpec, ...] = ()
    """Other subscribers of the alert topic (``protocol`` + ``endpoint``). Default: none."""

    grafana: GrafanaSpec = GrafanaSpec()
    """An Amazon Managed Grafana workspace. Default: none (dashboards shipped as files)."""

    kms_key_arn: str | None = None
    """KMS key ARN (``arn:aws:kms:<region>:<account>:key/<id>``, the cluster's region) that encrypts the AMP
    workspace, the log groups and the alert topic. Its key policy must let ``logs.<region>.amazonaws.com``,
    ``aps.amazonaws.com`` and ``sns.amazonaws.com`` use it. Default: AWS-owned / AWS-managed keys (the log groups'
    and AMP's own encryption, SNS's ``alias/aws/sns``)."""

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in RETENTION_DAYS:
            near = min(RETENTION_DAYS, key=lambda d: (abs(d - value), d))
            raise ValueError(
                f"{value} days is not a retention CloudWatch Logs accepts{FIX_MARK}use one of "
                f"{', '.join(map(str, RETENTION_DAYS))}; the nearest is {near}"
            )
        return value

    @field_validator("alarm_emails")
    @classmethod
    def _emails(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            if not EMAIL.fullmatch(address):
                raise ValueError(f"{address!r} is not an e-mail address{FIX_MARK}write it as name@example.com")
        if len(set(value)) != len(value):
            twice = sorted({a for a in value if value.count(a) > 1})
            raise ValueError(f"{', '.join(twice)} listed twice{FIX_MARK}list each address once")
        return value
