"""Hostile input: any string in any section of a shipped stack either fails with the config error
naming its field, or plans with rendered files that hold the value only as data.

Hypothesis (fixed seed, 1,000 cases) puts hostile strings — shell metacharacters, command
substitutions, newlines, CR, U+2028, NUL, Jinja ``{{ }}``, ``#``, YAML indicators — into every string
field of every section of ``stacks/*.yaml`` (found by walking each stack's config together with the
pydantic models, so fields a stack leaves out and map keys such as ``ncclEnv``, ``labels``, ``tags``
are included) and runs the real stack program under the plan's mock engine, each case under a time
limit. Every planned case is then read by the programs that read those files:

- every shell script: ``bash -n``; the profile.d NCCL script is sourced, the Slurm TaskProlog and the
  Lustre mount script are run, in a sandbox whose PATH starts with a canary program (a marker file
  appears if any hostile text ever runs as a command) and stubs for mount/modprobe/…; the environment
  they export and the fstab line they write (read back by util-linux ``findmnt``) must equal the
  config's values exactly;
- the profile.d script also as every shell takes it: ``bash -i`` (its rc file),
  ``bash -l -i`` and ``sh -l -i`` (dash; through the sandbox HOME's ``.bash_profile``/``.profile``), each
  then starting a dynamic program, ``bash -c`` and ``sh -i``; the TaskProlog's environment starts the same
  programs. Canaries: a command on PATH (``PROMPT_COMMAND``, ``PS1``/``PS4`` command substitutions, ``$(…)``
  in values), an rc file (``BASH_ENV``, ``ENV``) and a shared library built here whose constructor writes the
  marker (``LD_PRELOAD``, ``LD_AUDIT``). A fifth of the ncclEnv cases set such a variable (:data:`CODE_VARIABLES`);
  every one must be refused, or run nothing;
- every YAML file (user data, Helm values, the example JobSet) and JSON file: loaded; a hostile value
  that appears verbatim in the text must be inside one parsed scalar (else it became structure);
- user data: cloud-init's schema validator (the code ``cloud-init schema`` runs, batched in one
  process) on every distinct cloud-config, and ``slurmctld -D -c`` on a sample of distinct
  Slurm configurations that carry a hostile value.
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import types
import typing
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gpucluster.config.cluster import ClusterSpec
from gpucluster.tools.plan.run.engine import run_program
from gpucluster.tools.plan.run.files import cloud_config_text
from gpucluster.tools.plan.run.stackfile import load_stack_config, stack_names
from tests.conftest import require_tool
from tests.render.slurm_check import check_slurmctld

pytestmark = pytest.mark.slow  # runs slurmctld on every case's files and builds the canary library with gcc

CASES = int(os.environ.get("GPUCLUSTER_INJECTION_CASES", "1000"))  # 1,000 in CI; fewer while working
CASE_SECONDS = 60  # a case still running after this is a hang
SLURMCTLD_SAMPLE = 3  # slurmctld -D -c costs ~3 s a run: check this many distinct hostile configs
CANARY = "gpucluster_canary"

# Pieces of hostile text; a case joins one to three of them, after the field's own value or not.
PAYLOADS = [
    f";{CANARY};",
    f"$({CANARY})",
    f"`{CANARY}`",
    f"&& {CANARY}",
    f"| {CANARY}",
    f"\n{CANARY}\n",
    f"\r\n{CANARY}",
    f"\u2028{CANARY}",
    f"\u2029{CANARY}",
    f"\x00{CANARY}",
    f"\x85{CANARY}",
    "\x1b[31m",
    "\t",
    f"'; {CANARY}; '",
    f'"; {CANARY}; "',
    f"${{IFS}}{CANARY}",
    "$PATH",
    "{{ 7*7 }}",
    "{% if true %}x{% endif %}",
    "{#",
    "# pinned",
    " #",
    ": x",
    "- x",
    "{privileged: true}",
    "[a, b]",
    "&anchor",
    "*alias",
    "!!python/object:os.system",
    "| x",
    "> x",
    "%YAML 1.2",
    "? key",
    "@",
    ",",
    "=",
    "\\",
    "\\n",
    " ",
    "\u00a0",
    "'",
    '"',
    "%s%n",
    "\\040",
    "x" * 300,
]
# ncclEnv names that would turn a value into code, with a value that trips a canary if the name were ever accepted
# (paths are relative to the sandbox, the shells' working directory), and fabric names that are accepted, with
# values that must stay data. Refused or harmless: either way no canary.
CODE_VARIABLES = {
    "LD_PRELOAD": "./canary.so",
    "LD_AUDIT": "./canary.so",
    "LD_LIBRARY_PATH": ".",
    "PROMPT_COMMAND": CANARY,
    "PS1": f"$({CANARY})",
    "PS4": f"$({CANARY})",
    "SHELLOPTS": "xtrace",
    "BASH_ENV": "./canary-rc",
    "ENV": "./canary-rc",
    "PATH": ".",
    "IFS": "/",
    "PYTHONSTARTUP": "./canary-rc",
    "NODE_OPTIONS": "--require ./canary-rc",
    "GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=1",
    "FI_PROVIDER_PATH": ".",
    "CUDA_INJECTION64_PATH": "./canary.so",
    "NCCL_TUNER_PLUGIN": "./canary.so",
    "NCCL_NET_PLUGIN": "/fsx/canary.so",
    "OMPI_MCA_plm_rsh_agent": CANARY,
    "GPUCLUSTER_NCCL_ENV": "./canary-rc",
    # accepted: fabric names whose values stay data
    "NCCL_DEBUG_FILE": f"$({CANARY})",
    "FI_LOG_LEVEL": f"`{CANARY}`",
    "NCCL_PROFILER_PLUGIN": "/opt/amazon/ofi-nccl/lib/libnccl-profiler.so",
    "TORCH_NCCL_TRACE": f"; {CANARY}",
}
CANARY_LIBRARY = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void gpucluster_canary(void) {
    char line[128];
    int n = snprintf(line, sizeof line, "canary library loaded into pid %d uid %d\n", (int)getpid(), (int)getuid());
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { if (write(fd, line, n) < 0) {} close(fd); }
}
unsigned int la_version(unsigned int version) { return version; } /* LD_AUDIT loads it too */
"""
# What each shell runs after taking the profile: a dynamically linked program (the loader's variables), a
# non-interactive bash (BASH_ENV, SHELLOPTS/PS4), an interactive sh (ENV, PS1).
AFTER_PROFILE = "/usr/bin/true\nbash -c :\nsh -i </dev/null\nexit 0\n"

# Characters that a safe renderer must keep as data; a value made only of letters, digits, '-', '_'
# and '.' carries no syntax to check.
SYNTAX = re.compile(r"[^A-Za-z0-9_.-]")


# --- where hostile strings go: every string field of every section -----------------------------------------


def _string_kind(annotation: object) -> str | None:
    """``str``, ``list`` (tuple of strings), ``dict`` (str-keyed map) or None for the field's type."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if annotation is str or origin is typing.Literal:
        return "str"
    if origin in (typing.Union, types.UnionType):
        kinds = {_string_kind(a) for a in args if a is not type(None)}
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None
    if origin is tuple and args and (args[0] is str or typing.get_origin(args[0]) is typing.Literal):
        return "list"
    if origin is dict and args and args[0] is str:
        return "dict"
    return None


def _models(annotation: object) -> tuple[type[BaseModel] | None, bool]:
    """The model class inside a field's type, and whether the field is a tuple of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = typing.get_origin(annotation)
    for arg in typing.get_args(annotation):
        model, _ = _models(arg)
        if model is not None:
            return model, origin is tuple
    return None, False


Path_ = tuple[str | int, ...]


def _targets(model: type[BaseModel], obj: dict[str, Any], path: Path_) -> list[tuple[Path_, str]]:
    """``(path, how)`` for every string slot of ``obj`` (a config dict of ``model``): ``how`` is
    ``value`` (set the string at path), ``item`` (a list element), ``key``/``entry`` (a map's key or
    value). Fields the config leaves out are targets too, when their parent is present."""
    out: list[tuple[Path_, str]] = []
    for name, field in model.model_fields.items():
        alias = field.alias or name
        here = (*path, alias)
        kind = _string_kind(field.annotation)
        present = obj.get(alias)
        if kind == "str":
            out.append((here, "value"))
        elif kind == "list":
            out += [((*here, i), "value") for i in range(len(present or []))] + [(here, "item")]
        elif kind == "dict":
            out += [(here, "key"), (here, "entry")]
            out += [((*here, k), "value") for k, v in (present or {}).items() if isinstance(v, str)]
        else:
            sub, many = _models(field.annotation)
            if sub is None or (present is None and (many or not path)):
                continue  # a whole section the stack leaves out (slurm on an EKS stack) is not this test's
            if present is None and any(f.is_required() for f in sub.model_fields.values()):
                continue  # nor a left-out subsection that needs other fields (hybrid.controller on an EKS site)
            present = {} if present is None else present
            items = list(enumerate(present)) if many and isinstance(present, list) else [(None, present)]
            for i, item in items:
                if isinstance(item, dict):
                    out += _targets(sub, item, here if i is None else (*here, i))
    return out


def stack_configs() -> dict[str, dict[str, Any]]:
    """Each shipped stack's config, as the program gets it, with JSON values decoded."""
    out = {}
    for stack in stack_names():
        _, config, _ = load_stack_config(stack)
        out[stack] = {k: json.loads(v) if v[:1] in "[{" else v for k, v in config.items()}
    return out


STACKS = stack_configs()


def _root_model(stack_config: dict[str, Any]) -> dict[str, Any]:
    """The stack config as one ClusterSpec-shaped dict (keys without the ``gpucluster:`` prefix)."""
    root = {k.split(":", 1)[1]: v for k, v in stack_config.items() if k.startswith("gpucluster:")}
    root["region"] = stack_config["aws:region"]
    return root


TARGETS = [(stack, path, how) for stack, cfg in STACKS.items() for path, how in _targets(ClusterSpec, _root_model(cfg), ())]


def config_path(path: Path_) -> str:
    """A target path as findings name it (``gpucluster:nodeGroups[0].ncclEnv``)."""
    head, *rest = path
    out = "aws:region" if head == "region" else f"gpucluster:{head}"
    for part in rest:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def mutate(stack: str, path: Path_, how: str, hostile: str) -> tuple[dict[str, Any], Path_]:
    """The stack's config with ``hostile`` placed at ``path``; returns it and the path now holding it."""
    root = copy.deepcopy(_root_model(STACKS[stack]))
    parent: Any = root
    for part in path[:-1]:
        parent = parent.setdefault(part, {}) if isinstance(part, str) else parent[part]
    last = path[-1]
    if how == "value":
        parent[last] = hostile
        where = path
    elif how == "item":
        items = parent.setdefault(last, [])
        items.append(hostile)
        where = (*path, len(items) - 1)
    elif how == "key":
        parent.setdefault(last, {})[hostile] = 1 if last == "gpuQuota" else CODE_VARIABLES.get(hostile, "x")
        where = path
    else:  # entry: a new map entry with a hostile value
        parent.setdefault(last, {})["NCCL_GPUCLUSTER_TEST" if last == "ncclEnv" else "gpucluster-test"] = hostile
        where = (*path, "NCCL_GPUCLUSTER_TEST" if last == "ncclEnv" else "gpucluster-test")
    config = {f"gpucluster:{k}": v for k, v in root.items() if k != "region"}
    config["aws:region"] = root["region"]
    return config, where


hostile_text = st.builds(
    lambda prefix, parts: prefix + "".join(parts),
    st.sampled_from(["", "x", "NCCL", "a.example.com/b", "noatime,flock"]),
    st.lists(st.sampled_from(PAYLOADS), min_size=1, max_size=3),
)


@st.composite
def cases(draw):
    stack, path, how = draw(st.sampled_from(TARGETS))
    if path[-1] == "ncclEnv" and how in ("key", "entry") and draw(st.integers(0, 4)) > 0:
        return stack, path, "key", draw(st.sampled_from(sorted(CODE_VARIABLES)))
    prefix_own = how == "value" and draw(st.booleans())
    hostile = draw(hostile_text)
    if prefix_own:  # keep the field's own value in front: the value is valid up to the payload
        parent: Any = _root_model(STACKS[stack])
        try:
            for part in path:
                parent = parent[part]
            if isinstance(parent, str):
                hostile = parent + hostile
        except (KeyError, IndexError, TypeError):
            pass
    return stack, path, how, hostile


# --- the sandbox: canaries on PATH, stubs for what would touch the machine ----------------------------------


class Sandbox:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.marker = root / "CANARY-RAN"
        self.bash = require_tool("bash")
        self.findmnt = require_tool("findmnt")
        canary = f'#!/bin/sh\necho "$0 $*" >> {self.marker}\n'
        for name in (CANARY, "x", "key", "a", "b"):
            self._script(name, canary)
        stubs = {
            "mount.lustre": "exit 0",
            "mount": "exit 0",
            "modprobe": "exit 0",
            "modinfo": "exit 1",
            "lnetctl": "exit 0",
            "sleep": "exit 0",
            "curl": "exit 1",
            "apt-get": "exit 1",
            "dnf": "exit 1",
            # mkdir only inside the sandbox: the mount point itself is the host's business.
            "mkdir": f'for a in "$@"; do case "$a" in {root}/*) /bin/mkdir -p "$a" ;; esac; done; exit 0',
        }
        for name, body in stubs.items():
            self._script(name, f"#!/bin/sh\n{body}\n")
        # `id -u` answers a user's uid (the profile script exports nothing for root); GPUCLUSTER_TEST_UID=0 plays root.
        self._script("id", '#!/bin/sh\necho "${GPUCLUSTER_TEST_UID:-1000}"\n')
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(root), "LC_ALL": "C.UTF-8"}
        # The other canaries: an rc file that runs the canary program, and a library whose constructor writes the marker.
        (root / "canary-rc").write_text(f"{CANARY} rc-file\n")
        source = root / "canary.c"
        source.write_text(CANARY_LIBRARY)
        define = f'-DMARKER="{self.marker}"'
        subprocess.run([require_tool("gcc"), "-shared", "-fPIC", define, "-o", str(root / "canary.so"), str(source)], check=True)
        # Login shells read the system's profile, then these; each puts the sandbox's bin first again (Debian's
        # /etc/profile resets PATH) and sources the profile.d script under test, as /etc/profile does.
        for rc in (".bash_profile", ".profile"):
            (root / rc).write_text(f'PATH="{self.bin}:$PATH"\n. "{root}/profile.sh"\n')
        self.seen: set[object] = set()

    def _script(self, name: str, text: str) -> None:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)

    def canary_ran(self) -> str | None:
        return self.marker.read_text() if self.marker.exists() else None

    def run(self, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, env={**self.env, **env}, capture_output=True, text=True, timeout=30, cwd=self.root, check=False
        )

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        path.chmod(0o755)
        return path

    def shells(self, profile: str) -> int:
        """Take ``profile`` (a profile.d script) the way each shell does, then start programs from it: ``bash -i`` with
        it as the rc file, ``bash -l -i`` and dash's ``sh -l -i`` through HOME's login files. Each distinct text
        once; returns the number of shells run."""
        if profile in self.seen:
            return 0
        self.seen.add(profile)
        script = self.write("profile.sh", profile)
        runs = (
            [self.bash, "--noprofile", "--rcfile", str(script), "-i"],
            [self.bash, "-l", "-i"],
            ["/bin/sh", "-l", "-i"],
        )
        for argv in runs:
            result = subprocess.run(
                argv, env=self.env, input=AFTER_PROFILE, capture_output=True, text=True, timeout=30, cwd=self.root, check=False
            )
            assert result.returncode == 0, f"{argv}: {result.stderr[-2000:]}"
        return len(runs)

    def programs(self, env: dict[str, str]) -> int:
        """Start the programs a task starts, with ``env`` (a TaskProlog's exports) on top of the sandbox's."""
        key = frozenset(env.items())
        if key in self.seen:
            return 0
        self.seen.add(key)
        for argv in (["/usr/bin/true"], [self.bash, "-c", ":"], ["/bin/sh", "-i"]):
            subprocess.run(argv, env={**self.env, **env}, input="", capture_output=True, timeout=30, cwd=self.root, check=False)
        return 3


# --- the readers ---------------------------------------------------------------------------------------------


def scalars(doc: object) -> list[str]:
    """Every string in a parsed YAML/JSON document, keys included."""
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in (*scalars(k), *scalars(v))]
    if isinstance(doc, list):
        return [s for v in doc for s in scalars(v)]
    return [doc] if isinstance(doc, str) else []


def assert_data_in(doc: object, text: str, hostile: str, where: str) -> None:
    """If ``hostile`` (as the loader keeps it: stripped) appears verbatim in ``text``, one parsed scalar
    must hold it whole. Only for values distinctive enough to find (syntax and a word of 3+ letters)."""
    hostile = hostile.strip()
    distinctive = SYNTAX.search(hostile) and re.search(r"[A-Za-z0-9]{3}", hostile)
    if distinctive and hostile in text:
        assert any(hostile in s for s in scalars(doc)), f"{where}: {hostile!r} is in the text but in no parsed value"


def slurmstepd_env(output: str) -> dict[str, str]:
    """A TaskProlog's output as slurmstepd reads it (slurmd/slurmstepd/task.c ``_proc_stdout``): each
    ``export NAME=value`` line sets NAME to the rest of the line, literally."""
    env: dict[str, str] = {}
    for line in output.split("\n"):
        if line.startswith("export "):
            name, _, value = line[7:].lstrip().partition("=")
            env[name.rstrip()] = value
        else:
            assert line == "", f"the TaskProlog printed a line slurmstepd would not take as an export: {line!r}"
    return env


def nccl_overrides(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Each group's ncclEnv as the loader keeps it (strings stripped of surrounding blanks)."""
    return {
        g["name"].strip(): {k.strip(): v.strip() for k, v in g.get("ncclEnv", {}).items()}
        for g in config["gpucluster:nodeGroups"]
    }


def check_planned(plan, config: dict[str, Any], hostile: str, box: Sandbox, stats: Counter, pending: dict) -> None:
    files: dict[str, str] = plan.files
    overrides = nccl_overrides(config)
    lustre = ((config.get("gpucluster:storage") or {}).get("lustre")) or {}
    for path, text in files.items():
        name = path.split("/", 1)[1] if "/" in path else path
        if text.startswith(("#!/bin/bash", "#!/bin/sh")) or name.startswith("etc/profile.d/"):
            script = box.write("check.sh", text)
            result = box.run([box.bash, "-n", str(script)])
            assert result.returncode == 0, f"{path}: bash -n: {result.stderr}"
            stats["bash -n"] += 1
        if name.endswith((".yaml", "user-data")) or path.endswith("values.yaml"):
            doc_text = cloud_config_text(text) if name.endswith("user-data") else text
            if doc_text is not None:
                doc = yaml.safe_load(doc_text)
                assert_data_in(doc, doc_text, hostile, path)
                stats["yaml loaded"] += 1
                if name.endswith("user-data"):
                    pending["cloud-config"].setdefault(doc_text, path)
        if name.endswith(".json"):
            assert_data_in(json.loads(text), text, hostile, path)
            stats["json loaded"] += 1

    for path, text in files.items():
        lt, _, name = path.partition("/")
        group = next((g for g in overrides if lt.endswith(f"-{g}-lt")), None)
        if name == "etc/profile.d/gpucluster-nccl.sh" and group is not None:
            # Source it as a login shell does, then print the environment it leaves.
            script = box.write("profile.sh", text)
            result = box.run([box.bash, "-c", f". {script} && /usr/bin/env -0"])
            assert result.returncode == 0, f"{path}: {result.stderr}"
            env = dict(item.split("=", 1) for item in result.stdout.split("\0") if "=" in item)
            for key, value in overrides[group].items():
                assert env.get(key) == value, f"{path}: {key} is {env.get(key)!r}, the config says {value!r}"
            stats["profile.d sourced"] += 1
            stats["profile.d in bash -i, bash -l, sh -l"] += box.shells(text)
        if name == "etc/gpucluster/slurm/task-prolog" and group is not None:
            env_file = box.write("nccl.env", files[f"{lt}/etc/gpucluster/nccl.env"])
            prolog = box.write("task-prolog", text)
            result = box.run(["/bin/sh", str(prolog)], GPUCLUSTER_NCCL_ENV=str(env_file))
            assert result.returncode == 0, f"{path}: {result.stderr}"
            exported = slurmstepd_env(result.stdout)
            for key, value in overrides[group].items():
                assert exported.get(key) == value, f"{path}: exports {key}={exported.get(key)!r}, the config says {value!r}"
            stats["task prolog run"] += 1
            stats["programs under a task's environment"] += box.programs(exported)
        if name == "usr/local/sbin/gpucluster-mount-lustre":
            fstab = box.root / "fstab"
            fstab.write_text("LABEL=root / ext4 defaults 0 1\n")
            script = box.write("mount-lustre", text)
            result = box.run(
                [box.bash, str(script)],
                GPUCLUSTER_FSTAB=str(fstab),
                GPUCLUSTER_LOG=str(box.root / "log"),
                GPUCLUSTER_SYS=str(box.root / "sys"),
            )
            assert result.returncode == 0, f"{path}: {result.stderr}"
            read = box.run([box.findmnt, "--fstab", "--tab-file", str(fstab), "-P", "-o", "SOURCE,TARGET,FSTYPE,OPTIONS"])
            entries = [dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line)) for line in read.stdout.splitlines()]
            mine = [e for e in entries if e.get("FSTYPE") == "lustre"]
            assert len(entries) == 2 and len(mine) == 1, f"{path}: fstab now reads {entries}"
            assert mine[0]["TARGET"] == lustre.get("mountPoint", "/fsx").strip(), f"{path}: {mine[0]}"
            options = lustre.get("mountOptions", "noatime,flock").strip()
            assert mine[0]["OPTIONS"].startswith(options + ","), f"{path}: {mine[0]}"
            stats["lustre script run"] += 1

    slurm = {n.rsplit("/", 1)[1]: t for n, t in files.items() if "/etc/slurm/" in n or n.endswith("topology.conf")}
    if slurm and hostile in "".join(slurm.values()) and len(pending["slurm"]) < SLURMCTLD_SAMPLE:
        pending["slurm"].append((plan.stack, slurm))
    elif slurm and len(pending["slurm-other"]) < SLURMCTLD_SAMPLE:
        # The Slurm files of a stack whose hostile value sits elsewhere: slurmctld must still accept them.
        pending["slurm-other"].append((plan.stack, slurm))


# --- the property ---------------------------------------------------------------------------------------------


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


def run_case(config: dict[str, Any]):
    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_SECONDS)
    try:
        return run_program("gpucluster", "hostile", flat)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def related(a: str, b: str) -> bool:
    """``a`` and ``b`` name the same field, or one holds the other."""
    return a == b or any(x.startswith(y + ".") or x.startswith(y + "[") for x, y in ((a, b), (b, a)))


def test_hostile_strings_fail_naming_the_field_or_stay_data(tmp_path):
    stats: Counter = Counter()
    pending: dict[str, Any] = {"cloud-config": {}, "slurm": [], "slurm-other": []}
    box = Sandbox(tmp_path / "sandbox")
    assert len(TARGETS) > 150 and {s for s, _, _ in TARGETS} == set(STACKS)

    @settings(
        max_examples=CASES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    # Whatever the draw (it moves with every stack's fields): each accepted fabric name, and one code variable, as a
    # key of a Slurm stack's ncclEnv, so every reader below sees them.
    @example(("slurm-p5", ("nodeGroups", 0, "ncclEnv"), "key", "NCCL_DEBUG_FILE"))
    @example(("slurm-p5", ("nodeGroups", 0, "ncclEnv"), "key", "FI_LOG_LEVEL"))
    @example(("slurm-p5", ("nodeGroups", 0, "ncclEnv"), "key", "NCCL_PROFILER_PLUGIN"))
    @example(("slurm-p5", ("nodeGroups", 0, "ncclEnv"), "key", "TORCH_NCCL_TRACE"))
    @example(("slurm-p5", ("nodeGroups", 0, "ncclEnv"), "key", "LD_PRELOAD"))
    def one(case):
        stack, path, how, hostile = case
        config, where = mutate(stack, path, how, hostile)
        stats["cases"] += 1
        try:
            plan = run_case(config)
        except Hang:
            stats["hangs"] += 1
            raise AssertionError(f"{stack} {config_path(where)}={hostile!r}: no answer in {CASE_SECONDS} s") from None
        field = config_path(where)
        if how == "key" and hostile in CODE_VARIABLES:
            stats["code variable refused" if plan.error is not None else "code-looking fabric value planned"] += 1
        if plan.error is not None:
            stats["refused"] += 1
            assert plan.resources == [], f"{field}={hostile!r}: registered resources before refusing"
            assert "Traceback" not in plan.error and "is invalid" in plan.error, plan.error
            errors = [f for f in plan.findings if f["level"] == "error"]
            assert errors and all(f["path"] and f["message"] for f in errors), plan.error
            assert any(related(f["path"], field) for f in errors), f"{field}={hostile!r}: no error names it: {plan.error}"
        else:
            stats["planned"] += 1
            stats[f"planned {field.split('[')[0].split('.')[0]}"] += 1
            check_planned(plan, config, hostile, box, stats, pending)
        ran = box.canary_ran()
        assert ran is None, f"{stack} {field}={hostile!r} ran a command: {ran}"

    one()

    # The batched readers: cloud-init's schema validator on every distinct cloud-config, slurmctld on a sample.
    docs = list(pending["cloud-config"])
    validate = (
        "import json, sys\n"
        "from cloudinit.config.schema import get_schema, validate_cloudconfig_schema\n"
        "from cloudinit import safeyaml\n"
        "schema = get_schema()\n"
        "for i, text in enumerate(json.load(sys.stdin)):\n"
        "    assert text.startswith('#cloud-config\\n'), i\n"
        "    validate_cloudconfig_schema(safeyaml.load(text), schema, strict=True)\n"
        "print('ok')\n"
    )
    python = Path(require_tool("cloud-init")).read_text().splitlines()[0].removeprefix("#!").strip()
    result = subprocess.run([python, "-c", validate], input=json.dumps(docs), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    stats["cloud-configs schema-checked"] = len(docs)
    # Slurm fields are pattern-checked, so a hostile value rarely reaches a Slurm file; when none did in
    # this run, slurmctld reads the Slurm files of planned hostile cases of a Slurm stack instead.
    stats["hostile value in a Slurm file"] = len(pending["slurm"])
    for i, (stack, files) in enumerate(pending["slurm"] or pending["slurm-other"]):
        rc, problems = check_slurmctld({k: v for k, v in files.items() if k != "slurmdbd.conf"}, tmp_path / f"slurm{i}")
        assert rc == 124 and not problems, f"{stack}: slurmctld: {problems}"
        stats["slurmctld runs"] += 1

    print(dict(stats))
    assert stats["cases"] >= CASES and stats["hangs"] == 0
    assert box.canary_ran() is None
    # Both outcomes happen, and the planned cases were read by every kind of reader.
    assert stats["refused"] > 0 and stats["planned"] > 0
    readers = ("bash -n", "yaml loaded", "json loaded", "profile.d sourced", "task prolog run", "lustre script run")
    readers += ("profile.d in bash -i, bash -l, sh -l", "programs under a task's environment", "code variable refused")
    readers += ("code-looking fabric value planned",)
    for reader in (*readers, "cloud-configs schema-checked", "slurmctld runs"):
        assert stats[reader] > 0, (reader, dict(stats))


def test_the_sandbox_catches_a_canary(tmp_path):
    """The check above can fail: a profile.d line that runs a command trips the canary."""
    box = Sandbox(tmp_path / "sandbox")
    script = box.write("profile.sh", f"export FI_X;{CANARY};Y=1\n")
    box.run([box.bash, "-c", f". {script}"])
    assert box.canary_ran()


@pytest.mark.parametrize(
    ("exports", "where"),
    [
        ({"LD_PRELOAD": "./canary.so"}, "shells task"),
        ({"LD_AUDIT": "./canary.so"}, "shells task"),
        ({"PROMPT_COMMAND": CANARY}, "shells"),
        ({"PS1": f"$({CANARY})"}, "shells task"),
        ({"BASH_ENV": "./canary-rc"}, "shells task"),
        ({"ENV": "./canary-rc"}, "shells task"),
    ],
    ids=lambda e: "+".join(e) if isinstance(e, dict) else e.replace(" ", "+"),
)
def test_the_shells_and_programs_catch_code_variables(tmp_path, exports, where):
    """Each code variable, were a profile.d script or a TaskProlog to set it, trips a canary in the shells and programs
    the hostile-input test starts (the reviewer's repro: ``bash -i`` with PROMPT_COMMAND, LD_PRELOAD into a later
    program). With the fabric check those names never reach either file; this shows the harness would notice."""
    lines = "".join(f"export {k}='{v}'\n" for k, v in exports.items())
    box = Sandbox(tmp_path / "profile")
    box.shells(f'if [ "$(id -u)" != 0 ]; then\n{lines}fi\n')
    assert bool(box.canary_ran()) == ("shells" in where), f"{exports} in the shells: {box.canary_ran()}"
    box = Sandbox(tmp_path / "task")
    box.programs(exports)
    assert bool(box.canary_ran()) == ("task" in where), f"{exports} under a task's environment: {box.canary_ran()}"


def test_the_profile_gives_root_nothing(tmp_path):
    """Root's shells skip the profile.d script: a code variable in it would not even run there."""
    box = Sandbox(tmp_path / "sandbox")
    box.env["GPUCLUSTER_TEST_UID"] = "0"
    box.shells(f'if [ "$(id -u)" != 0 ]; then\nexport PROMPT_COMMAND={CANARY}\nfi\n')
    assert box.canary_ran() is None


def test_the_yaml_check_catches_pasted_structure():
    text = "image: busybox\n  # pinned\n"
    hostile = "busybox\n  # pinned"
    with pytest.raises(AssertionError, match="in no parsed value"):
        assert_data_in(yaml.safe_load("image: busybox # pinned\n"), "image: busybox # pinned\n", "busybox # pinned", "f")
    assert_data_in(yaml.safe_load(yaml.safe_dump({"image": hostile})), text, hostile, "f")  # quoted: fine


def test_targets_reach_every_section():
    fields = {config_path(p).split(".")[0].split("[")[0] for _, p, _ in TARGETS}
    assert {
        "aws:region",
        "gpucluster:name",
        "gpucluster:nodeGroups",
        "gpucluster:network",
        "gpucluster:storage",
        "gpucluster:slurm",
        "gpucluster:kubernetes",
        "gpucluster:tags",
    } <= fields
    paths = {config_path(p) for _, p, _ in TARGETS}
    assert {
        "gpucluster:nodeGroups[0].ncclEnv",
        "gpucluster:nodeGroups[0].labels",
        "gpucluster:storage.lustre.mountOptions",
        "gpucluster:kubernetes.exampleJob.image",
        "gpucluster:kubernetes.kueue.topologyLevels",
    } <= paths
    assert os.environ.get("PATH")
