"""``python -m gpucluster_agents.boot.containers ROOT CACHE_BUDGET_MIB [--sysroot DIR]``: the node's setup writes the
container files of :mod:`gpucluster_agents.contract.containers` (enroot.conf, the pyxis drop-in, the mount check and
the container prolog wrappers) and links enroot's PMI and PyTorch hooks, before slurmd starts. Root's, each file
written whole (a temporary file renamed), no link followed. ``--sysroot``: a root other than ``/`` (the tests)."""

from __future__ import annotations

import argparse
import os
import sys

from gpucluster_agents.contract import containers as c


def write(path: str, text: str, mode: int) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    tmp = f"{path}.gpucluster-new"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def install(root: str, budget_mib: int, sysroot: str = "/") -> None:
    top = sysroot.rstrip("/")
    for path, (text, mode) in c.node_files(root, budget_mib).items():
        write(top + path, text, mode)
    for hook in c.TRAINING_HOOKS:
        link = f"{top}{c.ENROOT_HOOKS}/{hook}"
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(f"{c.ENROOT_EXTRA_HOOKS}/{hook}", link)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpucluster_agents.boot.containers")
    parser.add_argument("root")
    parser.add_argument("budget_mib", type=int)
    parser.add_argument("--sysroot", default="/")
    args = parser.parse_args(argv)
    if not args.root.startswith("/") or any(ch.isspace() for ch in args.root):
        print(f"gpucluster: enroot root {args.root!r} is not an absolute path without spaces", file=sys.stderr)
        return 2
    install(args.root, args.budget_mib, args.sysroot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
