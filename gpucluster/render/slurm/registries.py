"""Private ECR repositories for containers (``slurm.containers.registries``): what the node role may pull, and how an
unprivileged user's enroot gets a pull token on a node where only root reaches the instance metadata service.

Root's timer (:data:`ECR_TOKEN_TIMER`, at boot and every :data:`REFRESH_HOURS` hours) asks ECR for a token with the
node's role (``GetAuthorizationToken``; tokens last 12 hours) and writes it per region under :data:`TOKEN_DIR`. The
token is a registry password, not AWS credentials: it carries only the role's ECR rights, which are pull rights on the
named repositories, the same ones every user of the cluster has through their jobs. :data:`CREDENTIALS` holds one
line per registry host in enroot's netrc format whose password is read from that file when enroot pulls, so a user
copies the lines once into their own ``$ENROOT_CONFIG_PATH/.credentials`` and never holds a token that expires.
docs/containers.md, "Private registries"."""

from __future__ import annotations

import re
from typing import Any

from gpucluster.render.core import WriteFile, render
from gpucluster.render.slurm.guard import systemd_unit

TOKEN_DIR = "/run/gpucluster/ecr"
CREDENTIALS = "/etc/gpucluster/enroot/ecr.credentials"
TOKEN_PROGRAM = "/usr/local/sbin/gpucluster-ecr-token"
ECR_TOKEN_UNIT = "gpucluster-ecr-token.service"
ECR_TOKEN_TIMER = "gpucluster-ecr-token.timer"
REFRESH_HOURS = 6
PULL_ACTIONS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
_REFERENCE = re.compile(r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com/(?P<name>.+)$")


def _parts(registry: str) -> tuple[str, str, str]:
    match = _REFERENCE.match(registry)
    if match is None:  # refused at load (checks/slurm/containers.py)
        raise ValueError(f"{registry!r} is not an ECR repository reference")
    return match["account"], match["region"], match["name"]


def repository_arns(registries: tuple[str, ...]) -> list[str]:
    """The repository ARNs of ``registries`` (``name/*`` stays a prefix; the partition is the region's), sorted."""
    arns = set()
    for registry in registries:
        account, region, name = _parts(registry)
        partition = "aws-us-gov" if region.startswith("us-gov-") else "aws"
        arns.add(f"arn:{partition}:ecr:{region}:{account}:repository/{name}")
    return sorted(arns)


def ecr_statements(registries: tuple[str, ...]) -> list[dict[str, Any]]:
    """The node role's ECR statements: pull exactly the named repositories; a token (an action with no resource
    level, hence ``*``). None without registries."""
    if not registries:
        return []
    return [
        {"Sid": "PullTheNamedRepositories", "Effect": "Allow", "Action": list(PULL_ACTIONS),
         "Resource": repository_arns(registries)},
        {"Sid": "GetRegistryTokens", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
    ]  # fmt: skip


def registry_hosts(registries: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(host, region)`` of every registry named, sorted."""
    return sorted({(r.split("/", 1)[0], _parts(r)[1]) for r in registries})


def credentials_lines(registries: tuple[str, ...]) -> str:
    """enroot's netrc lines: user ``AWS``, the password read from the region's token file when enroot pulls."""
    return "".join(
        f"machine {host} login AWS password $(cat {TOKEN_DIR}/{region})\n" for host, region in registry_hosts(registries)
    )


def ecr_files(registries: tuple[str, ...]) -> tuple[WriteFile, ...]:
    """The token program, its service and timer, and the credentials lines users copy (none without registries)."""
    if not registries:
        return ()
    regions = sorted({region for _, region in registry_hosts(registries)})
    program = render("slurm/ecr-token.sh.j2", token_dir=TOKEN_DIR, regions=regions)
    service = systemd_unit(
        "gpucluster: ECR pull tokens for enroot (docs/containers.md)",
        f"After=network-online.target\nWants=network-online.target\n\n[Service]\nType=oneshot\nExecStart={TOKEN_PROGRAM}\n",
    )
    timer = systemd_unit(
        "gpucluster: refresh the ECR pull tokens",
        f"\n[Timer]\nOnBootSec=0\nOnUnitActiveSec={REFRESH_HOURS}h\nRandomizedDelaySec=300\n",
        "WantedBy=timers.target",
    )
    header = "# gpucluster: copy these lines into your own $ENROOT_CONFIG_PATH/.credentials (chmod 600).\n"
    return (
        WriteFile(TOKEN_PROGRAM, program, "0755"),
        WriteFile(f"/etc/systemd/system/{ECR_TOKEN_UNIT}", service),
        WriteFile(f"/etc/systemd/system/{ECR_TOKEN_TIMER}", timer),
        WriteFile(CREDENTIALS, header + credentials_lines(registries)),
    )
