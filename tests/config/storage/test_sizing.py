"""Workload-driven FSx for Lustre sizing: exact arithmetic, table-tested."""

from __future__ import annotations

import pytest

from gpucluster.config.storage import LustreSpec, WorkloadSpec
from gpucluster.config.storage.sizing import (
    METADATA_IOPS,
    Mounter,
    metadata_iops_for,
    nearest_capacities,
    round_up_capacity,
    size_lustre,
    valid_capacity,
)
from gpucluster.facts.catalog import load_catalog

CATALOG = load_catalog()


@pytest.mark.parametrize(
    ("gib", "tier", "efa", "expected"),
    [
        (1, 250, False, 1200),
        (1200, 250, False, 1200),
        (1201, 250, False, 2400),
        (2401, 1000, False, 4800),
        (1, 1000, True, 4800),
        (4801, 1000, True, 9600),
        (10000, 500, True, 19200),
        (20000, 250, True, 38400),
        (1, 125, True, 38400),
    ],
)
def test_capacity_steps(gib, tier, efa, expected):
    assert round_up_capacity(gib, tier, efa) == expected
    assert valid_capacity(expected, tier, efa)


@pytest.mark.parametrize(
    ("gib", "tier", "efa", "valid"),
    [
        (1200, 250, False, True),
        (2400, 250, False, True),
        (3600, 250, False, False),
        (1000, 250, False, False),
        (4800, 1000, True, True),
        (9600, 500, True, True),
        (4800, 500, True, False),
        (2400, 1000, True, False),
    ],
)
def test_valid_capacity(gib, tier, efa, valid):
    assert valid_capacity(gib, tier, efa) is valid


def test_nearest_capacities():
    assert nearest_capacities(3000, 250, False) == (2400, 4800)
    assert nearest_capacities(2000, 250, False) == (1200, 2400)
    assert nearest_capacities(1000, 250, False) == (0, 1200)
    assert nearest_capacities(12000, 500, True) == (9600, 19200)


def test_metadata_iops_steps():
    assert METADATA_IOPS[:5] == (1500, 3000, 6000, 12000, 24000) and METADATA_IOPS[-1] == 192000
    assert metadata_iops_for(1) == 1500 and metadata_iops_for(7000) == 12000 and metadata_iops_for(12001) == 24000
    assert metadata_iops_for(192001) is None


def p5s(n: int, efa: bool = True) -> list[Mounter]:
    return [Mounter("p5", CATALOG["p5.48xlarge"], n, efa)]


def test_read_bound_workload_picks_the_cheapest_tier_that_meets_it():
    w = WorkloadSpec(dataset_size_tib=30, read_mb_per_second_per_gpu=100, checkpoint_size_gib=920, checkpoint_write_seconds=90)
    s = size_lustre(w, LustreSpec(enable_efa=True), p5s(16))
    assert s.gpus == 128 and s.read_mbps == 12800
    assert round(s.checkpoint_mbps) == 10976  # 920 GiB × 1073.74 MB/GiB / 90 s
    assert round(s.data_gib) == 41850  # (30 × 1024 + 3 × 920) / 0.8
    by_tier = {o.tier: o for o in s.options}
    assert (by_tier[125].capacity_gib, by_tier[250].capacity_gib, by_tier[500].capacity_gib, by_tier[1000].capacity_gib) == (
        115200,
        57600,
        48000,
        43200,
    )
    assert s.chosen.tier == 250 and s.chosen.delivered_mbps == 14400 and s.chosen.meets
    assert s.chosen.usd_per_month == round(57600 * 0.21, 2)
    assert s.chosen.delivered_mbps >= s.required_mbps and s.chosen.capacity_gib >= s.data_gib


def test_checkpoint_bound_workload():
    w = WorkloadSpec(dataset_size_tib=1, read_mb_per_second_per_gpu=10, checkpoint_size_gib=2000, checkpoint_write_seconds=30)
    s = size_lustre(w, LustreSpec(), p5s(4))
    assert s.required_mbps == s.checkpoint_mbps > s.read_mbps
    assert all(o.delivered_mbps >= s.required_mbps for o in s.options if o.meets)
    assert s.chosen.meets and s.chosen.capacity_gib % 2400 == 0


def test_fixed_tier_and_capacity_are_kept_and_judged():
    w = WorkloadSpec(dataset_size_tib=1, read_mb_per_second_per_gpu=1000, checkpoint_size_gib=10, checkpoint_write_seconds=60)
    s = size_lustre(w, LustreSpec(throughput_per_unit_storage=125, storage_capacity_gib=2400), p5s(16))
    assert [o.tier for o in s.options] == [125]
    assert s.chosen.capacity_gib == 2400 and s.chosen.delivered_mbps == 300 and not s.chosen.meets


def test_metadata_from_workload():
    w = WorkloadSpec(
        dataset_size_tib=1,
        read_mb_per_second_per_gpu=1,
        checkpoint_size_gib=1,
        checkpoint_write_seconds=60,
        metadata_operations_per_second=5000,
    )
    assert size_lustre(w, LustreSpec(), p5s(1)).metadata_iops == 6000
    assert size_lustre(w, LustreSpec(metadata_iops=12000), p5s(1)).metadata_iops == 12000


def test_client_limit_caps_plain_clients():
    """Two p5 nodes sharing 43,200 MB/s: 21,600 MB/s each is above a plain client's ~12,500 MB/s."""
    w = WorkloadSpec(dataset_size_tib=30, read_mb_per_second_per_gpu=2000, checkpoint_size_gib=1, checkpoint_write_seconds=60)
    plain = size_lustre(w, LustreSpec(throughput_per_unit_storage=1000), p5s(2, efa=True))
    assert plain.clients[0].client == "plain" and plain.clients[0].capped
    efa = size_lustre(w, LustreSpec(throughput_per_unit_storage=1000, enable_efa=True), p5s(2, efa=True))
    assert efa.clients[0].client == "efa" and not efa.clients[0].capped
    gds = size_lustre(w, LustreSpec(throughput_per_unit_storage=1000, enable_efa=True, enable_gpudirect_storage=True), p5s(2))
    assert gds.clients[0].client == "efa+gds" and gds.clients[0].limit_mbps == 150000


def test_lines_show_the_arithmetic():
    w = WorkloadSpec(dataset_size_tib=30, read_mb_per_second_per_gpu=100, checkpoint_size_gib=920, checkpoint_write_seconds=90)
    text = "\n".join(size_lustre(w, LustreSpec(enable_efa=True), p5s(16)).lines())
    assert "read        128 × 100 MB/s per GPU = 12,800 MB/s" in text
    assert "checkpoint  920 GiB in 90 s = 10,976 MB/s" in text
    assert "delivered   14,400 MB/s meets the required 12,800 MB/s" in text
    assert "← chosen" in text
