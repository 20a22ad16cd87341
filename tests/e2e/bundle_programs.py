"""ResumeProgram / SuspendProgram / ResumeFailProgram of the hybrid end-to-end test.

slurmctld runs ``python bundle_programs.py SETTINGS COMMAND HOSTLIST``. This runs the bundle's own wrapper
(``<installDir>/bin/slurm-<command>``, which runs the agent from the bundle's package with the bundle's config)
in what slurmctld gives a program, with every ``AWS_*`` variable removed: the agent's only way to AWS is the
bundle's profile. Then it stands in for the cloud, as ``tests/e2e/slurm_programs.py`` does: every cloud node
the agent really launched an instance for (in moto, by its node-name tag) gets a local slurmd; on suspend the
slurmd of a node whose instance is gone is stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

# slurmctld runs this file as a script: Python puts its folder, and so slurm_programs beside it, first on sys.path
from slurm_programs import live_nodes, log, start_slurmd, stop_slurmds


def main(argv: list[str]) -> int:
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    settings: dict[str, Any] = json.loads(Path(argv[0]).read_text())
    command, hostlist = argv[1], argv[2] if len(argv) > 2 else ""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env[settings["marker_key"]] = settings["marker"]
    log(settings, f"{command} {hostlist} aws_env={sorted(k for k in os.environ if k.startswith('AWS_'))}")
    with open(Path(settings["log_dir"]) / "agent.out", "ab") as out:
        rc = subprocess.run(
            [f"{settings['bin_dir']}/slurm-{command}", hostlist],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    log(settings, f"agent {command} {hostlist} rc={rc}")
    nodes = subprocess.run(
        [settings["scontrol"], "show", "hostnames", hostlist], env=env, capture_output=True, text=True, check=False
    ).stdout.split()
    cloud = [n for n in nodes if n.startswith(tuple(f"{g}-" for g in settings["cloud_groups"]))]
    live = live_nodes(settings)
    if command == "resume":
        for node in cloud:
            if live.get(node):
                start_slurmd(settings, node, env)
    else:
        stop_slurmds(settings, [n for n in cloud if not live.get(n)])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
