# pyright: strict
"""The health sweep of a Kubernetes GPU node: the one container of the sweep DaemonSet.

``python3 -I -c SWEEP_MAIN <package zip> --config <sweep.json> [--once]``: the node package's zip and the
settings (:class:`SweepSettings`, ``sweep.json``) both come from the DaemonSet's ConfigMap
(:mod:`gpucluster.render.kubernetes_health` writes them), the node's name from ``NODE_NAME`` (the downward API).

Every ``interval_seconds`` it runs the node package's health program in ``sweep`` mode and puts the verdict
on this node through the API server, with the pod's service account (nodes get/patch, nodes/status patch,
nothing else; an admission policy lets those change only this node, its own taints and its own condition):

- exit 0: condition ``condition``=True, and the fault taint (``taint_key``) removed if a sweep set it;
- exit 1: condition False with the verdict's reason as message, fault taint ``taint_key=taint_value:NoSchedule``
  added: no new pods, running ones stay;
- anything else: condition Unknown (the sweep could not run), taints left as they are.

While the node carries the boot taint (``boot_taint_key``: it registered with it) the round runs the
program's ``boot`` mode instead (the sweep's checks plus HBM copy and GEMM, before any job is on the GPUs),
and only its pass takes the boot taint off; a fault or a run that could not finish leaves it on, so the node
takes no pod that does not tolerate it, and the next round runs boot mode again.

The health program judges the node by the thresholds of its node group: ``health-<group>.json`` in
``health_config_dir``, ``<group>`` being the node's ``group_label`` label. It runs isolated
(``python3 -I -c HEALTH_MAIN <package>`` from ``/``: no working directory or ``PYTHON*`` variable reaches its
imports), within the mode's budget; past it, it is killed and never waited for.

Nothing in the environment but ``NODE_NAME`` steers it: the API server, the service account's directory and
the health configs' directory are settings. ``--health-program`` (tests only: the DaemonSet never passes it)
runs another program in the health program's place. Stdlib only, Python 3.9.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ..boot.helper import HEALTH_MAIN
from ..contract.health import HealthConfigError
from ..contract.sweep import SweepSettings, load

EXIT_CANNOT_RUN = 2


def health_program(settings: SweepSettings) -> list[str]:
    """The node package's health program, isolated, from the package (:data:`gpucluster_agents.boot.helper.HEALTH_MAIN`)."""
    return [sys.executable, "-I", "-c", HEALTH_MAIN, settings.package]


def call(settings: SweepSettings, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
    """One request to the API server with the pod's token; the decoded JSON answer."""
    with open(os.path.join(settings.service_account_dir, "token"), encoding="utf-8") as fh:
        token = fh.read().strip()
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(settings.api + path, method=method, data=data)
    request.add_header("Authorization", "Bearer " + token)
    request.add_header("Content-Type", content_type)
    ca = os.path.join(settings.service_account_dir, "ca.crt")
    context = ssl.create_default_context(cafile=ca) if settings.api.startswith("https") else None
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.loads(response.read() or b"{}")


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list(node.get("spec", {}).get("taints") or [])


def booting(settings: SweepSettings, node: dict[str, Any]) -> bool:
    """True while the node carries the boot taint: its boot check has not passed yet."""
    return any(t.get("key") == settings.boot_taint_key for t in _taints(node))


def config_of(settings: SweepSettings, node: dict[str, Any]) -> str | None:
    """The health config of the node's group, or None (the health program then says it could not run)."""
    labels: dict[str, Any] = node.get("metadata", {}).get("labels") or {}
    path = os.path.join(settings.health_config_dir, f"health-{labels.get(settings.group_label, 'unknown')}.json")
    return path if os.path.isfile(path) else None


def verdict(settings: SweepSettings, program: Sequence[str], config: str | None, mode: str = "sweep") -> tuple[str, str, str]:
    """(status, reason, message) of one run of ``program`` in ``mode`` (sweep or boot)."""
    argv = [*program, mode, "--json"] + (["--config", config] if config else [])
    word = "Sweep" if mode == "sweep" else "BootCheck"
    budget = settings.budget(mode)
    proc = subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        # killed, never waited for: a check in uninterruptible sleep (a GPU off the bus can hold NVML there)
        # is not reaped until its call returns, and waiting would stop every later round with it
        proc.kill()
        return "False", word + "TimedOut", f"the health {mode} did not finish within {budget} s"
    try:  # the verdict's reason (the program also tries scontrol, which a pod lacks: stderr is not the news)
        last = str(json.loads(out)["reason"])[:1000]
    except (ValueError, KeyError, TypeError):
        last = ([line for line in (out + err).splitlines() if line.strip()] or [""])[-1][:1000]
    if proc.returncode == 0:
        return "True", word + "Passed", last or "healthy"
    if proc.returncode == 1:
        return "False", word + "Fault", last or f"the health {mode} found a fault"
    return "Unknown", word + "CouldNotRun", last or f"the health {mode} exited {proc.returncode}"


def apply(settings: SweepSettings, node: str, status: str, reason: str, message: str) -> None:
    """The condition on the node's status, then its taints: a pass clears the fault and boot taints, a
    fault adds the fault taint (the boot taint stays), a run that could not finish changes no taint."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": settings.condition, "status": status, "reason": reason, "message": message}
    condition.update(lastHeartbeatTime=now, lastTransitionTime=now)
    current: dict[str, Any] = call(settings, "GET", "/api/v1/nodes/" + node)
    for c in current.get("status", {}).get("conditions", []):
        if c.get("type") == settings.condition and c.get("status") == status:
            condition["lastTransitionTime"] = c.get("lastTransitionTime", now)
    patch = {"status": {"conditions": [condition]}}
    call(settings, "PATCH", f"/api/v1/nodes/{node}/status", patch, "application/strategic-merge-patch+json")
    if status == "Unknown":
        return
    drop = (settings.taint_key, settings.boot_taint_key) if status == "True" else (settings.taint_key,)
    taints = [t for t in _taints(current) if t.get("key") not in drop]
    if status == "False":
        taints.append(settings.taint)
    if taints != _taints(current):
        version = current.get("metadata", {}).get("resourceVersion")
        patch = {"metadata": {"resourceVersion": version}, "spec": {"taints": taints}}
        call(settings, "PATCH", "/api/v1/nodes/" + node, patch, "application/merge-patch+json")


def one_round(settings: SweepSettings, program: Sequence[str], node: str) -> str:
    """Judge the node once and put the verdict on it; the line the pod logs."""
    current: dict[str, Any] = call(settings, "GET", "/api/v1/nodes/" + node)
    mode = "boot" if booting(settings, current) else "sweep"
    status, reason, message = verdict(settings, program, config_of(settings, current), mode)
    apply(settings, node, status, reason, message)
    return f"{settings.condition} {status}: {message}"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucluster-health-sweep", description="GPU node health sweep on Kubernetes")
    p.add_argument("--config", required=True, help="the sweep's settings (sweep.json)")
    p.add_argument("--once", action="store_true", help="one round, then exit (1 when the API server could not be reached)")
    p.add_argument("--health-program", metavar="PATH", help="run PATH instead of the node package's health program (tests)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load(args.config)
    except HealthConfigError as exc:
        sys.stderr.write(f"gpucluster-health-sweep: {exc}\n")
        return EXIT_CANNOT_RUN
    node = os.environ.get("NODE_NAME", "")
    if not node:
        sys.stderr.write("gpucluster-health-sweep: NODE_NAME is not set (the DaemonSet sets it from spec.nodeName)\n")
        return EXIT_CANNOT_RUN
    program = [args.health_program] if args.health_program else health_program(settings)
    while True:
        try:
            print(one_round(settings, program, node), flush=True)
        except Exception as exc:  # the API server may be away for a while: try again next round
            print(f"could not update node {node}: {exc}", file=sys.stderr, flush=True)
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(settings.interval_seconds)


if __name__ == "__main__":
    sys.exit(main())
