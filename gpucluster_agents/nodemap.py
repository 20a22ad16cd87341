# pyright: strict, reportMissingTypeStubs=false
"""Publishing a launch's instance -> node map to S3: one PutObject per CreateFleet batch, whatever its
size (the schema and why: ``nodemap_contract``). The booting instance reads it (``boot.py node-name``)."""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from boto3.session import Session
from botocore.config import Config

from .contract import AgentConfig
from .ec2 import AWS_ERRORS, error_code, error_message
from .nodemap_contract import NodeMap

log = logging.getLogger("gpucluster_agents")


def map_document(token: str, group: str, assignments: dict[str, str]) -> bytes:
    """The object's bytes: sorted keys, so one launch always gives the same object."""
    doc = {"token": token, "group": group, "nodes": dict(sorted(assignments.items()))}
    return (json.dumps(doc, indent=None, sort_keys=True, separators=(",", ":")) + "\n").encode()


class NodeMapPublisher:
    """Writes node maps to ``s3://<bucket>/<prefix><token>.json`` with its own S3 client."""

    def __init__(self, cfg: AgentConfig, spec: NodeMap, client: Any = None) -> None:
        self.spec = spec
        if client is None:
            config = Config(
                region_name=cfg.region,
                retries={"mode": cfg.api_retry_mode, "total_max_attempts": cfg.api_max_attempts},
                connect_timeout=10,
                read_timeout=60,
                user_agent_extra="gpucluster-agent",
            )
            session = Session(region_name=cfg.region)
            client = cast(Any, session.client("s3", endpoint_url=spec.endpoint_url, config=config))  # pyright: ignore[reportUnknownMemberType]
        self.client = client

    def publish(self, token: str, group: str, assignments: dict[str, str]) -> bool:
        """PutObject the map of one launch; False (logged) if S3 refused it: the caller then names the
        instances with CreateTags instead, so a node never waits for a map that will not come."""
        key = self.spec.key(token)
        try:
            self.client.put_object(
                Bucket=self.spec.bucket,
                Key=key,
                Body=map_document(token, group, assignments),
                ContentType="application/json",
            )
        except AWS_ERRORS as exc:
            log.error(
                "api PutObject s3://%s/%s nodes=%d failed: %s: %s",
                self.spec.bucket,
                key,
                len(assignments),
                error_code(exc),
                error_message(exc),
            )
            return False
        log.info("api PutObject s3://%s/%s nodes=%d", self.spec.bucket, key, len(assignments))
        return True
