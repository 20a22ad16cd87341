"""The rule of the rendered slurm.conf: it holds only keys gpucluster sets and keys on the settings hatch's allow list.

The config checks refuse any other ``gpucluster:slurm.settings`` key when the stack loads; this rule reads the file
itself, as the head node will (the Slurm head node's files bundle, and any user data that writes a slurm.conf), so a
stack built another way (a program of its own, a patched renderer) is held to the same list. The list is
``gpucluster/facts/slurm_settings.py``, a standard-library module of its own that the policy pack can import.
"""

from __future__ import annotations

import re

import gpucluster.facts.slurm_settings as slurm_keys
from gpucluster.policy.model import Resource, Violation, violation
from gpucluster.policy.rules import _USER_DATA_PROPS, _WHERE
from gpucluster.policy.userdata import decode

SLURM_CONF_KEYS = "slurm-conf-allowed-keys"
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(\S*)")


def conf_items(text: str) -> list[tuple[int, str, str]]:
    """``(line number, key, first word of the value)`` of each ``Key=value`` line (comments and blank lines skipped)."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        m = _KEY.match(line)
        if m and not line.lstrip().startswith("#"):
            out.append((number, m.group(1), m.group(2)))
    return out


def slurm_conf_allowed_keys(r: Resource) -> list[Violation]:
    """Every key of a rendered slurm.conf is one gpucluster sets or one on the ``slurm.settings`` allow list: no
    program, plugin, user or authentication method a stack names (``Epilog=/fsx/...`` runs as root on every node)."""
    out: dict[tuple[str, str, str], Violation] = {}
    for prop, encoded in _USER_DATA_PROPS.get(r.type, ()):
        value = r.get(prop)
        if not isinstance(value, str):
            continue  # unset, or not known before `pulumi up`
        for where, text in decode(value, base64_encoded=encoded, where=_WHERE.get(r.type, "user data")):
            if not where.endswith("/slurm.conf"):
                continue
            for number, key, setting in conf_items(text):
                if slurm_keys.rendered_key_ok(key) and not slurm_keys.rendered_value_ok(key, setting):
                    out[(prop, where, key)] = violation(
                        SLURM_CONF_KEYS,
                        r,
                        prop,
                        f"sets {key}={setting} ({where}, line {number}): gpucluster's {key} names a program in "
                        f"{' or '.join(slurm_keys.OWNED_PROGRAM_DIRS)}, root's own directories",
                        "render slurm.conf with gpucluster (a program elsewhere, such as on shared storage, runs a "
                        "user's file as root)",
                    )
                    continue
                if slurm_keys.rendered_key_ok(key):
                    continue
                refusal = slurm_keys.key_refusal(key)
                why = refusal.message if refusal is not None else f"{key} is not a key gpucluster sets"
                out[(prop, where, key)] = violation(
                    SLURM_CONF_KEYS,
                    r,
                    prop,
                    f"sets {key} ({where}, line {number}): {why}",
                    refusal.fix if refusal is not None else "remove it",
                )
    return list(out.values())
