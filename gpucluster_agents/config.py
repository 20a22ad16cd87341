# pyright: strict
"""Finds and reads the agent config file; its schema and validation are :mod:`gpucluster_agents.contract`.

Location: ``--config PATH``, else ``$GPUCLUSTER_AGENT_CONFIG``, else ``/etc/gpucluster/agent.json``.
"""

from __future__ import annotations

import json
import os

from .contract import AgentConfig, ConfigError, parse

DEFAULT_CONFIG_PATH = "/etc/gpucluster/agent.json"
CONFIG_ENV = "GPUCLUSTER_AGENT_CONFIG"


def config_path(explicit: str | None = None) -> str:
    return explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH


def load_config(path: str | None = None) -> AgentConfig:
    """Read and validate the config file; raise ConfigError (naming the file and every bad key)."""
    p = config_path(path)
    try:
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError([f"cannot read config file: {exc.strerror or exc}"], p) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"], p) from exc
    return parse(data, p)
