"""Instance facts come from the DescribeInstanceTypes-shaped data file, not from code."""

from __future__ import annotations

import pytest

from gpucluster.facts.catalog import InstanceFacts

# (type, accelerators, EFA cards, ENA-only card indexes, NVMe disks, GDS) — FACTS.md / DescribeInstanceTypes
EXPECTED = [
    ("p4d.24xlarge", 8, 4, [], 8, False),
    ("p4de.24xlarge", 8, 4, [], 8, False),
    ("p5.48xlarge", 8, 32, [], 8, True),
    ("p5e.48xlarge", 8, 32, [], 8, True),
    ("p5en.48xlarge", 8, 16, [], 8, True),
    ("p6-b200.48xlarge", 8, 8, [], 8, True),
    ("p6-b300.48xlarge", 8, 16, [0], 8, False),
    ("g5.48xlarge", 8, 1, [], 2, False),
    ("g6e.48xlarge", 8, 4, [], 4, False),
    ("trn1.32xlarge", 16, 8, [], 4, False),
    ("m7i.2xlarge", 0, 0, [0], 0, False),
]


@pytest.mark.parametrize(("itype", "accelerators", "efa_cards", "ena_only", "disks", "gds"), EXPECTED)
def test_facts(catalog, itype, accelerators, efa_cards, ena_only, disks, gds):
    f = catalog[itype]
    assert f.accelerator_count == accelerators
    assert len(f.efa_cards) == efa_cards
    assert [c.index for c in f.ena_only_cards] == ena_only
    assert f.nvme_disk_count == disks
    assert f.gds_supported is gds


def test_gpu_models_and_memory(catalog):
    assert catalog["p5.48xlarge"].accelerator_model == "H100"
    assert catalog["p5e.48xlarge"].accelerator_model == "H200"
    assert catalog["p4d.24xlarge"].accelerator_memory_mib == 40960
    assert catalog["p4de.24xlarge"].accelerator_memory_mib == 81920
    assert catalog["trn1.32xlarge"].accelerators[0].kind == "neuron"
    assert catalog["trn1.32xlarge"].gpu_count == 0


def test_bandwidth_sums_cards(catalog):
    assert catalog["p5.48xlarge"].efa_bandwidth_gbps == 3200
    assert catalog["p4d.24xlarge"].efa_bandwidth_gbps == 400
    assert catalog["p6-b300.48xlarge"].efa_bandwidth_gbps == 6400


def test_unknown_type_suggests(catalog):
    assert "p5.48xlarge" in catalog.suggest("p5.48xl")
    with pytest.raises(KeyError, match="unknown instance type"):
        catalog["p5.96xlarge"]


def _entry(cards: int, efa_max: int, interface_types: list[str] | None) -> dict:
    card = lambda i: {  # noqa: E731
        "NetworkCardIndex": i,
        "BaselineBandwidthInGbps": 100.0,
        "MaximumNetworkInterfaces": 2,
        **({"InterfaceTypes": interface_types if i else ["interface"]} if interface_types is not None else {}),
    }
    return {
        "InstanceType": "x.test",
        "NetworkInfo": {
            "EfaSupported": True,
            "EfaInfo": {"MaximumEfaInterfaces": efa_max},
            "NetworkCards": [card(i) for i in range(cards)],
        },
    }


def test_ena_only_card_from_interface_types():
    f = InstanceFacts.from_describe(_entry(5, 4, ["interface", "efa", "efa-only"]))
    assert [c.index for c in f.efa_cards] == [1, 2, 3, 4]
    assert [c.index for c in f.ena_only_cards] == [0]


def test_without_interface_types_surplus_low_cards_are_ena_only():
    """Older data has no InterfaceTypes: with more cards than EFA interfaces, the first are ENA-only."""
    f = InstanceFacts.from_describe(_entry(5, 4, None))
    assert [c.index for c in f.efa_cards] == [1, 2, 3, 4]
    g = InstanceFacts.from_describe(_entry(4, 4, None))
    assert [c.index for c in g.efa_cards] == [0, 1, 2, 3]


def test_every_type_has_extras(catalog):
    for itype in catalog:
        f = catalog[itype]
        assert f.estimated_power_kw and f.estimated_power_kw > 0, itype
        assert f.power_basis, itype
