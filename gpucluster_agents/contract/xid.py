# pyright: strict
"""How each NVIDIA XID is judged, in one table both ends read: the node's health program
(:mod:`gpucluster_agents.health.xid`, which drains or replaces a node by it) and the control plane's alert rules
(render/monitoring/rules.py, which alert on the same classes). Classes: ``replace`` — the GPU or its links are broken;
``reboot`` — a GPU reset clears it; ``ignore`` — the user's program caused it, or it is informational. An XID not in
the table is ignored (docs/health.md lists the sources)."""

from __future__ import annotations

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
