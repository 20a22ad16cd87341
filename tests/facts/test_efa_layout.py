"""Launch-template interfaces derived from each instance's network cards."""

from __future__ import annotations

from gpucluster.facts.efa import InterfaceSlot, efa_interface_count, interface_layout, ips_per_node


def test_p5_current_layout(catalog):
    slots = interface_layout(catalog["p5.48xlarge"], True, "current")
    assert slots[0] == InterfaceSlot(0, 0, "interface")
    assert slots[1] == InterfaceSlot(0, 1, "efa-only")
    assert slots[2:] == tuple(InterfaceSlot(c, 0, "efa-only") for c in range(1, 32))
    assert efa_interface_count(slots) == 32
    assert ips_per_node(slots) == 1


def test_p5_legacy_layout(catalog):
    slots = interface_layout(catalog["p5.48xlarge"], True, "legacy")
    assert slots[0] == InterfaceSlot(0, 0, "efa")
    assert slots[1:] == tuple(InterfaceSlot(c, 1, "efa") for c in range(1, 32))
    assert efa_interface_count(slots) == 32
    assert ips_per_node(slots) == 32


def test_p6_b300_card_zero_is_ena_only(catalog):
    slots = interface_layout(catalog["p6-b300.48xlarge"], True, "current")
    assert slots[0] == InterfaceSlot(0, 0, "interface")
    assert slots[1:] == tuple(InterfaceSlot(c, 0, "efa-only") for c in range(1, 17))
    assert not any(s.network_card_index == 0 and s.is_efa for s in slots)


def test_p4d_four_cards(catalog):
    slots = interface_layout(catalog["p4d.24xlarge"], True, "current")
    assert [(s.network_card_index, s.device_index, s.interface_type) for s in slots] == [
        (0, 0, "interface"),
        (0, 1, "efa-only"),
        (1, 0, "efa-only"),
        (2, 0, "efa-only"),
        (3, 0, "efa-only"),
    ]


def test_single_card_efa(catalog):
    slots = interface_layout(catalog["g5.48xlarge"], True, "current")
    assert slots == (InterfaceSlot(0, 0, "interface"), InterfaceSlot(0, 1, "efa-only"))


def test_efa_off_or_unsupported_gives_primary_only(catalog):
    assert interface_layout(catalog["p5.48xlarge"], False) == (InterfaceSlot(0, 0, "interface"),)
    assert interface_layout(catalog["g6e.xlarge"], True) == (InterfaceSlot(0, 0, "interface"),)


def test_layout_fits_each_card(catalog):
    for itype in catalog:
        facts = catalog[itype]
        slots = interface_layout(facts, True, "current")
        for card in facts.network_cards:
            assert sum(s.network_card_index == card.index for s in slots) <= card.max_interfaces, itype
