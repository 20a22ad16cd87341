"""Preflight: the checks that need AWS (boto3), run before ``pulumi up`` with ``gpucluster preflight``.

The config's validators judge a config on its own; preflight asks the account and region whether it can
work. Each check returns findings with the config path, like the validators. The folder:

- :mod:`.cluster` — instance type offerings per zone, capacity reservations and blocks, bring-your-own
  subnets, an existing FSx file system, vCPU quotas;
- :mod:`.hybrid` — a hybrid site: the Private CA, existing gateways, customer gateway collisions, trust
  anchors, the VPC's CIDRs against the site's;
- :mod:`.images` — every AMI the config names exists and is Amazon's, Canonical's or the account's own;
- :mod:`.routes` — a hybrid site's routes through its Transit Gateway or VPN gateway;
- :mod:`.clients` — the boto3 clients every check takes;
- :mod:`.run` — runs every check (:func:`preflight`); a check that cannot run is a finding, not a crash.

boto3 only; never imported by the stack program.
"""

from gpucluster.tools.preflight.clients import Clients
from gpucluster.tools.preflight.cluster import quota_family
from gpucluster.tools.preflight.run import CHECKED, CHECKS, NoCredentials, failure_reason, preflight

__all__ = ["CHECKED", "CHECKS", "Clients", "NoCredentials", "failure_reason", "preflight", "quota_family"]
