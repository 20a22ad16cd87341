"""Fixtures of the end-to-end tests (real slurmctld/slurmd, the hybrid bundle, the IMDS guard): the node-agent
tests' moto server (one per session, reset per test), its fault proxy and AWS environment; the IMDS guard tests'
network namespaces and run directory."""

from tests.agents.conftest import aws_env, moto, moto_server, proxy
from tests.e2e.guard_netns import netns, run_dir

__all__ = ["aws_env", "moto", "moto_server", "netns", "proxy", "run_dir"]  # fixtures: pytest takes them from this module
