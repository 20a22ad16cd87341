# pyright: strict, reportMissingTypeStubs=false
"""Publishing a launch's instance -> node map to S3: one PutObject per CreateFleet batch, whatever its
size (the schema and why: ``contract/nodemap.py``). The booting instance reads it (``boot/helper.py node-name``), and
so does the agent when its own record of the names (``names.json``) is lost (``names.recover_from_maps``)."""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from boto3.session import Session
from botocore.config import Config

from ..contract import AgentConfig
from ..contract.nodemap import NodeMap
from .ec2 import AWS_ERRORS, error_code, error_message

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

    def fetch(self, token: str, group: str) -> dict[str, str] | None:
        """The {instance id: node} map of one launch of ``group``: ``{}`` when S3 has none (NoSuchKey, or 403:
        S3's answer for a missing key to a role without s3:ListBucket, which the head node's lacks), None when
        S3 could not be read (the caller must then assume the map exists). A map that is not the launch's own
        document (another token or group, a malformed entry) names nothing."""
        key = self.spec.key(token)
        try:
            body = self.client.get_object(Bucket=self.spec.bucket, Key=key)["Body"].read()
        except AWS_ERRORS as exc:
            code = error_code(exc)
            missing = code in ("NoSuchKey", "404", "AccessDenied", "403")
            log.log(
                logging.INFO if missing else logging.ERROR,
                "api GetObject s3://%s/%s: %s: %s",
                self.spec.bucket,
                key,
                code,
                error_message(exc),
            )
            return {} if missing else None
        try:
            raw: Any = json.loads(body)
        except ValueError:
            raw = None
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        nodes: Any = doc.get("nodes")
        good = doc.get("token") == token and doc.get("group") == group and isinstance(nodes, dict)
        out = {str(k): v for k, v in cast("dict[Any, Any]", nodes).items() if isinstance(v, str)} if good else {}
        log.info(
            "api GetObject s3://%s/%s nodes=%d%s", self.spec.bucket, key, len(out), "" if good else " (not this launch's map)"
        )
        return out
