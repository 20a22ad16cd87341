"""The teams' slurm.conf read by Slurm 24.11 with its slurmdbd: slurm-p5's FULL slurm.conf rendered for
24.11 (its AccountingStorageTRES, AccountingStorageEnforce and the partitions' TRESBillingWeights included: the quick
version check of ``tests/render/slurm_check.py`` strips them, having no slurmdbd), run by Debian trixie's slurmctld
24.11 against trixie's slurmdbd 24.11.

The Slurm daemons and commands run inside a private overlay of the trixie root (``tests/render/trixie_overlay.py``:
the shared root is never written) with the run dir bound at its own path, through the accounting fixture of the 22.05
tests (``slurmdbd.py``: MariaDB on a socket without networking, a munged of the run, slurmdbd and slurmctld on 127.0.0.1
and ports the OS hands out). The only changes to the rendered slurm.conf are those of the 22.05 tests
(``teams_files.local_slurm_conf``: node-only programs dropped, power programs ``/bin/true``; the fixture's paths, ports
and munge socket).

The database is this machine's MariaDB (10.11), not trixie's: measured, trixie's slurmdbd 24.11.5 with trixie's client
library (libmariadb3 from MariaDB 11.8.9, Connector/C 3.4) dies at its first query over a TLS connection ("5027 Number
of columns in result (=1) set execeeds maxmimum allowed number of columns (=0)", ``_check_mysql_concat_is_sane``), with
trixie's MariaDB 11.8 (TLS on by default) and with this machine's given a certificate alike. Without TLS on the server
it connects (after one refused try, 5 s). The head node (Ubuntu 24.04: Slurm 23.11, MariaDB 10.11) is not concerned.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI, ROOT
from tests.e2e.namespace import MountNamespace
from tests.e2e.slurmdbd import MARIADB, MARIADBD, SYSTEM_TABLES, AccountingSlurm, run_dir
from tests.e2e.teams_files import TeamsFiles, local_slurm_conf, render_teams
from tests.render.slurm_check import HARMLESS
from tests.render.slurm_versions import TRIXIE_VERSION
from tests.render.trixie_overlay import OverlayRoot, trixie_with

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("accounts-slurmdbd-24-11")]

NEEDS = (
    "usr/sbin/slurmctld",
    "usr/sbin/slurmdbd",
    "usr/sbin/munged",
    "usr/bin/sacctmgr",
    "usr/bin/scontrol",
    "usr/bin/sshare",
    "usr/bin/sacct",
    "usr/bin/squeue",
)
RUNUSER = "/usr/sbin/runuser"
"""What the test runs of the trixie root; MariaDB is this machine's (``slurmdbd.MARIADBD``…)."""
BAD = ("error", "fatal", "defunct", "deprecated", "unrecognized")
"""Words no line of slurmctld's log may hold (but the first start's "no state file yet" lines, and the other lines
``slurm_check.HARMLESS`` names)."""
CONFIG_WORDS = ("fatal", "defunct", "deprecated", "unrecognized", "slurm.conf", "slurmdbd.conf")
"""Words no line of slurmdbd's log may hold. Its first start here also logs error lines about the test's database,
not the config: the first connection refused by trixie's MariaDB client library (Connector/C 3.4 asks for TLS; the
test's MariaDB has none; slurmdbd tries again 5 s later and connects), the small InnoDB buffer pool of the test's
MariaDB, and the cluster's root association at the cluster's first registration."""


class HostMariaDB(AccountingSlurm):
    """MariaDB of this machine (see the module's docstring); every Slurm daemon and command of the trixie root."""

    def start_mariadb(self, timeout: float = 60) -> None:
        wrap, self.wrap = self.wrap, lambda *argv: list(argv)
        try:
            super().start_mariadb(timeout)
        finally:
            self.wrap = wrap


@pytest.fixture(scope="module")
def files() -> TeamsFiles:
    return render_teams("slurm-p5", version=TRIXIE_VERSION)


@pytest.fixture(scope="module")
def cluster(files: TeamsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AccountingSlurm]:
    root_dir = trixie_with(*NEEDS)
    missing = [tool for tool in (MARIADBD, MARIADB, SYSTEM_TABLES) if not Path(tool).exists()]
    if missing:
        (pytest.fail if IN_CI else pytest.skip)(f"missing {', '.join(missing)} (.ci/run installs them)")
    run = run_dir("acct24-")
    root = OverlayRoot(root_dir, tmp_path_factory.mktemp("trixie-overlay"), same_path=[run])
    try:
        slurm = HostMariaDB(
            run,
            cluster=files.cluster,
            slurm_conf=local_slurm_conf(files.slurm_conf),
            slurmdbd_conf=files.slurmdbd_conf,
            files={"topology.conf": files.topology_conf},
            wrap=lambda *argv: root.argv(*argv),
        )
        try:
            slurm.start()
            yield slurm
        finally:
            slurm.cleanup()
    finally:
        root.close()


def test_the_rendered_conf_keeps_the_accounting_keys_the_quick_check_strips(files: TeamsFiles):
    lines = files.slurm_conf.splitlines()
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:h100,gres/gpu:l40s" in lines  # typed: p5's h100, dev's l40s
    assert "AccountingStorageEnforce=associations,limits,qos,safe" in lines
    assert any("TRESBillingWeights=" in line for line in lines if line.startswith("PartitionName="))
    served = (files.slurm_conf, local_slurm_conf(files.slurm_conf))
    assert all("cloud_reg_addrs" not in text and "NoAddrCache" not in text for text in served)


def test_slurmctld_24_11_runs_the_full_teams_conf_with_its_slurmdbd(cluster: AccountingSlurm):
    assert cluster.run("/usr/sbin/slurmctld", "-V").stdout.split()[-1].startswith(TRIXIE_VERSION)
    assert "is UP" in cluster.scontrol("ping")
    conf = cluster.scontrol("show", "config")
    assert "gres/gpu,gres/gpu:h100,gres/gpu:l40s" in conf
    assert "associations,limits,qos,safe" in conf
    tres = {row["type"] + "/" + row["name"] if row["name"] else row["type"] for row in cluster.show("tres", ["type", "name"])}
    assert {"gres/gpu", "gres/gpu:h100", "gres/gpu:l40s"} <= tres, tres
    partitions = cluster.scontrol("show", "partition", "p5")
    assert "TRESBillingWeights=CPU=0,Mem=0,GRES/gpu=1.0" in partitions, partitions


def test_no_error_or_defunct_line_in_the_daemons_logs(cluster: AccountingSlurm):
    for log, words in (("slurmctld.log", BAD), ("slurmdbd.log", CONFIG_WORDS)):
        text = cluster.log(log)
        assert "started" in text, log
        lines = [line for line in text.splitlines() if not any(h.lower() in line.lower() for h in HARMLESS)]
        bad = [line for line in lines if any(word in line.lower() for word in words)]
        assert bad == [], f"{log}:\n" + "\n".join(bad)


def test_each_team_reads_its_own_report_from_24_11s_sshare_and_sacct(cluster: AccountingSlurm, files: TeamsFiles):
    """slurm-p5's teams reconciled into 24.11's slurmdbd, each team's report made from 24.11's sshare and sacct (the
    programs of the trixie root, through wrappers: the node package's own lookups by name), and read by its member
    (``daemon`` for the first team, ``bin`` for the second, the teams' groups in a private ``/etc/group``): each reads its
    own team and cannot open or list the other's."""
    cluster.dir.chmod(0o755)  # the members reach the reports under it
    first, second = (a["name"] for a in files.contract["accounts"][:2])
    contract = json.loads(json.dumps(files.contract))
    for account in contract["accounts"]:
        account["users"] = {first: ["daemon"], second: ["bin"]}.get(account["name"], [])
    (cluster.dir / "accounts.json").write_text(json.dumps(contract))
    bin_dir = cluster.dir / "trixie-bin"  # sacctmgr, squeue, sshare, sacct of 24.11
    bin_dir.mkdir()
    for tool in ("sacctmgr", "squeue", "sshare", "sacct"):
        (bin_dir / tool).write_text("#!/bin/sh\nexec " + shlex.join(cluster.wrap(f"/usr/bin/{tool}")) + ' "$@"\n')
        (bin_dir / tool).chmod(0o755)
    env = {
        **cluster.env,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "TMPDIR": str(cluster.dir),
    }  # the root sees the run dir
    agent = [sys.executable, "-m", "gpucluster_agents"]
    reconcile = [*agent, "accounts", "reconcile", "--file", str(cluster.dir / "accounts.json"), "--slurm-bin-dir", str(bin_dir)]
    applied = subprocess.run(reconcile, env=env, capture_output=True, text=True, check=False)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    group = cluster.dir / "group"
    group.write_text(f"root:x:0:\ndaemon:x:1:\nbin:x:2:\n{first}:x:61001:daemon\n{second}:x:61002:bin\n")
    reports, program = cluster.dir / "team-usage", ROOT / "gpucluster_agents" / "usage" / "show.py"
    with MountNamespace({Path("/etc/group"): group}) as ns:
        published = ns.run(
            [*agent, "team-usage", "publish", "--dir", str(reports), "--file", str(cluster.dir / "accounts.json")], env=env
        )
        assert published.returncode == 0, published.stderr
        for user, team, other in (("daemon", first, second), ("bin", second, first)):
            shown = ns.run(
                [RUNUSER, "-u", user, "--", "/usr/bin/python3", "-I", "-", "--dir", str(reports), "--json"],
                input=program.read_text(),
            )
            assert shown.returncode == 0, shown.stderr
            (report,) = json.loads(shown.stdout)
            assert report["team"] == team and report["members"] == [user]
            assert report["share"]["raw_shares"] == next(a["fairshare"] for a in contract["accounts"] if a["name"] == team)
            assert [m["user"] for m in report["member_shares"]] == [user]  # 24.11's sshare rows, read back
            assert report["usage"]["gpu_seconds"] == 0  # no job ran on this cluster
            assert ns.run([RUNUSER, "-u", user, "--", "/bin/cat", str(reports / f"{other}.json")]).returncode != 0
            assert ns.run([RUNUSER, "-u", user, "--", "/bin/ls", str(reports)]).returncode != 0
    # the admins' series from the same 24.11 programs (squeue's -O fields included): every account, no GPU job
    metrics = [sys.executable, "-m", "gpucluster_agents.metrics"]
    snapshot = cluster.dir / "teams-metrics.json"
    wrote = subprocess.run(
        [*metrics, "team-snapshot", "--slurm-bin-dir", str(bin_dir), "--accounts-file", str(cluster.dir / "accounts.json"),
         "--out", str(snapshot), "--group", "-", "--once"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr
    served = subprocess.run(
        [*metrics, "print", "--no-gpus", "--team-snapshot", str(snapshot)], env=env, capture_output=True, text=True
    )
    assert 'gpucluster_metrics_collector_success{collector="teams"} 1' in served.stdout, served.stdout + wrote.stderr
    for account in contract["accounts"]:
        assert f'gpucluster_slurm_account_gpu_seconds{{account="{account["name"]}"}} 0' in served.stdout
        assert f'gpucluster_slurm_account_gpu_jobs{{account="{account["name"]}",state="running"}} 0' in served.stdout
