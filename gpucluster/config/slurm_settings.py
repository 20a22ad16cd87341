"""The slurm.conf escape hatch (``gpucluster:slurm.settings``): keys gpucluster does not set, merged into the
rendered slurm.conf, and the keys it owns (refused there, each with the config section to use instead).

:data:`OWNED` lists every key the template can render; ``tests/render/test_slurm_settings.py`` renders a
cluster with every option on and fails when slurm.conf gains a key this table does not list.
"""

from __future__ import annotations

import re
import unicodedata

_GENERATED = "gpucluster sets it from the cluster (not configurable)"
_POWER = "slurm.powerSaving"
_ACCOUNTING = "slurm.accounting"
_TEAMS = "slurm.teams (and slurm.accounting)"
_HEALTH = "slurm.health"
_NODES = "nodeGroups and slurm.nodeGroups (one node line and one partition per node group)"

OWNED: dict[str, str] = {
    **dict.fromkeys(("SuspendTime", "ResumeTimeout", "SuspendTimeout", "SuspendExcParts"), _POWER),
    **dict.fromkeys(("ResumeProgram", "SuspendProgram", "ResumeFailProgram", "ResumeRate", "SuspendRate"), _POWER),
    "ClusterName": "the stack's cluster name (gpucluster:name)",
    "SrunPortRange": "slurm.loginNodes",
    **dict.fromkeys(
        ("SlurmctldHost", "SlurmUser", "AuthType", "CredType", "SlurmctldPort", "SlurmdPort", "StateSaveLocation"),
        _GENERATED,
    ),
    **dict.fromkeys(
        ("SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "MpiDefault"),
        _GENERATED,
    ),
    **dict.fromkeys(("ProctrackType", "TaskPlugin", "JobAcctGatherType", "SchedulerType", "SelectType"), _GENERATED),
    **dict.fromkeys(("SelectTypeParameters", "GresTypes", "TopologyPlugin", "ReturnToService", "TaskProlog"), _GENERATED),
    **dict.fromkeys(("PropagateResourceLimitsExcept", "JobCompType", "MailProg"), _GENERATED),
    **dict.fromkeys(("TreeWidth", "SlurmctldParameters", "CommunicationParameters"), _GENERATED + ", per Slurm version"),
    **dict.fromkeys(("JobContainerType", "PrologFlags", "PrivateData"), _GENERATED + ": it keeps users apart"),
    **dict.fromkeys(("AccountingStorageType", "AccountingStorageHost", "JobAcctGatherFrequency"), _ACCOUNTING),
    "AccountingStorageTRES": _ACCOUNTING,
    **dict.fromkeys(("AccountingStorageEnforce", "PreemptType", "PreemptMode"), _TEAMS),
    **dict.fromkeys(("PriorityType", "PriorityWeightFairshare", "PriorityWeightAge", "PriorityWeightJobSize"), _TEAMS),
    **dict.fromkeys(("PriorityWeightQOS", "PriorityMaxAge", "PriorityDecayHalfLife"), _TEAMS),
    **dict.fromkeys(("HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "Prolog"), _HEALTH),
    **dict.fromkeys(("PrologEpilogTimeout", "SchedulerParameters"), _HEALTH),
    **dict.fromkeys(("NodeName", "PartitionName", "NodeSet", "DownNodes", "TRESBillingWeights"), _NODES),
    "Include": "nothing: slurm.conf may not include other files (every line is checked before deploy)",
}
"""slurm.conf keys gpucluster renders (or refuses), each → the config section that decides it."""
_OWNED_LOWER = {k.lower(): (k, where) for k, where in OWNED.items()}
KEY_RE = re.compile(r"^[A-Z][A-Za-z0-9]{1,63}$")
"""A slurm.conf key's shape: CamelCase letters and digits (``MaxJobCount``, ``KillWait``)."""


def owned_key(key: str) -> tuple[str, str] | None:
    """``(the key as gpucluster spells it, the section that sets it)`` when gpucluster owns ``key`` (Slurm reads keys
    case-insensitively), else None."""
    return _OWNED_LOWER.get(key.lower())


def value_problem(value: str) -> str | None:
    """Why ``value`` cannot be a slurm.conf value, or None: one line, no comment, no control character."""
    if not value:
        return "it is empty"
    if "#" in value:
        return "it holds '#', which starts a comment in slurm.conf"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        return "it holds a line break or another control character"
    return None


def settings_text(value: object) -> object:
    """A YAML number or switch given as a value (``MaxJobCount: 20000``) → its text (``yes``/``no`` for switches)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return value
