# pyright: strict
"""One run of a mode: the mode's checks in order (cheap first) within its time budget, into a verdict.

NVML is read once per run, only when the mode has an NVML check or the xid check (whose XIDs count only
on this node's GPUs, by NVML's PCI addresses) and the node has GPUs. A check that
would start after the budget is spent is skipped and says so: HealthCheckProgram is killed at 60 s and
a verdict that never arrives drains nothing, so a late slow check must give way to a timely answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ..contract.health import HealthConfig
from . import deep_checks, host_checks, xid
from .fake_nvml import FakeNvml
from .gpu_checks import NVML_CHECKS
from .nvml import NodeSnapshot, load_binding, snapshot
from .verdict import Check, Verdict, skipped


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(
    cfg: HealthConfig,
    mode: str,
    node: str,
    binding: Any = None,
    now: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Verdict:
    """The verdict of ``mode`` on this node. ``binding``: an NVML module (default: :func:`load_binding`,
    which raises NvmlUnavailable when nvidia-ml-py is missing on a GPU node)."""
    spec = cfg.mode(mode)
    deadline = clock() + spec.budget_seconds
    checks: list[Check] = []
    snap: NodeSnapshot | None = None
    # the xid check reads NVML too: an XID counts only on a PCI address that is one of this node's GPUs
    needs_nvml = cfg.gpu_count > 0 and any(c in NVML_CHECKS or c == "xid" for c in spec.checks)
    if needs_nvml and binding is None:
        binding = load_binding()
    fake = binding if isinstance(binding, FakeNvml) else None
    for name in spec.checks:
        left = deadline - clock()
        if left <= 0:
            checks.append(skipped(name, f"the {mode} budget of {spec.budget_seconds} s was spent"))
            continue
        timeout = max(1.0, left)
        if name in NVML_CHECKS:
            if cfg.gpu_count == 0:
                checks.append(skipped(name, "no GPUs expected on this node"))
                continue
            if snap is None:
                snap = snapshot(binding)
            if snap.init_error and name != "driver":
                checks.append(skipped(name, "NVML did not start"))
                continue
            checks.append(NVML_CHECKS[name](cfg, snap))
        elif name == "xid":
            if snap is None and needs_nvml:
                snap = snapshot(binding)
            checks.append(xid.check_xid(cfg, xid.node_gpus(cfg, snap), timeout))
        elif name == "efa":
            checks.append(host_checks.check_efa(cfg, timeout))
        elif name == "shared_fs":
            checks.append(host_checks.check_shared_fs(cfg))
        elif cfg.gpu_count == 0:
            checks.append(skipped(name, "no GPUs expected on this node"))
        elif name == "hbm_copy":
            checks.append(deep_checks.check_hbm_copy(cfg, fake))
        elif name == "gemm":
            checks.append(deep_checks.check_gemm(cfg, fake))
        elif name == "dcgm_diag":
            checks.append(deep_checks.check_dcgm_diag(cfg, timeout))
        elif name == "nccl_pair":
            checks.append(deep_checks.check_nccl_pair(cfg, timeout))
        else:  # the config parser only lets known checks through
            raise AssertionError(name)
    return Verdict(node=node, mode=mode, time=now or utc_now(), checks=tuple(checks))
