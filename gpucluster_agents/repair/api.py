# pyright: strict, reportMissingTypeStubs=false
"""The two AWS calls of node repair: EC2 RebootInstances (a reboot-class fault, any node) and Auto
Scaling SetInstanceHealth Unhealthy (a static node: its group terminates the instance and launches a
replacement, which ``static_groups`` then names). Kept apart from ``power/ec2.py`` because they are the
repair pass's only calls and the Auto Scaling client is used for nothing else. Failures are logged and
reported, never raised: the next maintenance pass tries again."""

from __future__ import annotations

import logging
from typing import Any, cast

from boto3.session import Session
from botocore.config import Config

from ..contract import AgentConfig
from ..power.ec2 import AWS_ERRORS, error_code, error_message

log = logging.getLogger("gpucluster_agents")


class RepairApi:
    def __init__(self, cfg: AgentConfig, ec2_client: Any, autoscaling_client: Any = None) -> None:
        self.cfg = cfg
        self.ec2 = ec2_client
        self._autoscaling = autoscaling_client

    @property
    def autoscaling(self) -> Any:
        """Made on first use: most passes repair nothing and need no second client."""
        if self._autoscaling is None:
            config = Config(
                region_name=self.cfg.region,
                retries={"mode": self.cfg.api_retry_mode, "total_max_attempts": self.cfg.api_max_attempts},
                user_agent_extra="gpucluster-agent",
            )
            session = Session(region_name=self.cfg.region)
            self._autoscaling = cast(
                Any,
                session.client("autoscaling", endpoint_url=self.cfg.endpoint_url, config=config),  # pyright: ignore[reportUnknownMemberType]
            )
        return self._autoscaling

    def reboot(self, instance_id: str) -> bool:
        try:
            self.ec2.reboot_instances(InstanceIds=[instance_id])
        except AWS_ERRORS as exc:
            log.error("api RebootInstances instance=%s failed: %s: %s", instance_id, error_code(exc), error_message(exc))
            return False
        log.info("api RebootInstances instance=%s", instance_id)
        return True

    def set_unhealthy(self, instance_id: str) -> bool:
        """Mark the instance Unhealthy in its Auto Scaling group, ignoring the health check grace period."""
        try:
            self.autoscaling.set_instance_health(InstanceId=instance_id, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False)
        except AWS_ERRORS as exc:
            log.error("api SetInstanceHealth instance=%s failed: %s: %s", instance_id, error_code(exc), error_message(exc))
            return False
        log.info("api SetInstanceHealth instance=%s status=Unhealthy", instance_id)
        return True
