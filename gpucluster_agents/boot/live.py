"""The head node's live files (render/slurm/headfiles.py): ``python3 -I -c LIVE_MAIN <package dir> <helper config>``,
run by ``gpucluster-head-live.service`` (its timer: every 2 minutes, and once by the setup).

The live bundle lies at the fixed key the pointer names (``live_key``) and is not pinned by the user data, which is its
point: a team's change updates it in place. So it may hold nothing that runs: every entry must be one of
:data:`LIVE_PATHS` with mode 0644, or nothing is written. The writes go through the boot helper's own link-safe writer.
Installed with the node agent package, not in the user data (which EC2 caps at 16 KB)."""

from __future__ import annotations

import json
import sys

from gpucluster_agents.boot import helper

LIVE_PATHS = ("/etc/gpucluster/accounts.json", "/etc/gpucluster/team-directories.list")
"""The only files this writes: data whose reader takes a change without a restart (the accounts contract and the list
of the teams' directories, each of which a path unit hands to its reader). render/slurm/headfiles.py puts exactly these in the live bundle (a test holds them
together)."""


def apply_live(cfg: helper.BootConfig) -> None:
    """Write the live bundle the pointer names (none: nothing to do)."""
    if not cfg.head_files:
        sys.exit("no head_files in the config")
    ptr = json.loads(helper._read(helper.on_root(cfg.head_files)))
    key = ptr.get("live_key")
    if not key:
        helper.log("no live files")
        return
    source = f"s3://{ptr['bucket']}/{key}"
    entries = json.loads(helper.s3_client(cfg).get_object(Bucket=ptr["bucket"], Key=key)["Body"].read())["files"]
    bad = [e.get("path") for e in entries if e.get("path") not in LIVE_PATHS or str(e.get("permissions", "0644")) != "0644"]
    if bad:
        sys.exit(f"{source}: refusing {bad!r} (only {', '.join(LIVE_PATHS)}, mode 0644, may change live): nothing written")
    helper.write_entries(cfg, entries, source)


def main(argv: list[str] | None = None) -> int:
    """``<helper config>``: the boot helper's config (its ``head_files`` names the pointer)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: live <boot helper config>")
    apply_live(helper.load_config(args[0]))
    return 0
