# pyright: strict
"""Node names the agent knows before EC2 does (``state_dir/names.json``): instance id -> node, for the
instances of launches whose node map went to S3 (``nodemap.py``) instead of a CreateTags per instance.

- A launch adds its assignments here (right after publishing its map, before its journal entry goes).
- Every call applies them to the instances it lists, so the sweep, suspend, resume-fail, lifecycle and
  topology see those instances under their node exactly as if they carried the node-name tag.
- ``maintain`` then sets the node-name and Name tags (CreateTags, off the resume path, a bounded number
  per pass) and drops each entry once EC2 shows the tag; an entry whose instance is no longer listed is
  dropped after ``orphan_grace_seconds`` (DescribeInstances is eventually consistent).

The file and the launch journal together rebuild the inventory: a crash between the two is a journal
entry with assignments, which the sweep adopts as before.

Lost names (``recover_from_maps``): an unreadable ``names.json`` is moved aside (``names.json.corrupt-<time>``,
kept for a person) and every call looks up, in the node maps, the live instances that carry a launch token
but no name from anywhere (tag, this book, a journal assignment): what a map names goes back into the book
(and gets its tag from the next ``maintain``). An instance whose map S3 could not be read is kept, never
taken for an orphan; one whose launch has no map (or a map that does not name it) is an orphan as before.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, cast

from ..contract import TAG_NODE_NAME, AgentConfig
from .ec2 import Ec2, Instance
from .nodemap import NodeMapPublisher
from .state import clamped, write_json_atomic

log = logging.getLogger("gpucluster_agents")

TAGS_PER_PASS = 1000  # CreateTags calls one maintain pass makes at most (botocore paces throttling)


class NameBook:
    """``names.json``: {instance id: {"node": name, "since": unix time}}; change it only under the agent lock."""

    def __init__(self, state_dir: str, repair: bool = False) -> None:
        """With ``repair`` (only under the agent lock) an unreadable file is moved aside, to be rebuilt."""
        self.path = os.path.join(state_dir, "names.json")
        self.entries: dict[str, dict[str, Any]] = {}
        doc = self._read(repair)
        for iid, value in doc.items():
            if isinstance(value, dict) and isinstance(cast("dict[str, Any]", value).get("node"), str):
                self.entries[iid] = cast("dict[str, Any]", value)

    def _read(self, repair: bool) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as fh:
                raw = json.load(fh)
            if isinstance(raw, dict):
                return cast("dict[str, Any]", raw)
            problem = f"a JSON {type(raw).__name__}, not an object"
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            problem = str(exc)
        if repair:
            aside = f"{self.path}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            try:
                os.replace(self.path, aside)
            except OSError as exc:
                aside = f"nowhere ({exc})"
            log.error("names.json is unreadable (%s); set aside as %s, rebuilding it from the node maps", problem, aside)
        return {}

    def node(self, iid: str) -> str | None:
        entry = self.entries.get(iid)
        return str(entry["node"]) if entry else None

    def add(self, assignments: dict[str, str], now: float) -> None:
        for iid, node in assignments.items():
            self.entries[iid] = {"node": node, "since": now}
        self.save()

    def drop(self, ids: Iterable[str]) -> None:
        gone = [i for i in ids if self.entries.pop(i, None) is not None]
        if gone:
            self.save()

    def save(self) -> None:
        write_json_atomic(self.path, self.entries)

    def apply(self, instances: list[Instance], now: float, grace: float, prune: bool = True) -> list[Instance]:
        """``instances`` with the names of this book on those EC2 has not tagged yet. With ``prune``, entries
        EC2 now carries, and entries of instances no longer listed (after ``grace``), are dropped."""
        listed = {i.id: i for i in instances}
        done: list[str] = []
        out: list[Instance] = []
        stepped = False
        for iid, entry in self.entries.items():
            since = float(entry.get("since") or 0.0)
            if clamped(since, now, f"names.json {iid}") != since:
                entry["since"], stepped = now, True
        if prune and stepped:
            self.save()
        for inst in instances:
            node = self.node(inst.id)
            if node is None:
                out.append(inst)
            elif inst.node is None:
                out.append(replace(inst, tags={**inst.tags, TAG_NODE_NAME: node}))
            else:
                if inst.node != node:
                    log.error("names: instance %s is tagged %s, the agent named it %s; keeping the tag", inst.id, inst.node, node)
                done.append(inst.id)
                out.append(inst)
        for iid, entry in self.entries.items():
            if iid not in listed and now - float(entry.get("since") or 0.0) > grace:
                done.append(iid)
        if prune and done:
            self.drop(done)
        return out

    def untagged(self, instances: Iterable[Instance]) -> dict[str, str]:
        """{instance id: node} of the live instances listed by EC2 without their node-name tag yet."""
        return {i.id: n for i in instances if i.live and i.node is None and (n := self.node(i.id)) is not None}


def tag_lazily(ec2: Ec2, book: NameBook, listed: list[Instance]) -> int:
    """``maintain``: CreateTags node-name + Name on instances only this book names (at most TAGS_PER_PASS);
    each tagged one leaves the book. Returns how many were tagged."""
    todo = dict(sorted(book.untagged(listed).items())[:TAGS_PER_PASS])
    if not todo:
        return 0
    failed = ec2.tag_nodes(todo)
    done = [iid for iid in todo if iid not in failed]
    book.drop(done)
    log.info("decision named instances=%d by tag (node maps already named them); failed=%d", len(done), len(failed))
    return len(done)


def recover_from_maps(
    cfg: AgentConfig,
    book: NameBook,
    maps: NodeMapPublisher | None,
    instances: list[Instance],
    known: set[str],
    now: float,
) -> frozenset[str]:
    """Put back into ``book`` the names the node maps give the live instances of dynamic groups that carry a
    launch token and no name from anywhere (``known``: the ids the launch journal assigns), one GetObject per
    launch. Returns the ids whose map S3 could not be read: the sweep must not take them for orphans."""
    todo: dict[tuple[str, str], list[Instance]] = {}
    for inst in instances:
        g = cfg.group(inst.group) if inst.group else None
        if g is None or g.static or not inst.live or not inst.token or inst.node is not None or inst.id in known:
            continue
        todo.setdefault((inst.token, g.name), []).append(inst)
    if not todo or maps is None:
        return frozenset()
    found: dict[str, str] = {}
    unread: set[str] = set()
    for (token, gname), insts in sorted(todo.items()):
        nodes = maps.fetch(token, gname)
        group = cfg.group(gname)
        if nodes is None or group is None:
            unread.update(i.id for i in insts)
            log.error("names: %s kept: its node map could not be read (launch %s)", ",".join(i.id for i in insts), token)
            continue
        for inst in insts:
            node = nodes.get(inst.id)
            prefix, _, num = (node or "").rpartition("-")
            # beyond a shrunk group's max_nodes too: the instance is then a stray (drained, ended when idle)
            if node is not None and prefix == group.node_prefix and num.isdigit() and not num.startswith("0"):
                found[inst.id] = node
    if found:
        log.info("decision names recovered from node maps: %s", ",".join(f"{i}={n}" for i, n in sorted(found.items())))
        book.add(found, now)
    return frozenset(unread)
