"""A team's POSIX identity (``teams[].posix``): defaults decided from the team's name alone, explicit values
kept, and the load checks that keep identities apart (bad values are rows of test_bad_configs_kubernetes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpucluster.config.checks.kubernetes.tenancy import check_team_posix, free_uid_first
from gpucluster.config.kubernetes import KubernetesSpec, TeamSpec
from gpucluster.config.kubernetes.team_posix import (
    BAND_FIRST,
    KUBERNETES_MAX_ID,
    SLOT_SIZE,
    SLOTS,
    TeamPosix,
    default_slot,
    slot_first,
)
from gpucluster.facts.catalog import load_catalog
from tests.conftest import make_config, parse_spec


def test_the_band_ends_below_systemds_foreign_range_and_kubernetes_limit():
    last = slot_first(SLOTS - 1) + SLOT_SIZE - 1
    assert BAND_FIRST == 2_000_200_000 and last == 2_147_349_999 < 2_147_352_576 <= KUBERNETES_MAX_ID


def test_defaults_come_from_the_name_only():
    research = TeamSpec(name="research").effective_posix
    assert research == TeamPosix(gid=2_064_810_000, uid_first=2_064_810_000, uid_count=10_000)
    assert TeamSpec(name="research", namespace="ml-research", groups=("x",)).effective_posix == research
    # the slot is the first 8 bytes of SHA-256("research") modulo the slots of the band
    assert default_slot("research") == (research.uid_first - BAND_FIRST) // SLOT_SIZE


@given(st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True), min_size=1, max_size=6, unique=True))
def test_adding_removing_or_reordering_teams_moves_no_ones_ids(names):
    alone = {n: TeamSpec(name=n).effective_posix for n in names}
    together = KubernetesSpec(teams=tuple(TeamSpec(name=n) for n in reversed(names)))
    assert {t.name: t.effective_posix for t in together.teams} == alone


def test_explicit_values_are_kept_and_the_group_follows_uid_first():
    assert TeamSpec(name="a", posix={"uidFirst": 70000}).effective_posix == TeamPosix(gid=70000, uid_first=70000, uid_count=10000)
    explicit = TeamSpec.model_validate({"name": "a", "posix": {"uidFirst": 70000, "uidCount": 50, "gid": 4242}})
    assert explicit.effective_posix == TeamPosix(gid=4242, uid_first=70000, uid_count=50)
    assert explicit.effective_posix.uid_last == 70049


def _findings(teams):
    spec = parse_spec(make_config(kubernetes={"teams": teams}))
    return list(check_team_posix(spec.kubernetes, spec, load_catalog()))


def test_colliding_default_slots_are_refused_with_a_free_range_to_set():
    """team7 and team80 fall in the same slot: the second is refused, and the fix names a free uidFirst that
    indeed clears the first."""
    assert default_slot("team7") == default_slot("team80")
    (finding,) = _findings([{"name": "team7"}, {"name": "team80"}])
    assert finding.code == "team-uid-overlap" and finding.path == "gpucluster:kubernetes.teams[1].posix.uidFirst"
    free = int(finding.fix.split("uidFirst: ")[1].split()[0])
    fixed = [{"name": "team7"}, {"name": "team80", "posix": {"uidFirst": free}}]
    assert _findings(fixed) == []


def test_teams_apart_pass():
    assert (
        _findings([{"name": "research"}, {"name": "applied"}, {"name": "ops", "posix": {"uidFirst": 100000, "gid": 100000}}])
        == []
    )


def test_free_range_skips_what_is_taken():
    taken = [
        TeamPosix(gid=1, uid_first=slot_first(0), uid_count=SLOT_SIZE),
        TeamPosix(gid=2, uid_first=slot_first(1) + 5, uid_count=1),
    ]
    assert free_uid_first(taken, SLOT_SIZE) == slot_first(2)
    too_many = KUBERNETES_MAX_ID - BAND_FIRST + 2  # from the band's first ID it would end past Kubernetes' limit
    assert free_uid_first([], too_many) is None
