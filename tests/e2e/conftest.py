"""Fixtures of the end-to-end tests (real slurmctld/slurmd, the hybrid bundle, the IMDS guard): the node-agent
tests' moto server (one per session, reset per test), its fault proxy and AWS environment."""

from tests.agents.conftest import aws_env, moto, moto_server, proxy

__all__ = ["aws_env", "moto", "moto_server", "proxy"]  # fixtures: pytest takes them from this module
