"""The slurm.conf escape hatch (``gpucluster:slurm.settings``): an allow list of keys a stack may set, merged into the
rendered slurm.conf, and the keys gpucluster owns (each with the config section that sets it instead).

A key that is neither owned nor allowed is refused: a hatch that let through whatever gpucluster did not set would
let a stack name a program, a plugin, a user or an authentication method (``Epilog=/fsx/shared/epilog.sh`` runs as
root on every compute node). :data:`ALLOWED` holds only numbers, switches and levels that tune limits, timeouts and
logging, each with the reason it is safe. The config checks (``config/checks/slurm/teams.py``) refuse the rest when
the stack loads; the policy rule ``slurm-conf-allowed-keys`` (``gpucluster/policy/slurm_rules.py``) reads the
rendered slurm.conf for the same rule. This module is a room of its own (standard library only) so that the policy
pack can read it without the config model.

:data:`OWNED` lists every key the template can render; ``tests/render/slurm/test_slurm_teams_render.py`` renders a cluster
with every option on and fails when slurm.conf gains a key this table does not list.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from typing import NamedTuple

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
    "Epilog": "slurm.containers (the container epilog)",
    **dict.fromkeys(("NodeName", "PartitionName", "NodeSet", "DownNodes", "TRESBillingWeights"), _NODES),
    "Include": "nothing: slurm.conf may not include other files (every line is checked before deploy)",
}
"""slurm.conf keys gpucluster renders (or refuses), each → the config section that decides it."""

_LIMIT = "a number: how much slurmctld keeps or a job may ask for; it names no file, program or user"
_MEMORY = "a default or cap in megabytes (a partition's own value wins); it names no file, program or user"
_TIMER = "a number of seconds (or minutes) Slurm waits; it names no file, program or user"
_LEVEL = "a log level or format of the daemons' own logs (root-owned files gpucluster names)"
ALLOWED: dict[str, str] = {
    "MaxJobCount": _LIMIT,
    "MaxArraySize": _LIMIT,
    "MaxStepCount": _LIMIT,
    "MaxTasksPerNode": _LIMIT,
    "FirstJobId": "the first job id slurmctld hands out (a number)",
    "MaxJobId": "the last job id before ids wrap (a number)",
    "DefMemPerCPU": _MEMORY,
    "DefMemPerGPU": _MEMORY,
    "MaxMemPerNode": _MEMORY,
    "DefCpuPerGPU": "CPUs a job gets per GPU when it asks for none (a number)",
    "EnforcePartLimits": "when a job over a partition's limits is refused (ALL, ANY or NO): stricter or looser "
    "submission checks, not who may run what (the teams' limits are slurmdbd's)",
    "KillWait": _TIMER,
    "InactiveLimit": _TIMER,
    "MinJobAge": _TIMER,
    "OverTimeLimit": _TIMER,
    "WaitTime": _TIMER,
    "MessageTimeout": _TIMER,
    "SlurmctldTimeout": _TIMER,
    "SlurmdTimeout": _TIMER,
    "UnkillableStepTimeout": _TIMER,
    "BatchStartTimeout": _TIMER,
    "CompleteWait": _TIMER,
    "GetEnvTimeout": _TIMER,
    "EioTimeout": _TIMER,
    "TCPTimeout": _TIMER,
    "ResvOverRun": _TIMER,
    "KillOnBadExit": "whether a step ends when one task exits non-zero (0 or 1)",
    "JobRequeue": "whether batch jobs are requeued by default (0 or 1)",
    "RequeueExit": "exit codes that requeue a job (numbers)",
    "RequeueExitHold": "exit codes that requeue a job held (numbers)",
    "DisableRootJobs": "whether root may run jobs (YES refuses them): it can only take a right away",
    "VSizeFactor": "a job's virtual memory cap as a percentage of its real one (a number)",
    "SlurmctldDebug": _LEVEL,
    "SlurmdDebug": _LEVEL,
    "SlurmctldSyslogDebug": _LEVEL,
    "SlurmdSyslogDebug": _LEVEL,
    "LogTimeFormat": _LEVEL,
    "DebugFlags": "extra subsystems slurmctld and slurmd log (names of Slurm's own subsystems)",
    "Licenses": "named counters jobs can reserve (name:count); slurmctld only counts them",
}
"""slurm.conf keys a stack may set in ``slurm.settings``, each → why it is safe: none names a program, a plugin, a
user, a file or an authentication method, and none is one gpucluster decides."""

_PROGRAM = "a program Slurm runs as root on the nodes (or as SlurmUser on the head node)"
_PLUGIN = "a plugin or plugin configuration Slurm loads into daemons that run as root"
CODE: dict[str, str] = {
    **dict.fromkeys(("TaskEpilog", "PrologSlurmctld", "EpilogSlurmctld", "SrunProlog", "SrunEpilog"), _PROGRAM),
    **dict.fromkeys(("UnkillableStepProgram", "RebootProgram", "ResvProlog", "ResvEpilog", "JobCompLoc"), _PROGRAM),
    **dict.fromkeys(("SlurmctldPrimaryOnProg", "SlurmctldPrimaryOffProg"), _PROGRAM),
    **dict.fromkeys(("PlugStackConfig", "PluginDir", "JobSubmitPlugins", "CliFilterPlugins", "SlurmctldPlugstack"), _PLUGIN),
    **dict.fromkeys(("NodeFeaturesPlugins", "PrEpPlugins", "PrioritySiteFactorPlugin", "MCSPlugin", "LaunchParameters"), _PLUGIN),
    **dict.fromkeys(("SlurmdUser", "SlurmctldUser"), "the user a Slurm daemon runs as"),
    **dict.fromkeys(("AuthAltTypes", "AuthAltParameters", "AuthInfo", "UsePAM"), "how Slurm authenticates users and daemons"),
}
"""Keys known to name code, a user or an authentication method: refused with that reason (every key not in
:data:`ALLOWED` is refused; these say why)."""
_CODE_SHAPE = re.compile(r"(Prolog|Epilog|Program|Prog|Plugins?|Plugstack|Type|Types|User|Dir)$|^Auth")
"""The shapes of Slurm's code, plugin, user and authentication keys, for a key :data:`CODE` does not list."""
NOT_SETTABLE = "not settable: it names code that runs as root"

KEY_RE = re.compile(r"^[A-Z][A-Za-z0-9]{1,63}$")
"""A slurm.conf key's shape: CamelCase letters and digits (``MaxJobCount``, ``KillWait``)."""

_OWNED_LOWER = {k.lower(): (k, where) for k, where in OWNED.items()}
_ALLOWED_LOWER = {k.lower(): k for k in ALLOWED}
_CODE_LOWER = {k.lower(): (k, what) for k, what in CODE.items()}


class Refusal(NamedTuple):
    """Why a key cannot be set in ``slurm.settings``: the finding's code, message and fix."""

    code: str
    message: str
    fix: str


def owned_key(key: str) -> tuple[str, str] | None:
    """``(the key as gpucluster spells it, the section that sets it)`` when gpucluster owns ``key`` (Slurm reads keys
    case-insensitively), else None."""
    return _OWNED_LOWER.get(key.lower())


def allowed_key(key: str) -> str | None:
    """The key as :data:`ALLOWED` spells it when a stack may set ``key``, else None."""
    return _ALLOWED_LOWER.get(key.lower())


OWNED_PROGRAM_DIRS = ("/etc/gpucluster/", "/opt/gpucluster/")
_PROGRAM_KEY = re.compile(r"(Prolog|Epilog|Program)$")
"""Where every program gpucluster names in slurm.conf lives (root-owned directories the node's setup writes)."""


def rendered_value_ok(key: str, value: str) -> bool:
    """Whether a program key gpucluster owns (``Prolog``, ``Epilog``, ``ResumeProgram``…) names one of gpucluster's
    own programs: a key is not enough, since ``Epilog=/fsx/...`` would run a researcher's file as root."""
    if owned_key(key) is None or not _PROGRAM_KEY.search(key):
        return True
    return value.strip().startswith(OWNED_PROGRAM_DIRS) and ".." not in value


def rendered_key_ok(key: str) -> bool:
    """Whether a rendered slurm.conf may hold ``key``: one gpucluster owns or one on the allow list."""
    return owned_key(key) is not None or allowed_key(key) is not None


def key_refusal(key: str) -> Refusal | None:
    """Why ``key`` cannot be set in ``slurm.settings`` (None when it can)."""
    if (owned := owned_key(key)) is not None:
        return Refusal(
            "slurm-setting-owned",
            f"slurm.conf key {owned[0]} is set by gpucluster, so it cannot be overridden here",
            f"use {owned[1]} instead",
        )
    if not KEY_RE.fullmatch(key):
        return Refusal(
            "slurm-setting-key",
            f"{key!r} is not a slurm.conf key: keys are CamelCase letters and digits (MaxJobCount)",
            "write the key as slurm.conf(5) spells it",
        )
    if allowed_key(key) is not None:
        return None
    known = _CODE_LOWER.get(key.lower())
    if known is not None or _CODE_SHAPE.search(key):
        name, what = known or (key, "a program, plugin, user or authentication method")
        return Refusal(
            "slurm-setting-code",
            f"slurm.conf key {name} names {what}: a stack cannot set it",
            f"{NOT_SETTABLE}; remove it (a node's own setup belongs in slurm.nodeGroups[].hooks, which gpucluster "
            "checks and pins)",
        )
    close = difflib.get_close_matches(key, ALLOWED, n=1)
    return Refusal(
        "slurm-setting-not-allowed",
        f"slurm.conf key {key} is not on the list of keys a stack may set (limits, timeouts and log levels)",
        (f"did you mean {close[0]}? " if close else "") + 'remove it, or use a key listed in docs/teams.md ("The escape hatch")',
    )


def value_problem(value: str) -> str | None:
    """Why ``value`` cannot be a slurm.conf value, or None: one word of one line (no comment, no control character,
    no space, ``=`` or quote): no value on the allow list needs more, and nothing can follow it on its line."""
    if not value:
        return "it is empty"
    if "#" in value:
        return "it holds '#', which starts a comment in slurm.conf"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        return "it holds a line break or another control character"
    if any(c.isspace() or c in "=\"'" for c in value):
        return "it holds a space, '=' or a quote, after which slurm.conf would read another key"
    return None


def settings_text(value: object) -> object:
    """A YAML number or switch given as a value (``MaxJobCount: 20000``) → its text (``yes``/``no`` for switches)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return value
