# pyright: strict, reportMissingTypeStubs=false
"""Re-baseline a node group on a new image, in the maintenance pass, before the roll goes past its first nodes.

Per group with ``updates.baseline`` covering it, each pass (``Roll`` calls :meth:`Rebaseline.step` with the
group's target, the image its launch template names now):

1. The image already has a result in the bucket (``baselines.py``): its verdict is the gate, nothing runs.
2. Else ``nodes`` (2) nodes that would run the new image are taken: idle nodes whose instance runs it, else
   powered-down nodes (their next boot launches the current template version). Too few yet: the gate says
   *wait* and lets the roll drain just enough old nodes to make them.
3. ``scontrol create reservation ReservationName=gpucluster-baseline-<group> Flags=MAINT,IGNORE_JOBS
   Nodes=<them> StartTime=now Duration=<duration_minutes> Users=<the agent's user>`` (the agent runs as
   SlurmUser, which submits the job; no one else's job starts there), then ``sbatch --reservation`` of the deep
   job (``health/baseline_job.py``) onto exactly those nodes: slurmctld powers them up on the new image if
   needed. The job reports each node's figures in its AdminComment.
4. Once the job ended: the figures are compared with the group's baseline image's (``baseline_verdict``),
   stored per image, the reservation deleted. A regression, a node fault in the deep verdicts, a job that ended
   without figures or ran past ``duration_minutes`` fails the image: the gate says *failed* and the roll stops.

While waiting the roll holds back (at most the nodes the re-baseline needs are drained). State:
``state_dir/baseline.json`` = ``{group: {image, phase, nodes, job, since, why}}``, written before each action.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast

from ..contract import AgentConfig, NodeGroup, hostlist
from ..contract.baseline import Baseline, Store
from ..health.baseline_job import JOB_MAIN, decode
from .baselines import Verdict, baseline_verdict, group_figures
from .ec2 import Instance
from .slurm import NodeState, Slurm
from .state import read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

FILE = "baseline.json"
UNANSWERED = 3  # passes without an answer about the job before it counts as gone
_BAD = ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWERING_DOWN", "POWERING_UP", "COMPLETING", "MAINTENANCE")
_FIELD_RE = re.compile(r"(?:^|\s)(JobState|AdminComment)=(\S*)")
_ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


@dataclass(frozen=True)
class Gate:
    """What the roll may do for a group: ``go``; ``wait`` (drain at most ``room`` more); ``failed`` (stop)."""

    status: str
    why: str = ""
    room: int = 0


GO = Gate("go")


def job_fields(text: str) -> dict[str, str]:
    """``JobState`` and ``AdminComment`` from ``scontrol -o show job`` (one line; AdminComment only once set)."""
    return dict(_FIELD_RE.findall(text))


def agent_user() -> str:
    """Who submits the deep job, so whom the reservation admits: the agent's own user (SlurmUser on the head node)."""
    return pwd.getpwuid(os.getuid()).pw_name


def utc_text(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def reservation_name(group: str) -> str:
    return f"gpucluster-baseline-{group}"


def candidates(g: NodeGroup, nodes: list[str], live: dict[str, Instance], image: str, states: dict[str, NodeState]) -> list[str]:
    """Nodes that run, or would boot, the new image and take no job: idle on it first, then powered down."""
    up = [n for n in nodes if n in live and live[n].image_id == image and states[n].has("IDLE") and not _bad(states[n])]
    down = [n for n in nodes if n not in live and states[n].powered_down and not _bad(states[n], down_ok=True)]
    return up + down


def _bad(st: NodeState, down_ok: bool = False) -> bool:
    return any(st.has(f) for f in _BAD) or (not down_ok and st.has("POWERED_DOWN"))


class Rebaseline:
    def __init__(
        self,
        cfg: AgentConfig,
        spec: Baseline,
        slurm: Slurm,
        state_dir: str,
        store: Store,
        now_text: Callable[[float], str] | None = None,
    ) -> None:
        self.cfg, self.spec, self.slurm, self.store = cfg, spec, slurm, store
        self.path = os.path.join(state_dir, FILE)
        raw = read_json(self.path)
        self.groups: dict[str, dict[str, Any]] = cast("dict[str, dict[str, Any]]", raw) if isinstance(raw, dict) else {}
        self.now_text: Callable[[float], str] = now_text or utc_text

    def save(self) -> None:
        write_json_atomic(self.path, self.groups)

    def step(
        self,
        g: NodeGroup,
        image: str,
        nodes: list[str],
        live: dict[str, Instance],
        held: int,
        states: dict[str, NodeState],
        now: float,
    ) -> Gate:
        """The gate for ``g`` whose target image is ``image``; ``held``: nodes the roll holds drained for it."""
        if not image or not self.spec.covers(g.name):
            return GO
        gate = self._step(g, image, nodes, live, held, states, now)
        self.save()
        return gate

    def _step(
        self,
        g: NodeGroup,
        image: str,
        nodes: list[str],
        live: dict[str, Instance],
        held: int,
        states: dict[str, NodeState],
        now: float,
    ) -> Gate:
        rec = self.groups.get(g.name)
        if rec is not None and rec.get("release"):  # a delete refused earlier (the job was still ending): again
            self._release(g.name, rec)
        if rec is None or rec.get("image") != image:
            release = False
            if rec is not None and rec.get("phase") == "running":
                self._end(g.name, rec, cancel=True)  # the target moved on: the old image's job is moot
            if rec is not None:
                release = bool(rec.get("release"))
            rec = {"image": image, "phase": "new", "since": now, **({"release": True} if release else {})}
            self.groups[g.name] = rec
        if rec["phase"] == "reserving":  # a crash between saving and submitting: a reservation (and job) may exist
            rec.update(phase="new", release=True)
            self._release(g.name, rec)
        if rec["phase"] == "new" and rec.get("release"):
            return Gate("wait", "the previous re-baseline's reservation is not deleted yet", 0)
        if rec["phase"] == "new":
            try:
                done = self.store.result(g.name, image)
            except Exception as exc:  # S3 unreachable: wait, retry next pass
                log.error("api GetObject baseline group=%s image=%s failed: %s", g.name, image, exc)
                return Gate("wait", "the baseline store is unreachable", 0)
            if done is not None:
                verdict = cast("dict[str, Any]", done.get("verdict") or {})
                rec.update(phase="done", ok=bool(verdict.get("ok")), why=str(verdict.get("why") or ""))
            else:
                return self._start(g, rec, nodes, live, held, states, now)
        if rec["phase"] == "running":
            self._poll(g, rec, now)
        if rec["phase"] == "done":
            return GO if rec.get("ok") else Gate("failed", f"re-baseline of {image} failed: {rec.get('why')}")
        return Gate("wait", f"re-baseline of {image} running on {rec.get('nodes')}", 0)

    # ------------------------------------------------------------------ start
    def _start(
        self,
        g: NodeGroup,
        rec: dict[str, Any],
        nodes: list[str],
        live: dict[str, Instance],
        held: int,
        states: dict[str, NodeState],
        now: float,
    ) -> Gate:
        want = min(self.spec.nodes, len(nodes))
        ready = candidates(g, nodes, live, str(rec["image"]), states)
        if len(ready) < want:
            room = max(0, want - len(ready) - held)
            log.info("decision baseline-wait group=%s: %d of %d nodes on the new image ready", g.name, len(ready), want)
            return Gate("wait", f"waiting for {want} nodes on {rec['image']}", room)
        chosen = sorted(ready[:want], key=hostlist.order_key)
        rec.update(phase="reserving", nodes=hostlist.compress(chosen))
        self.save()
        name, user = reservation_name(g.name), agent_user()
        ok, _ = self.slurm.run(
            ["create", "reservation", f"ReservationName={name}", "Flags=MAINT,IGNORE_JOBS", f"Nodes={rec['nodes']}",
             "StartTime=now", f"Duration={self.spec.duration_minutes}", f"Users={user}"]
        )  # fmt: skip
        job = self._submit(g, rec) if ok else None
        if job is None:
            rec["phase"] = "new"
            self.slurm.run(["delete", "reservation", name], quiet=True)
            return Gate("wait", "could not reserve the nodes or submit the deep job (logged); retrying", 0)
        rec.update(phase="running", job=job, started=now)
        log.info("decision baseline-start group=%s image=%s nodes=%s job=%s", g.name, rec["image"], rec["nodes"], job)
        return Gate("wait", f"re-baseline of {rec['image']} running on {rec['nodes']}", 0)

    def _submit(self, g: NodeGroup, rec: dict[str, Any]) -> str | None:
        count = len(hostlist.expand(str(rec["nodes"])))
        script = f"#!/bin/sh\nexec {self.spec.python} -I -c '{JOB_MAIN}' {self.spec.package_dir} {self.cfg.slurm_bin_dir}\n"
        argv = [os.path.join(self.cfg.slurm_bin_dir, "sbatch"), "--parsable", f"--reservation={reservation_name(g.name)}",
                f"--nodelist={rec['nodes']}", f"--nodes={count}", "--exclusive", f"--job-name={reservation_name(g.name)}",
                f"--time={self.spec.duration_minutes}", "--output=/dev/null", "--chdir=/"]  # fmt: skip
        try:
            proc = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            log.error("slurm sbatch baseline group=%s failed to run: %s", g.name, exc)
            return None
        job = proc.stdout.strip().split(";")[0]
        if proc.returncode != 0 or not job.isdigit():
            log.error("slurm sbatch baseline group=%s rc=%d: %s", g.name, proc.returncode, (proc.stderr or proc.stdout).strip())
            return None
        return job

    # ------------------------------------------------------------------ follow
    def _poll(self, g: NodeGroup, rec: dict[str, Any], now: float) -> None:
        ok, out = self.slurm.run(["-o", "show", "job", str(rec["job"])], quiet=True)
        fields = job_fields(out) if ok else {}
        state = fields.get("JobState", "")
        per_node = decode(fields.get("AdminComment", ""))
        late = now - float(rec.get("started") or rec["since"]) > self.spec.duration_minutes * 60 + 600
        # no answer: slurmctld restarting, or the job aged out of it (MinJobAge); three passes in a row decide
        rec["unanswered"] = 0 if fields else int(rec.get("unanswered") or 0) + 1
        if (per_node is None and state not in _ENDED and fields) or (not fields and rec["unanswered"] < UNANSWERED):
            if late:
                why = f"the deep job {rec['job']} did not report in {self.spec.duration_minutes} min"
                self._finish(g, rec, now, {}, why, cancel=True)
            return
        if per_node is None:
            self._finish(g, rec, now, {}, f"the deep job {rec['job']} ended {state or 'and vanished'} without figures")
            return
        faults = [f"{n}: {f.get('reason')}" for n, f in sorted(per_node.items()) if f.get("action", "replace") != "none"]
        self._finish(g, rec, now, per_node, "deep check fault on " + "; ".join(faults) if faults else "")

    def _finish(
        self, g: NodeGroup, rec: dict[str, Any], now: float, per_node: dict[str, dict[str, Any]], fault: str, cancel: bool = False
    ) -> None:
        image = str(rec["image"])
        figures = group_figures(per_node)
        try:
            index = self.store.index(g.name)
            prev_id = index.get("baseline")
            prev = self.store.result(g.name, str(prev_id)) if prev_id and prev_id != image else None
        except Exception as exc:
            log.error("api GetObject baseline index group=%s failed: %s; retrying next pass", g.name, exc)
            return
        prev_figures = cast("dict[str, float]", (prev or {}).get("figures") or {}) or None
        verdict = baseline_verdict(figures, prev_figures, dict(self.spec.thresholds))
        if fault:  # a node's own deep verdict failed (hardware or image): the image does not pass either
            verdict = Verdict(False, f"{verdict.why}; {fault}" if not verdict.ok else fault, verdict.regressions)
        doc: dict[str, Any] = {
            "group": g.name, "image_id": image, "time": self.now_text(now), "job_id": rec.get("job"), "nodes": per_node,
            "figures": figures, "previous": {"image_id": prev_id, "figures": prev_figures} if prev_figures else None,
            "thresholds": dict(self.spec.thresholds), "verdict": verdict.to_dict(),
        }  # fmt: skip
        try:
            self.store.record(g.name, image, doc)
        except Exception as exc:
            log.error("api PutObject baseline group=%s image=%s failed: %s; retrying next pass", g.name, image, exc)
            return
        rec.update(phase="done", ok=verdict.ok, why=verdict.why)
        self._end(g.name, rec, cancel=cancel)
        level = logging.INFO if verdict.ok else logging.ERROR
        log.log(level, "decision baseline-%s group=%s image=%s: %s", "pass" if verdict.ok else "fail", g.name, image, verdict.why)

    def _end(self, group: str, rec: dict[str, Any], cancel: bool) -> None:
        if cancel and rec.get("job"):
            argv = [os.path.join(self.cfg.slurm_bin_dir, "scancel"), str(rec["job"])]
            try:
                subprocess.run(argv, capture_output=True, timeout=60, check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                log.error("slurm scancel %s failed to run: %s", rec["job"], exc)
        rec["release"] = True
        self._release(group, rec)

    def _release(self, group: str, rec: dict[str, Any]) -> None:
        """Delete the reservation; slurmctld refuses while a job in it has not ended ("Requested reservation is in
        use", checked with 22.05): then the next pass tries again."""
        ok, _ = self.slurm.run(["delete", "reservation", reservation_name(group)])
        if ok:
            rec.pop("release", None)


def make(cfg: AgentConfig, slurm: Slurm, state_dir: str) -> Rebaseline | None:
    """The pass when ``updates.baseline`` is set, with its own S3 client (the config's retries, region)."""
    spec = cfg.updates.baseline
    if spec is None:
        return None
    from boto3.session import Session
    from botocore.config import Config

    def client() -> Any:
        config = Config(
            region_name=cfg.region,
            retries={"mode": cfg.api_retry_mode, "total_max_attempts": cfg.api_max_attempts},
            connect_timeout=10,
            read_timeout=60,
            user_agent_extra="gpucluster-agent",
        )
        return cast(Any, Session(region_name=cfg.region).client("s3", endpoint_url=spec.endpoint_url, config=config))  # pyright: ignore[reportUnknownMemberType]

    return Rebaseline(cfg, spec, slurm, state_dir, Store(spec, client))


def status_lines(state_dir: str) -> list[str]:
    raw = read_json(os.path.join(state_dir, FILE))
    out: list[str] = []
    for name, rec in sorted(cast("dict[str, dict[str, Any]]", raw if isinstance(raw, dict) else {}).items()):
        phase = str(rec.get("phase"))
        what = ("PASSED" if rec.get("ok") else "FAILED") + f": {rec.get('why')}" if phase == "done" else phase
        out.append(f"baseline group {name}: image {rec.get('image')} {what}" + (f" (job {rec['job']})" if rec.get("job") else ""))
    return out
