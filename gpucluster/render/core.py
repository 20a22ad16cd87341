"""Rendering: Jinja2 templates in ``templates/`` → the files nodes and schedulers read.

Values are computed in Python (``gpucluster.config``, ``gpucluster.resolve`` and the ``*_context`` functions here); templates
only place them. ``StrictUndefined`` turns a missing value into an error, not an empty string.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jinja2
import yaml

from gpucluster._paths import TEMPLATES_DIR as PACKAGED_TEMPLATES
from gpucluster.config.base import CONTROL_RE, ENV_NAME_RE

TEMPLATES_DIR = Path(os.environ.get("GPUCLUSTER_TEMPLATES") or PACKAGED_TEMPLATES)
SERVICE_SANDBOX = "NoNewPrivileges=yes\nProtectSystem=strict\nProtectHome=yes\nPrivateTmp=yes\n"
"""The sandbox every gpucluster service runs in: no new privileges, a read-only system, no home and a private /tmp."""

USER_DATA_LIMIT = 16 * 1024  # EC2 rejects user data above 16 KB (before base64)


# libyaml's emitter where PyYAML has it (its wheels do): the same document, some 40 times faster than the
# pure-Python one, which was a third of a plan's time (the injection and property tests run thousands of plans).
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it: what the plan reads its rendered cloud-configs back with."""


class _Dumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """Block style for multi-line strings, so rendered files stay readable in the plan and goldens."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_presenter)


def to_yaml(value: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096).rstrip("\n")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        # Shell templates use ${#array[@]}: keep Jinja's comments out of the way of "{#".
        comment_start_string="{##",
        comment_end_string="##}",
    )
    env.filters["to_yaml"] = to_yaml
    env.filters["to_json"] = lambda v: json.dumps(v, indent=2, sort_keys=True)
    env.filters["shquote"] = lambda v: shlex.quote(str(v))
    env.filters["shname"] = shell_name
    return env


def shell_name(name: object) -> str:
    """``name`` when it is a shell variable name (it then needs no quoting); raises otherwise.

    The config loader already refuses such names; this keeps a bad one from ever reaching a script."""
    text = str(name)
    if not ENV_NAME_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a shell variable name; refusing to render it into a script")
    return text


def render(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``."""
    return environment().get_template(template).render(**context)


# --- cloud-init user data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteFile:
    path: str
    content: str
    permissions: str = "0644"
    owner: str = "root:root"
    encoding: str | None = None
    """cloud-init's ``encoding`` of ``content``: None (plain text) or ``gz+b64`` (see :meth:`compressed`)."""

    def as_dict(self) -> dict[str, str]:
        out = {"path": self.path, "owner": self.owner, "permissions": self.permissions, "content": self.content}
        if self.encoding:
            out["encoding"] = self.encoding
        return out

    @classmethod
    def compressed(cls, path: str, text: str, permissions: str = "0644") -> WriteFile:
        """``text`` gzipped and base64-encoded (cloud-init decodes it): large scripts fit EC2's 16 KB limit.
        Deterministic (no timestamp in the gzip header); the plan shows the decoded text."""
        return cls(path, base64.b64encode(gzip_bytes(text)).decode(), permissions, encoding="gz+b64")

    def text(self) -> str:
        """The file as the node gets it (decoded)."""
        if self.encoding == "gz+b64":
            return gzip.decompress(base64.b64decode(self.content)).decode()
        return self.content


@dataclass(frozen=True)
class CloudConfig:
    """A cloud-config document built from parts: each feature (EFA, storage, Slurm…) adds its own.

    ``bootcmd`` runs early on every boot, ``runcmd`` once, in order, after files are written. ``first_bootcmd`` runs
    before every part's ``bootcmd`` whatever the order the parts were added in: the IMDS guard, which must hold
    before anything else on the node runs (the NVMe RAID script of the node's own part included).
    """

    write_files: tuple[WriteFile, ...] = ()
    bootcmd: tuple[tuple[str, ...], ...] = ()
    first_bootcmd: tuple[tuple[str, ...], ...] = ()
    runcmd: tuple[tuple[str, ...], ...] = ()
    packages: tuple[str, ...] = ()
    mounts: tuple[tuple[str, ...], ...] = ()
    sections: tuple[str, ...] = field(default=())  # names of the parts merged in, for the header

    def __add__(self, other: CloudConfig) -> CloudConfig:
        paths = {f.path for f in self.write_files}
        clash = [f.path for f in other.write_files if f.path in paths]
        if clash:
            raise ValueError(f"two user-data parts write the same file: {', '.join(clash)}")
        return replace(
            self,
            write_files=self.write_files + other.write_files,
            bootcmd=self.bootcmd + other.bootcmd,
            first_bootcmd=self.first_bootcmd + other.first_bootcmd,
            runcmd=self.runcmd + other.runcmd,
            packages=tuple(dict.fromkeys(self.packages + other.packages)),
            mounts=self.mounts + other.mounts,
            sections=self.sections + other.sections,
        )


def cloud_config_text(title: str, config: CloudConfig) -> str:
    """The ``#cloud-config`` document for ``config`` (no size check: see :func:`render_cloud_config`)."""
    return render(
        "node/cloud-config.yaml.j2",
        title=title,
        sections=list(config.sections),
        write_files=[f.as_dict() for f in config.write_files],
        bootcmd=[list(c) for c in config.first_bootcmd + config.bootcmd],
        runcmd=[list(c) for c in config.runcmd],
        packages=list(config.packages),
        mounts=[list(m) for m in config.mounts],
    )


def user_data_size(text: str, *, gzipped: bool) -> int:
    """Bytes EC2 counts against :data:`USER_DATA_LIMIT`: the compressed size when sent gzipped."""
    return len(gzip_bytes(text)) if gzipped else len(text.encode())


def largest_parts(config: CloudConfig, count: int = 3) -> list[str]:
    """``path (N bytes)`` of the largest files in ``config``: what to move out of oversize user data."""
    files = sorted(config.write_files, key=lambda f: len(f.content), reverse=True)[:count]
    return [f"{f.path} ({len(f.content)} bytes{' gzipped' if f.encoding == 'gz+b64' else ''})" for f in files]


def render_cloud_config(title: str, config: CloudConfig, *, gzipped: bool = False) -> str:
    """The ``#cloud-config`` document for ``config``; raises when it exceeds EC2's user-data limit.

    ``gzipped``: the document will be passed gzip-compressed (:func:`gzip_b64`, which cloud-init
    unpacks), so the limit applies to the compressed size. The stack program checks every node group's
    size before creating anything (``render.user_data.user_data_findings``); this is the last guard."""
    text = cloud_config_text(title, config)
    size = user_data_size(text, gzipped=gzipped)
    if size > USER_DATA_LIMIT:
        raise ValueError(
            f"user data for {title} is {size} bytes{' gzipped' if gzipped else ''}; EC2 allows {USER_DATA_LIMIT}. "
            "Move large files to S3 and fetch them at boot."
        )
    return text


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def gzip_bytes(text: str) -> bytes:
    """``text`` gzip-compressed, deterministically (no timestamp in the header)."""
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def gzip_b64(text: str) -> str:
    """User data as EC2 takes it gzip-compressed (``user_data_base64``); cloud-init unpacks it."""
    return base64.b64encode(gzip_bytes(text)).decode()


def env_file(env: Mapping[str, str]) -> str:
    """``KEY=value`` lines, one per variable, read by the Slurm TaskProlog: the value is the rest of the
    line, taken literally (never run by a shell).

    A name that is not a variable name, or a value with a line break or another control character,
    would change the file's lines: raises instead (the config loader refuses both first)."""
    for key, value in env.items():
        shell_name(key)
        if CONTROL_RE.search(value):
            raise ValueError(f"the value of {key} holds a control character; refusing to write it into an env file")
    return "".join(f"{k}={v}\n" for k, v in env.items())


def bundle_json(files: Sequence[WriteFile]) -> str:
    """A files bundle (the head node's, the declared users' object): every file's path, permissions and decoded text,
    sorted by path, as compact JSON (deterministic)."""
    entries = [{"path": f.path, "permissions": f.permissions, "content": f.text()} for f in sorted(files, key=lambda f: f.path)]
    return json.dumps({"files": entries}, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
