"""``gpucluster usage --stack X [--since DAY] [--until DAY] [--json]``: how to get the GPU-hours and cost per team and
per user of a Slurm cluster from its head node (the accounting database lives there, not on the operator's machine).

It prints the AWS CLI commands that run ``gpucluster-agent usage`` on the head node through Systems Manager Run
Command and print its report; it calls no AWS API itself. Run Command, not a Session Manager session: a command runs
as root (the agent's wrapper then runs the report as SlurmUser, who sees every user's jobs under
``PrivateData=jobs,usage``), where a session's ``ssm-user`` sees only its own jobs and has no sudo on a gpucluster
node. The head node is found by its tags, so the commands work before the stack's outputs are known. The daily
files the head node writes (``s3://<artifact bucket>/usage/<day>.json``) are the other way in; see docs/teams.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from gpucluster.tools.cli_common import EXIT_CONFIG, EXIT_OK, CliError, add_stack_option

TAG_CLUSTER = "gpucluster:cluster"
TAG_ROLE = "gpucluster:role"


def remote_command(since: str | None, until: str | None, as_json: bool) -> str:
    """The command line run on the head node (root): ``gpucluster-agent usage …``."""
    from gpucluster.render.slurm.names import AGENT_COMMAND

    argv = [AGENT_COMMAND, "usage"]
    if since:
        argv += ["--since", since]
    if until:
        argv += ["--until", until]
    if as_json:
        argv.append("--json")
    return shlex.join(argv)


def commands(cluster: str, region: str, remote: str) -> list[str]:
    """Send the command to the cluster's head node (found by its tags), wait for it, then print what it wrote: shell
    lines to run in order (they share ``$id`` and ``$head``)."""
    targets = f"Key=tag:{TAG_CLUSTER},Values={cluster} Key=tag:{TAG_ROLE},Values=head"
    parameters = json.dumps({"commands": [remote]})
    send = (
        f"id=$(aws ssm send-command --region {shlex.quote(region)} --document-name AWS-RunShellScript "
        f"--comment {shlex.quote(f'gpucluster usage report of {cluster}')} --targets {targets} "
        f"--parameters {shlex.quote(parameters)} --query Command.CommandId --output text)"
    )
    wait = (
        f'until aws ssm list-command-invocations --region {shlex.quote(region)} --command-id "$id" '
        "--query 'CommandInvocations[0].Status' --output text | grep -qvE '^(Pending|InProgress|Delayed|None)$'; do sleep 2; done"
    )
    head = (
        f'head=$(aws ssm list-command-invocations --region {shlex.quote(region)} --command-id "$id" '
        "--query 'CommandInvocations[0].InstanceId' --output text)"
    )
    show = (  # get-command-invocation: up to 24,000 characters of output (list-command-invocations: 2,500)
        f'aws ssm get-command-invocation --region {shlex.quote(region)} --command-id "$id" --instance-id "$head" '
        "--query '[StandardOutputContent, StandardErrorContent]' --output text"
    )
    return [send, wait, head, show]


def run(args: argparse.Namespace) -> int:
    from gpucluster.load import load_spec
    from gpucluster.tools.cli_common import overrides
    from gpucluster.tools.plan.run.stackfile import as_config, load_stack_config
    from gpucluster_agents.contract.usage import parse_day

    project, config, _ = load_stack_config(args.stack, Path(args.project_dir))
    config.update(as_config(project, overrides(args))[0])
    cluster = load_spec(config, stack=args.stack).cluster
    _check(args.stack, cluster)
    for option, value in (("--since", args.since), ("--until", args.until)):
        if value is not None:
            try:
                parse_day(value, _any_day(), option)
            except ValueError as exc:
                raise CliError(str(exc), EXIT_CONFIG) from None
    remote = remote_command(args.since, args.until, args.json)
    print(f"# GPU-hours and cost per team and user of {cluster.name}, from its head node's accounting database.")
    print("# Run these with credentials allowed ssm:SendCommand on the head node (AWS-RunShellScript runs it as root):")
    for line in commands(cluster.name, cluster.region, remote):
        print(line)
    return EXIT_OK


def _any_day() -> Any:
    import datetime as dt

    return dt.date(2000, 1, 1)  # only the form of the day is checked here; the head node's clock decides the window


def _check(stack: str, cluster: Any) -> None:
    slurm = cluster.spec.slurm
    if slurm is None:
        raise CliError(
            f"stack {stack!r} has no Slurm cluster (gpucluster:slurm): GPU usage per team comes from Slurm's accounting",
            EXIT_CONFIG,
        )
    if slurm.accounting is None:
        raise CliError(
            f"stack {stack!r} has no job accounting (gpucluster:slurm.accounting): without it no job's GPU-hours are kept",
            EXIT_CONFIG,
        )


def register(sub: Any, common: argparse.ArgumentParser, values: argparse.ArgumentParser) -> None:
    u = sub.add_parser(
        "usage", parents=[common, values], help="the commands that print a Slurm cluster's GPU-hours and cost per team and user"
    )
    add_stack_option(u, "a stack with gpucluster:slurm and job accounting")
    u.add_argument("--since", help="first day (UTC), YYYY-MM-DD, today or yesterday (default: 30 days before the end)")
    u.add_argument("--until", help="last day (UTC), included (default: up to now)")
    u.add_argument("--json", action="store_true", help="the report as JSON")
    u.set_defaults(func=run)
