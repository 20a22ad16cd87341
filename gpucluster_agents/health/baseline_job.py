# pyright: strict
"""The re-baseline job: the batch script the head node's agent submits into a group's maintenance reservation
(``power/baseline.py``) runs this on the job's first node. It starts the health program's ``deep`` mode on
every node of the job (``srun``, one task per node, each naming its node from ``SLURMD_NODENAME``), reads each
node's verdict (``--json``: one line per node), keeps the figures the comparison needs and hands them to the
agent in the job's ``AdminComment`` (``scontrol update jobid=<id> admincomment=gpucluster-baseline:<base64
JSON>``): the head node reads it with ``scontrol show job``, so no shared file system and no bucket access from
the compute nodes is needed. The job runs as the agent's user, SlurmUser (the reservation admits only that
user), which slurmctld treats as an administrator: it may set AdminComment, which ordinary users can neither set
nor change. The commands were checked by hand with Slurm 22.05 (run as root, whose rights SlurmUser shares):
``scontrol update jobid=<id> admincomment=<base64>``, then ``scontrol -o show job`` prints ``AdminComment=<it>``.

What a node reports (:func:`node_figures`): the per-GPU HBM copy and GEMM figures, the intra-node all-reduce
bus bandwidth (nccl_pair), the verdict's action and reason. A check that skipped reports no figure.

The job runs as the agent's user (SlurmUser) with its output discarded (``--output=/dev/null``: SlurmUser may
not write under /var/log on every image, and a job whose output file cannot be opened fails); what went wrong
reaches the agent in the AdminComment (the nodes' reasons, or srun's last words).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, cast

from ..boot.helper import HEALTH_MAIN  # the health program's entry, as the boot unit and Slurm wrappers start it

MARK = "gpucluster-baseline:"
JOB_MAIN = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from gpucluster_agents.health.baseline_job import main; sys.exit(main())"
)
_BENCH = {"hbm_copy": "hbm_copy_gbps", "gemm": "gemm_tflops"}


def node_figures(verdict: dict[str, Any]) -> dict[str, Any]:
    """One node's deep verdict (its JSON) -> ``{metric: value, "action": ..., "reason": ...}``; per-GPU metrics are
    ``{gpu: value}``, the bus bandwidth a number."""
    out: dict[str, Any] = {"action": verdict.get("action", "replace"), "reason": verdict.get("reason", "")}
    for check in cast("list[dict[str, Any]]", verdict.get("checks") or []):
        name, value = check.get("name"), check.get("value")
        if str(check.get("detail") or "").startswith("skipped"):
            continue
        if name in _BENCH and isinstance(value, dict):
            out[_BENCH[str(name)]] = {str(k): float(v) for k, v in cast("dict[str, Any]", value).items()}
        elif name == "nccl_pair" and isinstance(value, (int, float)) and not isinstance(value, bool):
            out["nccl_busbw_gbps"] = float(value)
    return out


def encode(per_node: dict[str, dict[str, Any]]) -> str:
    raw = json.dumps(per_node, sort_keys=True, separators=(",", ":")).encode()
    return MARK + base64.b64encode(raw).decode()


def decode(text: str) -> dict[str, dict[str, Any]] | None:
    """The per-node figures from an AdminComment; None when it is not ours or not readable."""
    if not text.startswith(MARK):
        return None
    try:
        data = json.loads(base64.b64decode(text[len(MARK) :], validate=True))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {str(k): cast("dict[str, Any]", v) for k, v in cast("dict[str, Any]", data).items() if isinstance(v, dict)}


def collect(stdout: str) -> dict[str, dict[str, Any]]:
    """srun's merged output (one verdict JSON line per node) -> per-node figures."""
    out: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            verdict = json.loads(line)
        except ValueError:
            continue
        if isinstance(verdict, dict) and "node" in verdict:
            v = cast("dict[str, Any]", verdict)
            out[str(v["node"])] = node_figures(v)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """In the batch job: ``<python> -I -c JOB_MAIN <package dir> <slurm bin dir>``."""
    args = list(sys.argv[1:] if argv is None else argv)
    package, bin_dir = args[0], args[1]
    job = os.environ.get("SLURM_JOB_ID", "")
    nodes = os.environ.get("SLURM_JOB_NUM_NODES", "1")
    srun = [os.path.join(bin_dir, "srun"), f"--nodes={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=0"]
    cmd = [*srun, sys.executable, "-I", "-c", HEALTH_MAIN, package, "deep", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd="/")
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    figures = collect(proc.stdout)
    if not figures:
        said = " ".join(proc.stderr.split())[-200:]
        figures = {"-": {"action": "replace", "reason": f"gpucluster: no deep verdict, srun exit {proc.returncode}: {said}"}}
    scontrol = os.path.join(bin_dir, "scontrol")
    done = subprocess.run([scontrol, "update", f"jobid={job}", f"admincomment={encode(figures)}"], check=False)
    return 0 if done.returncode == 0 else 1
