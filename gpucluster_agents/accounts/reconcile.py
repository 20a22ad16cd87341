# pyright: strict
"""One reconcile pass: read slurmdbd, resolve the teams' directory groups, diff (:mod:`.plan`), apply.

Safety rules, in the order they act:
- any failed read (sacctmgr, a directory group ``getent`` cannot resolve, squeue) → nothing is removed this pass
  (adds and changes still go ahead: they lose nothing); the pass reports what it kept and why;
- slurmdbd unreachable (at the first read or in the middle of the changes) → stop at once, exit 75 (EX_TEMPFAIL:
  the systemd unit retries); the removals come last, so a pass cut short never removed anything;
- a team (or a team's user) is removed only when ``squeue`` shows no job of it pending, running, suspended or
  completing; otherwise it is kept and the reason names the jobs.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..contract.accounts import USER_RE, AccountsContract
from .plan import Plan, Step, make_plan
from .slurmdb import ReadFailed, Runner, SlurmDb, Unreachable

__all__ = ["EX_TEMPFAIL", "Outcome", "getent_members", "reconcile"]

log = logging.getLogger("gpucluster_agents.accounts")

EX_OK = 0
EX_FAILED = 1
EX_TEMPFAIL = 75

Members = Callable[[str], Optional[list[str]]]
"""group name → its members (``getent group``), or None when the group cannot be resolved."""


def getent_members(runner: Runner, getent: str = "/usr/bin/getent") -> Members:
    """Members of a directory group as the head node's NSS (sssd) lists them: ``getent group NAME``'s 4th field.
    A group's primary-group members are not listed there (NSS does not enumerate them): declare them as users."""

    def members(group: str) -> list[str] | None:
        try:
            res = runner([getent, "group", group], None)
        except OSError:
            return None
        if res.rc != 0:
            return None
        fields = res.stdout.strip().split("\n")[0].split(":")
        if len(fields) < 4:
            return None
        return [m.strip() for m in fields[3].split(",") if m.strip()]

    return members


@dataclass
class Outcome:
    status: int
    changes: list[str] = field(default_factory=lambda: [])
    kept: list[str] = field(default_factory=lambda: [])
    planned: Plan | None = None

    def summary(self) -> str:
        reasons = "; ".join(self.kept)
        return f"accounts: {len(self.changes)} changes, {len(self.kept)} kept" + (f" ({reasons})" if reasons else "")


def _resolve(contract: AccountsContract, members: Members) -> tuple[dict[str, list[str]], list[str]]:
    groups: dict[str, list[str]] = {}
    failed: list[str] = []
    for name in dict.fromkeys(g for a in contract.accounts for g in a.groups):
        found = members(name)
        if found is None:
            failed.append(name)
            continue
        bad = [m for m in found if not USER_RE.match(m)]
        if bad:
            log.warning("group %s: members %s are not user names Slurm takes: left out", name, ", ".join(bad))
        groups[name] = [m for m in found if USER_RE.match(m)]
    return groups, failed


def _blocked(step: Step, jobs: dict[str, list[tuple[str, str]]]) -> str | None:
    """Why a removal may not run now (its team's or users' jobs), else None."""
    if step.removes is None:
        return None  # not a removal
    account, users = step.removes
    if not account:
        return None
    active = [(job, user) for job, user in jobs.get(account, []) if not users or user in users]
    if not active:
        return None
    ids = ", ".join(job for job, _ in active[:5]) + (" …" if len(active) > 5 else "")
    who = f"users {', '.join(sorted({u for _, u in active}))} of " if users else ""
    return f"{who}{account} not removed: {len(active)} pending or running jobs ({ids})"


def _apply(db: SlurmDb, step: Step) -> None:
    if step.load_text is None:
        db.change(*step.args)
        return
    fd, path = tempfile.mkstemp(prefix="gpucluster-accounts-", suffix=".cfg")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(step.load_text)
        db.change(*(a.replace("{load_file}", path) for a in step.args))
    finally:
        os.unlink(path)


def reconcile(contract: AccountsContract, db: SlurmDb, members: Members, dry_run: bool = False) -> Outcome:
    """Bring slurmdbd in step with ``contract``; the returned status is the command's exit status."""
    try:
        state = db.read(contract.cluster)
    except Unreachable as exc:
        log.error("slurmdbd unreachable, nothing changed: %s", exc)
        return Outcome(EX_TEMPFAIL, kept=["slurmdbd unreachable"])
    except ReadFailed as exc:
        log.error("could not read the accounts, nothing changed: %s", exc)
        return Outcome(EX_FAILED, kept=[str(exc)])
    groups, failed = _resolve(contract, members)
    plan = make_plan(contract, state, groups)
    out = Outcome(EX_OK, kept=list(plan.kept), planned=plan)
    no_removal = [f"directory group {g} not resolved: no user or team removed" for g in failed]
    jobs: dict[str, list[tuple[str, str]]] = {}
    if any(s.removes for s in plan.steps) and not no_removal:
        try:
            jobs = db.active_jobs()
        except (Unreachable, ReadFailed) as exc:
            no_removal.append(f"jobs not readable ({exc}): no user or team removed")
    out.kept.extend(no_removal)
    for step in plan.steps:
        if step.removes is not None:
            if no_removal or out.status != EX_OK:
                continue
            why = _blocked(step, jobs)
            if why:
                if why not in out.kept:  # a team's steps (its users, then itself) share one reason
                    log.info("kept: %s", why)
                    out.kept.append(why)
                continue
        if dry_run:
            for line in step.changes:
                log.info("would change: %s", line)
            out.changes.extend(step.changes)
            continue
        try:
            _apply(db, step)
        except Unreachable as exc:
            log.error("slurmdbd unreachable after %d changes; stopping, nothing removed: %s", len(out.changes), exc)
            out.status = EX_TEMPFAIL
            out.kept.append("slurmdbd unreachable: the pass stopped")
            break
        except ReadFailed as exc:
            log.error("change refused, removals skipped: %s", exc)
            out.status = EX_FAILED
            out.kept.append(f"refused: {exc}")
            continue
        for line in step.changes:
            log.info("changed: %s", line)
        out.changes.extend(step.changes)
    log.info("%s", out.summary())
    return out
