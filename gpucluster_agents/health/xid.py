# pyright: strict
"""XID history from the kernel's own log records, each XID judged by its class.

NVML only reports XIDs to a listener that was registered when they happened; the record of what
happened since boot is the driver's kernel log record ``NVRM: Xid (PCI:0000:53:00): 79, pid=…, …``.
Reading since boot is the right window: a reboot clears both the fault and the log, so a reboot-class
XID asks for exactly one reboot and a recurrence shows up again.

Evidence rule (docs/health.md "XID evidence"): the kernel log also carries text users choose. A
segfaulting program's report starts with its name and quotes its file name; a process can rename
itself; userspace can write records into /dev/kmsg. So an XID counts only when
- the record is the kernel's own: facility ``kern`` (0) in /dev/kmsg (the kernel gives every record
  written from userspace a non-zero facility, root's included), or ``_TRANSPORT=kernel`` with facility 0
  in the journal; plain ``dmesg`` text is never read (it turns an escaped newline inside a record, e.g.
  in a file name, into a line that looks like a record of its own);
- its message *starts* with the driver's exact form ``NVRM: Xid (PCI:<domain>:<bus>:<dev>): <n>, …``
  (a process name is at most 15 characters, ``NVRM: Xid (PCI:`` exactly, and the kernel text after it
  never continues the form);
- the PCI address is one of this node's GPUs: one NVML reports, or an NVIDIA display/3D controller in
  the kernel's PCI device list (sysfs), which still lists the GPU that fell off the bus when NVML can no
  longer open it. An XID naming any other address is reported in the check's value as ignored.
Records carrying XID text that fail the rule are counted in the check's detail, never judged.

Classes (docs/health.md lists the sources): ``replace`` — the GPU or its links are broken (fallen off
the bus, NVLink, GSP, unrecovered ECC); ``reboot`` — a GPU reset clears it (double-bit ECC, row
remapping events, contained/uncontained memory errors, engine timeouts); ``ignore`` — the user's
program caused it (13, 31, 43, 45, 68: NVIDIA's device plugin skips these too) or it is informational.
An XID not in the table is reported and ignored.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from ..contract.health import HealthConfig
from ..contract.xid import XID_CLASSES
from .nvml import NodeSnapshot
from .verdict import Check, failed, passed, skipped, worst

KMSG = "/dev/kmsg"  # the kernel's structured log: one record per read()
JOURNAL = ("journalctl", "-k", "-b", "-o", "json", "--no-pager", "-q")  # this boot's kernel records, as JSON
JOURNAL_SOURCE = "journalctl -k"  # how a verdict names it
MARKER = "NVRM: Xid"  # text that makes a record worth a look (and, when it fails the rule, worth counting)
KERN = 0  # syslog facility of the kernel's own records

_PCI = r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})"
# The driver's record, from the first character of the message: no search, no prefix.
_XID_RE = re.compile(r"NVRM: Xid \(PCI:" + _PCI + r"(?:\.[0-7])?\): (\d{1,5})(?:, ?(.*))?\Z", re.S)
_PCI_RE = re.compile(_PCI + r"(?:\.[0-7])?\Z")
# /dev/kmsg: "<prio>,<seq>,<usec>[,<flags>…];<message>"; prio = facility * 8 + level. Dictionary lines
# (" SUBSYSTEM=pci") that follow a record start with a space and never match.
_KMSG_RE = re.compile(r"(\d{1,4}),(\d+),(\d+)(?:,[^;]*)?;(.*)\Z")
_GPU_CLASSES = ("0x0300", "0x0302")  # PCI display controller (VGA) and 3D controller: every NVIDIA GPU
_NVIDIA = "0x10de"


@dataclass(frozen=True)
class Record:
    """One kernel log record: whether the kernel itself wrote it (facility kern), and its message."""

    kernel: bool
    message: str


@dataclass(frozen=True)
class XidEvent:
    pci: str  # "0000:53:00": domain, bus, device, as the driver prints them
    xid: int
    text: str

    @property
    def cls(self) -> str:
        return XID_CLASSES.get(self.xid, ("ignore", "not in the table"))[0]


def kmsg_records(text: str) -> list[Record]:
    """Records in /dev/kmsg's format, one per line (the kernel escapes a newline inside a message)."""
    out: list[Record] = []
    for line in text.splitlines():
        m = _KMSG_RE.match(line)
        if m:
            out.append(Record(int(m.group(1)) >> 3 == KERN, m.group(4)))
    return out


def _journal_kernel(entry: dict[str, Any]) -> bool:
    """journald read it from /dev/kmsg with the kernel's facility. journald 240+ writes SYSLOG_FACILITY=0
    for those; older ones write no facility for them (only SYSLOG_IDENTIFIER=kernel), and always one for a
    record that came from userspace."""
    if entry.get("_TRANSPORT") != "kernel":
        return False
    facility = entry.get("SYSLOG_FACILITY")
    if facility is None:
        return entry.get("SYSLOG_IDENTIFIER") == "kernel"
    return facility == str(KERN)


def _field(value: Any) -> str | None:
    """A journal JSON field: a string, or an array of bytes when it is not printable UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in cast("list[Any]", value)):
        return bytes(cast("list[int]", value)).decode("utf-8", "replace")
    return None


def journal_records(text: str) -> list[Record]:
    """Records of ``journalctl -o json``: one JSON object per line."""
    out: list[Record] = []
    for line in text.splitlines():
        if not line.lstrip().startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        doc = cast("dict[str, Any]", entry)
        message = _field(doc.get("MESSAGE"))
        if message is not None:
            out.append(Record(_journal_kernel(doc), message))
    return out


def records(text: str) -> list[Record]:
    """A kernel log file (``kernel_log_file``): /dev/kmsg records and journal JSON lines, in any mix."""
    return kmsg_records(text) + journal_records(text)


def pci_key(address: str) -> str | None:
    """``0000:53:00`` for the kernel's ``0000:53:00``, NVML's ``00000000:53:00.0`` and sysfs's ``0000:53:00.0``."""
    m = _PCI_RE.match(address.strip())
    if not m:
        return None
    return f"{int(m.group(1), 16):04x}:{m.group(2).lower()}:{m.group(3).lower()}"


def xid_of(record: Record) -> XidEvent | None:
    """The XID a record reports, when it is the kernel's and in the driver's exact form; else None."""
    if not record.kernel:
        return None
    m = _XID_RE.match(record.message)
    if not m:
        return None
    pci = f"{int(m.group(1), 16):04x}:{m.group(2).lower()}:{m.group(3).lower()}"
    return XidEvent(pci, int(m.group(4)), (m.group(5) or "").strip()[:120])


def parse(recs: Iterable[Record]) -> tuple[list[XidEvent], int]:
    """(the XIDs, how many records carried XID text but failed the evidence rule)."""
    events: list[XidEvent] = []
    refused = 0
    for r in recs:
        e = xid_of(r)
        if e is not None:
            events.append(e)
        elif MARKER in r.message:
            refused += 1
    return events, refused


def sysfs_gpus(sysfs_root: str) -> set[str]:
    """NVIDIA display/3D controllers in the kernel's PCI device list (``bus/pci/devices/*``)."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    try:
        names = os.listdir(base)
    except OSError:
        return set()
    found: set[str] = set()
    for name in names:
        try:
            with open(os.path.join(base, name, "vendor"), encoding="ascii") as fh:
                vendor = fh.read().strip().lower()
            with open(os.path.join(base, name, "class"), encoding="ascii") as fh:
                pci_class = fh.read().strip().lower()
        except (OSError, ValueError):
            continue
        key = pci_key(name)
        if key and vendor == _NVIDIA and pci_class.startswith(_GPU_CLASSES):
            found.add(key)
    return found


def node_gpus(cfg: HealthConfig, snap: NodeSnapshot | None) -> frozenset[str]:
    """This node's GPUs by PCI address: NVML's bus IDs, and NVIDIA GPUs in sysfs (a GPU NVML lost is
    still there). Neither can be written by a user."""
    found = sysfs_gpus(cfg.sysfs_root)
    for g in snap.gpus if snap is not None else ():
        key = pci_key(str(g.bus_id.value)) if g.bus_id.ok else None
        if key:
            found.add(key)
    return frozenset(found)


def _read_kmsg(path: str) -> str | None:
    """The kernel ring buffer through /dev/kmsg, read without blocking, records whole (headers kept)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    chunks: list[str] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break  # the end of the buffer
            except OSError as exc:
                if exc.errno == 32:  # EPIPE: a record was overwritten while reading; go on
                    continue
                break
            if not chunk:
                break
            chunks.append(chunk.decode("utf-8", "replace"))
    finally:
        os.close(fd)
    return "".join(chunks)


def _run(argv: tuple[str, ...], timeout: float) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def kernel_log(cfg: HealthConfig, timeout: float = 10.0) -> tuple[list[Record] | None, str]:
    """(records, where they came from); None when no source could be read (not root, no journal)."""
    if cfg.kernel_log_file:
        try:
            with open(cfg.kernel_log_file, encoding="utf-8", errors="replace") as fh:
                found = records(fh.read())
        except OSError as exc:
            return None, f"{cfg.kernel_log_file}: {exc.strerror}"
        if not found:
            return None, f"{cfg.kernel_log_file} holds no kernel log records (/dev/kmsg or journal JSON lines)"
        return found, cfg.kernel_log_file
    text = _read_kmsg(KMSG)
    if text is not None:
        return kmsg_records(text), KMSG
    text = _run(JOURNAL, timeout)
    if text is not None:
        return journal_records(text), JOURNAL_SOURCE
    return None, f"no kernel log readable ({KMSG}, journalctl -k)"


def _notes(events: list[XidEvent], off_node: int, refused: int) -> list[str]:
    notes: list[str] = []
    if events:
        notes.append(f"{len(events)} XID(s), none a fault")
    if off_node:
        notes.append(f"{off_node} on a PCI address that is not this node's GPU: ignored")
    if refused:
        notes.append(f"{refused} record(s) with XID text refused: not the driver's kernel record")
    return notes


def check_xid(cfg: HealthConfig, gpus: frozenset[str], timeout: float = 10.0) -> Check:
    """``gpus``: this node's GPU PCI addresses (:func:`node_gpus`)."""
    recs, source = kernel_log(cfg, timeout)
    threshold = "no reboot- or replace-class XID on this node's GPUs since boot"
    if recs is None:
        return skipped("xid", source, threshold=threshold)
    events, refused = parse(recs)
    counts: dict[tuple[int, str], int] = {}
    for e in events:  # one entry per XID and GPU: a job's fault loop may log thousands of records
        counts[(e.xid, e.pci)] = counts.get((e.xid, e.pci), 0) + 1
    value: list[dict[str, Any]] = []
    for (x, p), n in counts.items():
        entry: dict[str, Any] = {"xid": x, "pci": p, "class": XidEvent(p, x, "").cls, "count": n}
        if p not in gpus:
            entry["ignored"] = "not a GPU of this node"
        value.append(entry)
    on_node = [e for e in events if e.pci in gpus]
    faults = [e for e in on_node if e.cls != "ignore"]
    off_node = len(events) - len(on_node)
    if not faults:
        return passed("xid", value, threshold, "; ".join(_notes(on_node, off_node, refused)))
    action = worst([e.cls for e in faults])
    first = next(e for e in faults if e.cls == action)
    others = sorted({e.xid for e in faults} - {first.xid})
    more = f" (also {', '.join(str(x) for x in others)})" if others else ""
    what = XID_CLASSES[first.xid][1]
    return failed("xid", action, value, threshold, f"XID {first.xid} {what} on PCI:{first.pci}{more}")
