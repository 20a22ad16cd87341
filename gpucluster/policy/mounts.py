"""Lustre (and NFS: the shared ``/home``) client mounts as a node will make them: the /etc/fstab entries and ``mount -t lustre`` commands in user
data (every text :func:`gpucluster.policy.userdata.decode` unwraps), and their options.

A mount without ``nosuid`` runs a setuid file on the file system with its owner's rights; one without ``nodev`` opens
device files written there. mount(8) applies options left to right, so the last of ``suid``/``nosuid`` (and of
``dev``/``nodev``) is the one that holds; ``defaults`` counts as ``suid,dev``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# fstab: "<server>@tcp[N]:/<name>[/<dir>] <mount point> lustre <options> …" (also inside a shell variable's quotes), and
# the shared home's "<server>:/<path> <mount point> nfs4 <options> …" (/home on FSx for OpenZFS).
_FSTAB = re.compile(r"(?P<source>[^\s'\"=]+@tcp[0-9]*:/\S*)\s+(?P<target>\S+)\s+lustre\s+(?P<options>[^\s'\"]+)")
_NFS_FSTAB = re.compile(r"(?P<source>[A-Za-z0-9][^\s'\"=@]*:/\S*)\s+(?P<target>/\S*)\s+nfs4?\s+(?P<options>[^\s'\"]+)")
_MOUNT = re.compile(
    r"(?:^|[\s;&|(`])mount\s+(?P<args>[^;&|\n`)]*?(?:-t\s*(?P<t1>lustre|nfs4?)\b|--types[\s=](?P<t2>lustre|nfs4?)\b)[^;&|\n`)]*)"
)

NO_PRIVILEGE = (("nosuid", ("suid",)), ("nodev", ("dev",)))


@dataclass(frozen=True)
class LustreMountLine:
    where: str  # "user data, file /usr/local/sbin/gpucluster-mount-lustre"
    line: int
    target: str
    options: tuple[str, ...]
    fs_type: str = "lustre"  # or "nfs"/"nfs4" (the home)

    def missing(self) -> list[str]:
        """The privilege-dropping options that do not hold at the end of the option list."""
        return missing_no_privilege(self.options)


def missing_no_privilege(options: tuple[str, ...] | list[str]) -> list[str]:
    """``nosuid``/``nodev`` where the last word on the matter is not theirs (absent, or undone by a later ``suid``,
    ``dev`` or ``defaults``)."""
    out = []
    for off, ons in NO_PRIVILEGE:
        last = None
        for option in options:
            if option == off:
                last = off
            elif option in ons or option == "defaults":
                last = option
        if last != off:
            out.append(off)
    return out


def lustre_mounts(texts: list[tuple[str, str]]) -> list[LustreMountLine]:
    """Every Lustre and NFS mount in ``texts`` (``(where, text)`` pairs), fstab entries and mount commands alike."""
    found: list[LustreMountLine] = []
    for where, text in texts:
        for number, line in enumerate(text.splitlines(), start=1):
            if line.lstrip().startswith("#"):
                continue
            for m in _FSTAB.finditer(line):
                found.append(LustreMountLine(where, number, m["target"], tuple(m["options"].split(","))))
            for m in _NFS_FSTAB.finditer(line):
                fs_type = line[m.end("target") : m.start("options")].strip()
                found.append(LustreMountLine(where, number, m["target"], tuple(m["options"].split(",")), fs_type))
            for m in _MOUNT.finditer(line):
                found.append(_mount_command(where, number, m["args"], m["t1"] or m["t2"]))
    return found


def _mount_command(where: str, number: int, args: str, fs_type: str = "lustre") -> LustreMountLine:
    try:
        words = shlex.split(args, comments=True)
    except ValueError:
        words = args.split()
    options: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-o", "--options") and i + 1 < len(words):
            options += words[i + 1].split(",")
            i += 2
            continue
        if word.startswith("-o") and len(word) > 2:
            options += word[2:].split(",")
        elif word.startswith("--options="):
            options += word.split("=", 1)[1].split(",")
        elif word in ("-t", "--types"):
            i += 1
        elif not word.startswith("-"):
            positional.append(word)
        i += 1
    return LustreMountLine(where, number, positional[-1] if positional else "?", tuple(options), fs_type)
