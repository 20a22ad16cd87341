# pyright: strict
"""XID history from the kernel log, each XID judged by its class.

NVML only reports XIDs to a listener that was registered when they happened; the record of what
happened since boot is the driver's kernel log line ``NVRM: Xid (PCI:0000:53:00): 79, pid=…, …``.
Reading since boot is the right window: a reboot clears both the fault and the log, so a reboot-class
XID asks for exactly one reboot and a recurrence shows up again.

Classes (docs/health.md lists the sources): ``replace`` — the GPU or its links are broken (fallen off
the bus, NVLink, GSP, unrecovered ECC); ``reboot`` — a GPU reset clears it (double-bit ECC, row
remapping events, contained/uncontained memory errors, engine timeouts); ``ignore`` — the user's
program caused it (13, 31, 43, 45, 68: NVIDIA's device plugin skips these too) or it is informational.
An XID not in the table is reported and ignored.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from .config import HealthConfig
from .verdict import Check, failed, passed, skipped, worst

# XID -> (class, what NVIDIA's XID catalog calls it)
XID_CLASSES: dict[int, tuple[str, str]] = {
    13: ("ignore", "graphics engine exception (application)"),
    31: ("ignore", "GPU memory page fault (application)"),
    43: ("ignore", "GPU stopped processing (application)"),
    45: ("ignore", "preemptive cleanup (application)"),
    68: ("ignore", "video processor exception (application)"),
    92: ("ignore", "high single-bit ECC error rate"),
    48: ("reboot", "double-bit ECC error"),
    63: ("reboot", "ECC page retirement or row remapping recording event"),
    64: ("reboot", "ECC page retirement or row remapper recording failure"),
    94: ("reboot", "contained ECC error"),
    95: ("reboot", "uncontained ECC error"),
    109: ("reboot", "context switch timeout"),
    110: ("reboot", "security fault"),
    136: ("reboot", "link training failed"),
    143: ("reboot", "GPU initialization failure"),
    151: ("reboot", "key rotation error"),
    155: ("reboot", "link down"),
    156: ("reboot", "resource retirement event"),
    158: ("reboot", "GPU fatal timeout"),
    54: ("replace", "auxiliary power not connected"),
    74: ("replace", "NVLink error"),
    79: ("replace", "GPU has fallen off the bus"),
    119: ("replace", "GSP RPC timeout"),
    120: ("replace", "GSP error"),
    121: ("replace", "C2C link corrected error"),
    140: ("replace", "unrecovered ECC error"),
}

_XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)")


@dataclass(frozen=True)
class XidEvent:
    pci: str
    xid: int
    text: str

    @property
    def cls(self) -> str:
        return XID_CLASSES.get(self.xid, ("ignore", "not in the table"))[0]


def parse(text: str) -> list[XidEvent]:
    """Every XID line in kernel log text: ``dmesg``, ``journalctl -k`` and ``/dev/kmsg`` records alike."""
    events: list[XidEvent] = []
    for line in text.splitlines():
        m = _XID_RE.search(line)
        if m:
            events.append(XidEvent(m.group(1).lower(), int(m.group(2)), m.group(3).strip()[:120]))
    return events


def _read_kmsg(path: str = "/dev/kmsg") -> str | None:
    """The kernel ring buffer through /dev/kmsg, read without blocking (one record per read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    records: list[str] = []
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
            records.append(chunk.decode("utf-8", "replace").split(";", 1)[-1])
    finally:
        os.close(fd)
    return "".join(records)


def _run(argv: list[str], timeout: float) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def kernel_log(cfg: HealthConfig, timeout: float = 10.0) -> tuple[str | None, str]:
    """(text, where it came from); text None when no source could be read (not root, no journal)."""
    if cfg.kernel_log_file:
        try:
            with open(cfg.kernel_log_file, encoding="utf-8", errors="replace") as fh:
                return fh.read(), cfg.kernel_log_file
        except OSError as exc:
            return None, f"{cfg.kernel_log_file}: {exc.strerror}"
    text = _read_kmsg()
    if text is not None:
        return text, "/dev/kmsg"
    text = _run(["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "-q"], timeout)
    if text is not None:
        return text, "journalctl -k"
    text = _run(["dmesg"], timeout)
    return text, ("dmesg" if text is not None else "no kernel log readable (/dev/kmsg, journalctl -k, dmesg)")


def check_xid(cfg: HealthConfig, timeout: float = 10.0) -> Check:
    text, source = kernel_log(cfg, timeout)
    threshold = "no reboot- or replace-class XID since boot"
    if text is None:
        return skipped("xid", source, threshold=threshold)
    events = parse(text)
    counts: dict[tuple[int, str], int] = {}
    for e in events:  # one entry per XID and GPU: a job's fault loop may log thousands of lines
        counts[(e.xid, e.pci)] = counts.get((e.xid, e.pci), 0) + 1
    value = [{"xid": x, "pci": p, "class": XidEvent(p, x, "").cls, "count": n} for (x, p), n in counts.items()]
    faults = [e for e in events if e.cls != "ignore"]
    if not faults:
        note = f"{len(events)} XID(s), none a fault" if events else ""
        return passed("xid", value, threshold, note)
    action = worst([e.cls for e in faults])
    first = next(e for e in faults if e.cls == action)
    others = sorted({e.xid for e in faults} - {first.xid})
    more = f" (also {', '.join(str(x) for x in others)})" if others else ""
    what = XID_CLASSES[first.xid][1]
    return failed("xid", action, value, threshold, f"XID {first.xid} {what} on PCI:{first.pci}{more}")
