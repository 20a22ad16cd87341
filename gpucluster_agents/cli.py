# pyright: strict
"""Command line: what slurmctld runs.

    python -m gpucluster_agents resume      <hostlist>   # ResumeProgram
    python -m gpucluster_agents suspend     <hostlist>   # SuspendProgram
    python -m gpucluster_agents resume-fail <hostlist>   # ResumeFailProgram
    python -m gpucluster_agents topology   [<hostlist>]  # rewrite topology.conf (whole cluster)
    python -m gpucluster_agents maintain                 # sweep + end holds + repairs + topology (timer)
    python -m gpucluster_agents status                   # protected node groups and node repairs
    python -m gpucluster_agents clear-protect <group>    # end a node group's protected mode
    python -m gpucluster_agents release-brake <group>    # repairs of a braked node group resume (repair/brake.py)
    python -m gpucluster_agents accounts reconcile       # slurmdbd in step with accounts.json (accounts/cli.py)
    python -m gpucluster_agents metrics serve|print ...  # the node's Prometheus exporter (metrics/cli.py)
    python -m gpucluster_agents usage [--since DAY] ...  # GPU-hours and cost per team and user (usage/cli.py)
    python -m gpucluster_agents team-usage publish --dir D  # each team's report, for its members (usage/teams.py)
    python -m gpucluster_agents spot-watch [once]        # act on spot / capacity warnings (power/spot.py; a service)

On a site's own slurmctld (config ``site``, :mod:`.site`) resume and suspend hand the site's own nodes to its
previous programs (started first, waited for last: side by side with the cloud work) and act on the cloud nodes
only.

Options: ``--config PATH`` (else $GPUCLUSTER_AGENT_CONFIG, else /etc/gpucluster/agent.json).
Exit status: 0 whenever Slurm should not retry (failures are logged and nodes set DOWN),
2 for a bad command line or config.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .config import load_config
from .contract import AgentConfig, ConfigError
from .contract.site import SiteRun, hand_off
from .power.apitime import ApiTimer
from .power.state import LockTimeout

if TYPE_CHECKING:  # the agent imports boto3: only once the config is known to be good
    from .agent import Agent

log = logging.getLogger("gpucluster_agents")

COMMANDS = ("resume", "suspend", "resume-fail", "topology", "maintain", "status", "clear-protect", "release-brake", "spot-watch")
GROUP_COMMANDS = ("clear-protect", "release-brake")  # their argument is node group names, not a hostlist
EXIT_OK = 0
EXIT_USAGE = 2


class _UTCFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        t = time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created))
        return f"{t}.{int(record.msecs):03d}Z"


def setup_logging(path: str, command: str) -> logging.Handler:
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as exc:
        sys.stderr.write(f"gpucluster-agent: cannot open log file {path}: {exc}; logging to stderr\n")
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_UTCFormatter(f"%(asctime)s %(process)d {command} %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return handler


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucluster-agent", description="Slurm power-saving agent for gpucluster on EC2")
    p.add_argument("--config", help="agent config JSON (default: $GPUCLUSTER_AGENT_CONFIG or /etc/gpucluster/agent.json)")
    p.add_argument("command", choices=COMMANDS)
    p.add_argument("hostlist", nargs="?", default="", help="Slurm hostlist expression, e.g. p5-[1-4],g6e-2")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["accounts"]:  # the head node's accounts reconcile: its own command line (accounts/cli.py)
        from .accounts.cli import main as accounts_main

        return accounts_main(argv[1:])
    if argv[:1] == ["metrics"]:  # no agent config: the exporter has its own command line
        from .metrics.cli import main as metrics_main

        return metrics_main(argv[1:])
    if argv[:1] == ["team-usage"]:  # the head node's per-team reports (usage/teams.py)
        from .usage.teams import main as team_usage_main

        return team_usage_main(argv[1:])
    if argv[:1] == ["usage"]:  # a report for a person or the daily timer: its own options, no agent config
        from .usage.cli import main as usage_main

        return usage_main(argv[1:])
    args = _parse_args(argv)
    if isinstance(args, int):
        return args
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write(f"gpucluster-agent: config error: {exc}\n")
        return EXIT_USAGE

    handler = setup_logging(cfg.log_file, args.command)
    site_run: SiteRun | None = None
    if args.command in ("resume", "suspend") and cfg.site.program(args.command):
        # a site's controller: its own nodes go to its previous program (started now, waited for after the cloud
        # work: the two run side by side), the agent acts on the cloud nodes only
        args.hostlist, site_run = hand_off(cfg.site, args.command, args.hostlist, lambda n: cfg.group_of_node(n) is not None)
        if not args.hostlist:
            if site_run is not None:
                site_run.wait()
            _close(handler)
            return EXIT_OK
    try:
        _run(cfg, args.command, args.hostlist, site_run)
    finally:
        _close(handler)
    return EXIT_OK


def _parse_args(args_list: list[str]) -> argparse.Namespace | int:
    """The parsed command line, or the exit status of a bad (or ``--help``) one."""
    try:
        args = _parser().parse_args(args_list)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    if args.command in ("resume", "suspend", "resume-fail", *GROUP_COMMANDS) and not args.hostlist.strip():
        sys.stderr.write(f"gpucluster-agent: {args.command} needs a hostlist\n")
        return EXIT_USAGE
    return args


def _close(handler: logging.Handler) -> None:
    log.removeHandler(handler)
    handler.close()


def _run(cfg: AgentConfig, command: str, hostlist: str, site_run: SiteRun | None) -> None:
    """Run ``command`` with the agent; log (never raise) its failure, then wait for the site's program and log
    the run's timings."""
    started = time.monotonic()
    nodes: list[str] = []
    agent: Agent | None = None
    timer: ApiTimer | None = None
    try:
        from .agent import Agent  # boto3 import deferred until the config is known to be good

        agent = Agent(cfg)
        timer = ApiTimer().attach(agent.ec2.client)
        if agent.maps is not None:
            timer.attach(agent.maps.client)
        nodes = agent.expand(hostlist) if command not in (*GROUP_COMMANDS, "spot-watch") else []
        log.info("start %s hostlist=%r nodes=%d", command, hostlist, len(nodes))
        _dispatch(agent, command, hostlist, nodes)
    except LockTimeout as exc:
        log.error("%s: %s", command, exc)
        if agent is not None and command == "resume" and nodes:
            agent.slurm.set_down(nodes, "gpucluster: agent lock timeout")
    except Exception:
        log.exception("%s failed", command)
        if agent is not None and command == "resume":
            _set_unplaced_down(agent, nodes)
    finally:
        if site_run is not None:
            site_run.wait()
        _log_end(command, started, agent, timer)


def _dispatch(agent: Agent, command: str, hostlist: str, nodes: list[str]) -> None:
    if command == "resume":
        agent.resume(nodes)
    elif command == "suspend":
        agent.suspend(nodes)
    elif command == "resume-fail":
        agent.resume_fail(nodes)
    elif command == "topology":
        agent.topology()
    elif command == "status":
        sys.stdout.write("".join(line + "\n" for line in agent.status()))
    elif command == "clear-protect":
        agent.clear_protect([g for g in hostlist.split(",") if g])
    elif command == "spot-watch":
        agent.spot_watch(once=hostlist == "once")
    elif command == "release-brake":
        sys.stdout.write("".join(line + "\n" for line in agent.release_brake([g for g in hostlist.split(",") if g])))
    else:
        agent.maintain()


def _set_unplaced_down(agent: Agent, nodes: list[str]) -> None:
    """After a failed resume: only nodes left without an instance go DOWN (a node that got one boots and
    registers; a DOWN would kill its job)."""
    down = agent.unplaced(nodes)
    if down:
        try:
            agent.slurm.set_down(down, "gpucluster: agent error, see agent log")
        except Exception:
            log.exception("could not set nodes down")


def _log_end(command: str, started: float, agent: Agent | None, timer: ApiTimer | None) -> None:
    total = time.monotonic() - started
    api = timer.api_seconds if timer else 0.0
    if agent is not None:
        log.info("scontrol: %d calls, %.3fs", agent.slurm.calls, agent.slurm.seconds)
    log.info(
        "end %s in %.3fs: own %.3fs, waiting on EC2 %.3fs (%d calls)",
        command,
        total,
        total - api,
        api,
        timer.calls if timer else 0,
    )


def console_main() -> None:  # pragma: no cover - console-script shim
    sys.exit(main())
