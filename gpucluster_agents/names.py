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
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, cast

from .contract import TAG_NODE_NAME
from .ec2 import Ec2, Instance
from .state import read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

TAGS_PER_PASS = 1000  # CreateTags calls one maintain pass makes at most (botocore paces throttling)


class NameBook:
    """``names.json``: {instance id: {"node": name, "since": unix time}}; change it only under the agent lock."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, "names.json")
        raw = read_json(self.path)
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        self.entries: dict[str, dict[str, Any]] = {}
        for iid, value in doc.items():
            if isinstance(value, dict) and isinstance(cast("dict[str, Any]", value).get("node"), str):
                self.entries[iid] = cast("dict[str, Any]", value)

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
