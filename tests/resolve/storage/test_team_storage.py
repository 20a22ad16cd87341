"""Who keeps root on the stack's file system, and what the setup host creates (resolve.team_storage)."""

from __future__ import annotations

import pytest

from gpucluster.config.kubernetes import TeamSpec
from gpucluster.load import load_spec
from gpucluster.resolve.storage.team import TEAM_DIRECTORY_MODE, team_directory, team_owner
from tests.conftest import group, make_config

LUSTRE = {"storageCapacityGib": 1200, "throughputPerUnitStorage": 125}
TEAMS = {"version": "1.33", "teams": [{"name": "research"}, {"name": "applied"}, {"name": "ops", "mountSharedStorage": False}]}


def admins(**keys):
    storage = load_spec(make_config(group(**keys.pop("group", {})), **keys), stack="t").cluster.storage
    return storage.lustre.admins if storage is not None and storage.lustre is not None else None


@pytest.mark.parametrize(
    ("keys", "head", "setup", "paths"),
    [
        ({"storage": {"lustre": LUSTRE}}, False, False, []),
        ({"storage": {"lustre": {**LUSTRE, "directories": [{"path": "/data"}]}}}, False, True, ["/data"]),
        ({"storage": {"lustre": LUSTRE}, "slurm": {"nodeGroups": [{"name": "gpu"}]}}, True, False, []),
        (
            {
                "storage": {"lustre": LUSTRE},
                "kubernetes": TEAMS,
                "group": {"scheduler": "kubernetes"},
                "network": {"availabilityZones": ["us-east-1a", "us-east-1b"]},
            },
            False,
            True,
            ["/teams/applied", "/teams/research"],
        ),
        (
            {
                "storage": {"lustre": LUSTRE},
                "slurm": {"headNode": {"mountSharedStorage": False}, "nodeGroups": [{"name": "gpu"}]},
            },
            False,
            False,
            [],
        ),
    ],
    ids=["nothing-to-create", "declared", "head-node", "teams", "head-node-without-the-mount"],
)
def test_admin_hosts(keys, head, setup, paths):
    got = admins(**keys)
    assert got is not None
    assert (got.head_node, got.setup_host, [d.path for d in got.directories]) == (head, setup, paths)


def test_no_file_system_no_admins():
    assert admins() is None


def test_a_teams_directory_and_owner_are_its_own_and_stable():
    research, applied = TeamSpec(name="research"), TeamSpec(name="applied")
    assert team_directory("research") == "/teams/research" and TEAM_DIRECTORY_MODE == "2770"
    assert team_owner(research) == team_owner(
        TeamSpec(name="research", groups=("x",))
    )  # the name decides (teams[].posix derived from it)
    assert team_owner(research) != team_owner(applied)
    assert all(i >= 200_000 for i in team_owner(research))  # above the distributions' own ids and nobody (65534)
