"""Fixtures for the Kubernetes layer: resolved specs with a Kubernetes section."""

from __future__ import annotations

import pytest

from gpucluster.load import load_spec
from tests.conftest import group, make_config

TWO_ZONES = {"availabilityZones": ["us-east-1a", "us-east-1b"]}


def eks_spec(*groups, network=None, **kubernetes):
    """A resolved ClusterSpec with a Kubernetes section (default: one p5 group, two zones)."""
    config = make_config(*(groups or (group(maxSize=4),)), network=network or TWO_ZONES, kubernetes=kubernetes)
    return load_spec(config, stack="k").spec


@pytest.fixture
def p5_spec():
    return eks_spec(teams=[{"name": "research", "gpuQuota": {"h100": 16}, "groups": ["research"]}])
