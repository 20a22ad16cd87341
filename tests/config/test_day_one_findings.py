"""Findings for what would fail on a cluster's first day, each asserted in the words a user sees: a declared user in
no team (cannot submit), an image lock written for another Ubuntu release than the group's, alerts nobody receives,
SSH keys on a cluster without SSH."""

from __future__ import annotations

import copy
from typing import Any

from gpucluster.config.errors import ConfigError, Finding, Level
from gpucluster.facts.images import NVIDIA_DLAMI
from gpucluster.load import load_spec
from tests.conftest import IDENTITY_DECLARED, group, make_config

P5 = group(name="p5", maxSize=2)
TEAMS = [{"name": "research", "gpuQuota": {"h100": 8}, "users": ["alice", "bob"]}]
LOCK_2204 = {
    "imageId": "ami-0123456789abcdef0",
    "ssmParameter": NVIDIA_DLAMI.format(arch="x86_64", release="22.04"),
    "lockedAt": "2026-12-01",
}


def slurm_config(*groups: dict[str, Any], monitoring: dict[str, Any] | None = None, **slurm: Any) -> dict[str, Any]:
    section = {"identity": copy.deepcopy(IDENTITY_DECLARED), **slurm}
    config = make_config(*(groups or (P5,)), slurm=section)
    if monitoring is not None:
        config["gpucluster:monitoring"] = monitoring
    return config


def findings(config: dict[str, Any]) -> list[Finding]:
    try:
        return list(load_spec(config, stack="day-one").findings)
    except ConfigError as exc:
        return list(exc.findings)


def one(config: dict[str, Any], code: str) -> Finding:
    found = [f for f in findings(config) if f.code == code]
    assert len(found) == 1, [(f.code, f.path) for f in findings(config)]
    return found[0]


def codes(config: dict[str, Any]) -> set[str]:
    return {f.code for f in findings(config)}


def test_a_declared_user_in_no_team_cannot_submit_and_is_told():
    f = one(slurm_config(accounting={}, teams=TEAMS), "user-in-no-team")
    assert f.level is Level.WARNING and f.path == "gpucluster:slurm.identity.users[2]"
    assert f.render() == (
        "gpucluster:slurm.identity.users[2]: user 'carol' is in no team: with slurm.teams Slurm enforces associations "
        "(AccountingStorageEnforce=associations), so carol cannot submit a job Fix: add 'carol' to the users of a team in "
        "slurm.teams (leave it so only for someone who never submits)"
    )
    everyone = [{**TEAMS[0], "users": ["alice", "bob", "carol"]}]
    assert "user-in-no-team" not in codes(slurm_config(accounting={}, teams=everyone))
    assert "user-in-no-team" not in codes(slurm_config())  # no teams: no associations enforced


def test_an_image_lock_for_another_release_than_the_groups_default_is_stale():
    """A lock written by hand from the 22.04 parameter on a Slurm group, whose default image is 24.04: before, no
    finding at all (the stale check compared only an explicit imageSsmParameter)."""
    f = one(slurm_config(group(name="p5", maxSize=2, imageLock=LOCK_2204)), "image-lock-stale")
    assert f.level is Level.ERROR and f.path == "gpucluster:nodeGroups[0].imageLock.ssmParameter"
    assert "(Ubuntu 22.04, the group's image is Ubuntu 24.04)" in f.message
    assert "reads by default /aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/" in f.message
    assert "or set imageSsmParameter to the locked one if that image is meant" in f.fix
    same = {**LOCK_2204, "ssmParameter": NVIDIA_DLAMI.format(arch="x86_64", release="24.04")}
    assert "image-lock-stale" not in codes(slurm_config(group(name="p5", maxSize=2, imageLock=same)))
    # A plain group (no scheduler) defaults to 22.04: the same lock is current there.
    assert "image-lock-stale" not in codes(make_config(group(name="p5", maxSize=2, imageLock=LOCK_2204)))


def test_alerts_with_no_subscriber_are_a_warning():
    f = one(slurm_config(), "alerts-no-subscriber")
    assert f.level is Level.WARNING and f.path == "gpucluster:monitoring"
    assert "go to an SNS topic that has no subscriber, so nobody is told" in f.message
    assert f.fix.startswith("add monitoring.alarmEmails (e.g. [oncall@example.com]) or monitoring.subscriptions")
    assert "alerts-no-subscriber" not in codes(slurm_config(monitoring={"alarmEmails": ["oncall@example.com"]}))
    assert "alerts-no-subscriber" not in codes(slurm_config(monitoring={"enabled": False}))
    assert "alerts-no-subscriber" not in codes(make_config(P5))  # no scheduler: no monitoring at all


def test_ssh_keys_on_a_cluster_without_ssh_open_nothing():
    f = one(slurm_config(), "ssh-keys-without-ssh")
    assert f.level is Level.WARNING and f.path == "gpucluster:slurm.identity.users[2].sshPublicKeys"
    assert "user 'carol' has SSH keys, but this cluster has no SSH to its login nodes" in f.message
    assert "add slurm.loginNodes.ssh" in f.fix
    with_ssh = slurm_config(loginNodes={"count": 1, "ssh": {"allowedCidrs": ["203.0.113.0/24"]}})
    assert "ssh-keys-without-ssh" not in codes(with_ssh)


def test_provisioning_grafana_dashboards_says_pulumi_up_must_run_in_the_vpc():
    f = one(slurm_config(monitoring={"grafana": {"enabled": True}}), "grafana-provision-from-vpc")
    assert f.level is Level.WARNING and f.path == "gpucluster:monitoring.grafana.provisionDashboards"
    assert "the workspace admits only its VPC endpoint" in f.message
    assert "grafana.provisionDashboards to false" in f.fix and "gpucluster dashboards --out" in f.fix
    off = {"grafana": {"enabled": True, "provisionDashboards": False}}
    assert "grafana-provision-from-vpc" not in codes(slurm_config(monitoring=off))
    assert "grafana-provision-from-vpc" not in codes(slurm_config())  # no Grafana
