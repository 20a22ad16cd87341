"""Trust policies of the service roles components create, one helper for every component."""

from __future__ import annotations

import json


def assume_role_policy(service: str, *actions: str) -> str:
    """A trust policy letting the AWS ``service`` principal take the role with ``actions`` (default
    ``sts:AssumeRole``)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": list(actions) or "sts:AssumeRole"}],
        }
    )
