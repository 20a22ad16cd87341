# pyright: strict
"""``python -m gpucluster_agents.health {boot,prolog,sweep,deep} [--config PATH] [--node NAME] [--json]
[--fake-nvml SCENARIO]``

Exit status — the contract the boot helper, the Slurm wrappers and the Kubernetes sweep rely on:
0 healthy (action none), 1 a fault (action reboot or replace), 2 the program itself could not run
(config missing or invalid, the NVML binding not installed).

Every run appends its verdict to the log (``log_file``). In ``sweep`` and ``prolog`` modes a fault also
drains this node with the verdict's reason (``scontrol update nodename=<N> state=drain
reason="gpucluster: …"``): Slurm does nothing with HealthCheckProgram's exit status, and the
``gpucluster:`` prefix is how the agent knows the drain is its to act on. A failing prolog's exit 1
then makes Slurm requeue the job. ``boot`` (before slurmd runs) drains nothing: it exits 1, and the boot
helper leaves the reason for slurmd's health check and prolog to drain the node with (docs/health.md).

A job opts out of the prolog checks with ``--extra=healthchecks=off`` (``SLURM_JOB_EXTRA``), the
Cluster Toolkit convention; the program then runs nothing and exits 0.

Root runs this program (slurmd's HealthCheckProgram and Prolog, the boot unit, the Kubernetes sweep), so
nothing in its environment chooses what it reads or runs: the config is ``--config`` or
:data:`DEFAULT_PATH`, replayed GPU readings only ``--fake-nvml`` (which no wrapper passes). The only
variables read are Slurm's own: ``SLURMD_NODENAME`` (the node's name, when ``--node`` is not given) and
``SLURM_JOB_EXTRA`` (a job's opt-out from its own prolog checks). The wrappers start it with ``python3 -I``
from ``/`` (:data:`gpucluster_agents.boot.helper.HEALTH_MAIN`), so neither the working directory nor
``PYTHON*`` variables reach its imports.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Sequence

from ..contract.health import DEFAULT_PATH, MODES, HealthConfig, HealthConfigError, load
from .nvml import NvmlUnavailable, load_binding
from .run import run
from .verdict import Verdict, append_log

EXIT_HEALTHY = 0
EXIT_FAULT = 1
EXIT_CANNOT_RUN = 2
DRAINING_MODES = ("sweep", "prolog")
OPT_OUT = "healthchecks=off"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gpucluster_agents.health", description="GPU node health checks")
    p.add_argument("mode", choices=MODES)
    p.add_argument("--config", default=DEFAULT_PATH, help=f"config file (default {DEFAULT_PATH})")
    p.add_argument("--node", help="the Slurm node name (else $SLURMD_NODENAME, the config's node_name, the host name)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.add_argument(
        "--fake-nvml",
        metavar="SCENARIO",
        help="judge readings from this scenario file instead of the GPUs (tests and replays; see fake_nvml.py)",
    )
    return p


def node_name(cfg: HealthConfig, given: str | None) -> str:
    return given or os.environ.get("SLURMD_NODENAME") or cfg.node_name or socket.gethostname().split(".")[0]


def opted_out() -> bool:
    extra = os.environ.get("SLURM_JOB_EXTRA", "")
    return OPT_OUT in extra.replace(";", ",").replace(" ", ",").split(",")


def drain(cfg: HealthConfig, verdict: Verdict) -> str | None:
    """Drain this node with the verdict's reason; the error text when scontrol fails."""
    argv = [cfg.scontrol, "update", f"nodename={verdict.node}", "state=drain", f"reason={verdict.reason}"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scontrol: {exc}"
    if proc.returncode != 0:
        return f"scontrol exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
    return None


def _human(verdict: Verdict) -> str:
    lines = [f"{verdict.node} {verdict.mode}: {verdict.action} - {verdict.reason}"]
    for c in verdict.checks:
        mark = "ok  " if c.ok and not c.detail.startswith("skipped") else ("skip" if c.ok else "FAIL")
        lines.append(f"  {mark} {c.name:<14} {c.detail}".rstrip())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    mode: str = args.mode
    try:
        cfg = load(args.config)
        binding = load_binding(args.fake_nvml) if args.fake_nvml else None
    except HealthConfigError as exc:
        sys.stderr.write(f"gpucluster-health: {exc}\n")
        return EXIT_CANNOT_RUN
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"gpucluster-health: --fake-nvml {args.fake_nvml}: {exc}\n")
        return EXIT_CANNOT_RUN
    if mode == "prolog" and opted_out():
        sys.stderr.write(f"gpucluster-health: prolog checks skipped: the job asked for {OPT_OUT}\n")
        return EXIT_HEALTHY
    try:
        verdict = run(cfg, mode, node_name(cfg, args.node), binding=binding)
    except NvmlUnavailable as exc:
        sys.stderr.write(f"gpucluster-health: {exc}\n")
        return EXIT_CANNOT_RUN
    problem = append_log(cfg.log_file, verdict)
    if problem:
        sys.stderr.write(f"gpucluster-health: {problem}\n")
    print(verdict.to_json() if args.json else _human(verdict), flush=True)
    if verdict.healthy:
        return EXIT_HEALTHY
    if mode in DRAINING_MODES:
        problem = drain(cfg, verdict)
        if problem:
            sys.stderr.write(f"gpucluster-health: could not drain {verdict.node}: {problem}\n")
    return EXIT_FAULT
