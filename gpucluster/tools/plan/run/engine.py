"""Run the real stack program offline and collect what ``pulumi up`` would create.

:func:`run_plan` reads ``Pulumi.yaml`` and ``stacks/Pulumi.<stack>.yaml`` the way the Pulumi CLI
does (:mod:`~gpucluster.tools.plan.run.stackfile`), hands the config to the Pulumi runtime, installs
:mod:`gpucluster.tools.plan.run.mocks` in place of the engine and providers, and runs ``__main__.py`` inside
a stack — the same program, the same config. What it registered becomes a :class:`Plan`, with the
files it renders extracted by :mod:`~gpucluster.tools.plan.run.files`.
"""

from __future__ import annotations

import asyncio
import logging
import runpy
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.mocks import set_mocks
from pulumi.runtime.stack import run_in_stack, wait_for_rpcs
from pulumi.runtime.sync_await import _sync_await

from gpucluster.config.errors import ConfigError
from gpucluster.facts.catalog import load_catalog
from gpucluster.resolve.cost.estimate import restore_nulls
from gpucluster.tools.plan.diff.images import config_image_locks
from gpucluster.tools.plan.run.files import FILE_EXTRACTORS, summarize_binary
from gpucluster.tools.plan.run.mocks import PlanMocks
from gpucluster.tools.plan.run.monitor import RecordingMonitor, Registration
from gpucluster.tools.plan.run.placeholders import stand_ins
from gpucluster.tools.plan.run.stackfile import PROJECT_DIR, SECRET, PlanError, as_config, load_stack_config


@dataclass
class Plan:
    project: str
    stack: str
    region: str | None
    resources: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    invokes: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    """What the program logged through ``pulumi.log`` (warnings show up as findings too)."""
    placeholders: dict[str, str] = field(default_factory=dict)
    """Fake id/ARN/AMI → what it stands for (:mod:`~gpucluster.tools.plan.run.placeholders`); text plan only."""
    image_locks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The config's image locks by node group (``plan diff`` flags a locked AMI changed without a new ``lockedAt``)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def of_type(self, token: str) -> list[Registration]:
        return [r for r in self.resources if r.type == token]

    def children(self, urn: str) -> list[Registration]:
        return [r for r in self.resources if r.parent == urn]

    def by_name(self, name: str, type_: str | None = None) -> Registration:
        """The resource named ``name`` (of type ``type_``): names are unique per type only, so a name two types
        share needs the type (a zone's subnet and its route table)."""
        found = [r for r in self.resources if r.name == name and (type_ is None or r.type == type_)]
        if len(found) > 1:
            raise KeyError(f"{name} names {len(found)} resources ({', '.join(r.type for r in found)}): pass the type")
        if not found:
            raise KeyError(name)
        return found[0]


# --- running ----------------------------------------------------------------------------------------------


def run_plan(stack: str, project_dir: Path = PROJECT_DIR, *, config_overrides: Mapping[str, Any] | None = None) -> Plan:
    """Plan ``stack``: the real ``__main__.py`` under mocks. Config errors land in ``Plan.error``.

    ``config_overrides`` (``--config``/``--config-file``) win over the stack file; keys without a
    namespace take the project's, as ``pulumi config set`` does."""
    project, config, secrets = load_stack_config(stack, project_dir)
    extra, extra_secrets = as_config(project, {str(k): v for k, v in (config_overrides or {}).items()})
    config.update(extra)
    secrets = [s for s in secrets if s not in extra] + extra_secrets
    if not (project_dir / "__main__.py").is_file():
        raise PlanError(f"no __main__.py in {project_dir}; pass --project-dir DIR (the folder with the stack program)")
    return run_program(project, stack, config, secrets, project_dir)


def run_program(
    project: str, stack: str, config: dict[str, str], secrets: list[str] | None = None, project_dir: Path = PROJECT_DIR
) -> Plan:
    """Run ``project_dir/__main__.py`` with ``config`` under the mocks."""
    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))

    def program() -> None:
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")

    return execute(program, project=project, stack=stack, config=config, secrets=secrets)


def execute(
    program: Callable[[], object],
    *,
    project: str = "gpucluster",
    stack: str = "test",
    config: Mapping[str, str] | None = None,
    secrets: list[str] | None = None,
    mocks: PlanMocks | None = None,
) -> Plan:
    """Run ``program`` inside a fresh stack under the mocks and return what it registered.

    The tests use this directly to build single components; :func:`run_program` runs the stack program.
    """
    config = dict(config or {})
    region = config.get("aws:region")
    mocks = mocks or PlanMocks(region=region or "us-east-1", catalog=load_catalog())
    monitor = RecordingMonitor(mocks)
    plan = Plan(project=project, stack=stack, region=region, image_locks=config_image_locks(config))
    _fresh_event_loop()
    logger = logging.getLogger(f"gpucluster.plan.{stack}")
    logger.propagate = False
    logger.handlers = [_ListHandler(plan.logs)]
    set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger)
    set_all_config(config, list(secrets or []))
    # set_mocks registered a throwaway stack of the same URN, whose empty outputs land asynchronously: let them
    # land now and forget them, or they may overwrite our stack's exports (one plan in five lost its outputs)
    _sync_await(wait_for_rpcs())
    monitor.forget()
    pulumi_settings.ROOT.set(None)  # run our own stack
    try:

        def body() -> None:
            program()

        _sync_await(run_in_stack(body))
    except pulumi.RunError as exc:
        plan.error = str(exc)
        cause = exc.__cause__
        if isinstance(cause, ConfigError):
            plan.findings = [f.as_dict() for f in cause.findings]
    except pulumi.InputPropertiesError as exc:  # a component's bad Args (components/_shared/edge.py): invalid config
        plan.error = str(exc)
        plan.findings = [f.as_dict() for f in getattr(exc, "findings", [])] or [
            {"level": "error", "code": "", "path": e["property_path"], "message": e["reason"], "fix": "", "value": None}
            for e in exc.errors or []
        ]
    except Exception:
        if not mocks.unanswered:
            raise
    finally:
        pulumi_settings.ROOT.set(None)
        _stop_worker_threads()
    if mocks.unanswered:  # however the program met it (a plain call, an Output's), the plan cannot go on
        raise mocks.unanswered[0]
    plan.resources = [r for r in monitor.registrations if r.type != "pulumi:pulumi:Stack"]
    stack_regs = [r for r in monitor.registrations if r.type == "pulumi:pulumi:Stack"]
    if stack_regs:
        plan.outputs = _plain(monitor.outputs.get(stack_regs[0].urn, {}))
        if isinstance(plan.outputs.get("estimate"), dict):
            plan.outputs["estimate"] = restore_nulls(plan.outputs["estimate"])
    if plan.ok:
        plan.findings = list(plan.outputs.get("findings", []))
    for r in plan.resources:
        r.inputs = _plain(r.inputs)
        r.state = _plain(r.state)
        extractor = FILE_EXTRACTORS.get(r.type)
        if extractor:
            plan.files.update(extractor(r))
        if r.type == "aws:s3/bucketObjectv2:BucketObjectv2":
            r.inputs = summarize_binary(r.inputs)
    plan.invokes = [token for token, _ in mocks.calls]
    plan.placeholders = {**mocks.lookups.stand_ins, **stand_ins(plan.resources, mocks.calls, mocks.region)}
    return plan


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__()
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(f"{record.levelname.lower()}: {record.getMessage()}")


def _fresh_event_loop() -> None:
    """Each plan runs on a loop of its own (closed by :func:`_stop_worker_threads`)."""
    asyncio.set_event_loop(asyncio.new_event_loop())


def _stop_worker_threads() -> None:
    """Join the executor threads the runtime ran RPCs on: each holds an event loop of its own, which
    otherwise is only collected at interpreter exit, noisily."""
    loop = asyncio.get_event_loop()
    if not loop.is_running():
        # A program stopped by an unanswered invoke leaves the runtime's RPC tasks pending: cancel and await them
        # here, or the collector prints "Task was destroyed but it is pending!" after our one-line error.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


def _plain(value: Any) -> Any:
    """Mock outputs as plain JSON values: integral floats back to ints, secrets masked."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        if "4dabf18193072939515e22adb298388d" in value:  # a serialized secret or resource reference
            sig = value["4dabf18193072939515e22adb298388d"]
            if sig == "1b47061264138c4ac30d75fd1eb44270":
                return SECRET
            return {k: _plain(v) for k, v in value.items() if k != "4dabf18193072939515e22adb298388d"}
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
