# pyright: strict
"""The agent on a site's own slurmctld (hybrid bursting): the ``site`` section of the agent config and what it
changes.

A part of the node contract (:mod:`gpucluster_agents.contract` holds it as ``AgentConfig.site``), absent on a
gpucluster head node. On a site's controller:

- **Credentials** come from an AWS config profile (``aws_profile`` in ``aws_config_file``) whose
  ``credential_process`` runs IAM Roles Anywhere's ``aws_signing_helper``: the agent's boto3 session reads that
  file and profile only (never the caller's environment, never a static key).
- **The site's own power saving** stays the site's: when slurmctld hands the agent's Resume/Suspend program a
  hostlist, every node that is not a cloud node is passed on to the site's previous program
  (``resume_program``/``suspend_program``) as one hostlist argument, the original argument unchanged when none
  of its nodes is a cloud node. The agent then acts on the cloud nodes only, and is not started at all when
  there are none (no lock, no EC2 call). The site's program runs *beside* the cloud work: it is started first,
  the agent launches (or terminates) the cloud nodes meanwhile, then waits for the program, at most
  ``SITE_PROGRAM_TIMEOUT`` from its start (then it is killed and that is logged). A slow site program (a
  BMC power-on, a PXE boot) therefore never delays a cloud launch.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from . import hostlist
from .jsonread import Reader

log = logging.getLogger("gpucluster_agents")

SITE_KEYS = frozenset(("aws_profile", "aws_config_file", "resume_program", "suspend_program"))
_PROFILE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+-]*$")
SITE_PROGRAM_TIMEOUT = 600.0
"""Seconds the site's own program may run before the agent stops waiting (slurmctld gives none)."""


@dataclass(frozen=True)
class Site:
    aws_profile: str | None = None  # the profile of aws_config_file the agent's session uses
    aws_config_file: str | None = None  # an AWS config file (credential_process), absolute path
    resume_program: str | None = None  # the site's previous ResumeProgram: gets the non-cloud hostlists
    suspend_program: str | None = None  # the site's previous SuspendProgram

    def program(self, command: str) -> str | None:
        return {"resume": self.resume_program, "suspend": self.suspend_program}.get(command)


def parse_site(r: Reader, raw: Any, path: str) -> Site:
    """Read the ``site`` object (absent: a gpucluster head node); problems go to ``r`` with their key path."""
    if raw is None:
        return Site()
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return Site()
    obj = cast("dict[str, Any]", raw)
    r.unknown(obj, SITE_KEYS, path)
    hint = "an absolute path of letters, digits and . _ - + /"
    profile = r.string(
        obj, "aws_profile", path, nullable=True, pattern=_PROFILE_RE, hint="a profile name: letters, digits, _ . -"
    )
    config_file = r.string(obj, "aws_config_file", path, nullable=True, pattern=_PATH_RE, hint=hint)
    resume = r.string(obj, "resume_program", path, nullable=True, pattern=_PATH_RE, hint=hint)
    suspend = r.string(obj, "suspend_program", path, nullable=True, pattern=_PATH_RE, hint=hint)
    if (profile is None) != (config_file is None):
        r.err(path, "aws_profile and aws_config_file go together: give both (the profile is read from that file) or neither")
    return Site(profile, config_file, resume, suspend)


def session_kwargs(site: Site) -> dict[str, Any]:
    """boto3 ``Session`` arguments: a botocore session reading only the site's config file and profile, so no
    credential in the environment (or ~/.aws) is ever used on a site's controller."""
    if site.aws_profile is None or site.aws_config_file is None:
        return {}
    from botocore.session import Session as BotocoreSession  # pyright: ignore[reportMissingTypeStubs]

    core = cast(Any, BotocoreSession())
    core.set_config_variable("config_file", site.aws_config_file)
    core.set_config_variable("credentials_file", "/dev/null")
    core.set_config_variable("profile", site.aws_profile)
    return {"botocore_session": core}


def split_site_nodes(expr: str, is_cloud: Callable[[str], bool]) -> tuple[list[str], str]:
    """``(cloud nodes, the site's hostlist)``: the original expression when it names no cloud node, else the
    site's nodes compressed again; ``""`` when every node is a cloud node."""
    nodes = hostlist.expand(expr)
    cloud = [n for n in nodes if is_cloud(n)]
    if not cloud:
        return [], expr
    rest = [n for n in nodes if not is_cloud(n)]
    return cloud, hostlist.compress(rest) if rest else ""


class SiteRun:
    """The site's own program, started and not yet waited for."""

    def __init__(self, program: str, site_hostlist: str, popen: Callable[..., Any] = subprocess.Popen) -> None:
        self.program, self.hostlist = program, site_hostlist
        self.started = time.monotonic()
        self.proc: Any = None
        try:
            self.proc = popen(
                [program, site_hostlist],
                env=dict(os.environ),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            log.error("site program %s %r failed: %s", program, site_hostlist, exc)
        else:
            log.info("site program %s %r started (pid %d)", program, site_hostlist, self.proc.pid)

    def wait(self) -> int:
        """Its exit status, waiting at most what is left of ``SITE_PROGRAM_TIMEOUT`` since it started; -1 when it
        could not run or ran past that (it is then killed). Logged, never raised."""
        if self.proc is None:
            return -1
        left = max(0.0, SITE_PROGRAM_TIMEOUT - (time.monotonic() - self.started))
        try:
            code = int(self.proc.wait(timeout=left))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            log.error("site program %s %r timed out after %.0fs; killed", self.program, self.hostlist, SITE_PROGRAM_TIMEOUT)
            return -1
        (log.info if code == 0 else log.error)("site program %s %r exited %d", self.program, self.hostlist, code)
        return code


def hand_off(site: Site, command: str, expr: str, is_cloud: Callable[[str], bool]) -> tuple[str, SiteRun | None]:
    """Start the site's program for ``command`` with the site's nodes of ``expr``; returns the cloud nodes'
    hostlist the agent acts on (``""``: none) and the started program, to ``wait`` for once the cloud work is
    done. Without a site program ``expr`` is returned unchanged."""
    program = site.program(command)
    if program is None or not expr.strip():
        return expr, None
    cloud, site_list = split_site_nodes(expr, is_cloud)
    run = SiteRun(program, site_list) if site_list else None
    return (hostlist.compress(cloud) if cloud else ""), run
