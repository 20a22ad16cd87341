"""Network interface layout for a launch template, derived from the instance's own network cards.

Two layouts:

* ``current`` — what AWS now recommends for accelerated instances with several network cards: the
  primary ENA interface on network card 0 / device index 0; an ``efa-only`` interface on card 0 /
  device index 1 when card 0 takes EFA; an ``efa-only`` interface at device index 0 on every other
  EFA-capable card. ``efa-only`` interfaces take no IP address, so a 32-card p5 uses one IP, not 32.
  ENA-only cards (p6-b300's card 0) get only the primary interface.
* ``legacy`` — the layout terraform-aws-eks and pulumi-eks used: a full ``efa`` interface on card 0 /
  device 0 and an ``efa`` interface at device index 1 on every other EFA-capable card. Each takes an
  IP address. Kept for AMIs or tools that expect it.

Without EFA a node gets one primary ENA interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpucluster.facts.catalog import InstanceFacts

EfaLayout = Literal["current", "legacy"]


@dataclass(frozen=True)
class InterfaceSlot:
    network_card_index: int
    device_index: int
    interface_type: str  # "interface" (ENA) | "efa" | "efa-only"

    @property
    def takes_ip(self) -> bool:
        return self.interface_type != "efa-only"

    @property
    def is_efa(self) -> bool:
        return self.interface_type in ("efa", "efa-only")


def interface_layout(facts: InstanceFacts, enable_efa: bool, layout: EfaLayout = "current") -> tuple[InterfaceSlot, ...]:
    """The interfaces a launch template should declare for ``facts``, primary first."""
    primary_card = facts.network_cards[0].index if facts.network_cards else 0
    if not enable_efa or not facts.efa_cards:
        return (InterfaceSlot(primary_card, 0, "interface"),)
    efa_cards = facts.efa_cards
    card0_takes_efa = efa_cards[0].index == primary_card
    slots: list[InterfaceSlot] = []
    if layout == "legacy":
        slots.append(InterfaceSlot(primary_card, 0, "efa" if card0_takes_efa else "interface"))
        slots += [InterfaceSlot(c.index, 1, "efa") for c in efa_cards if c.index != primary_card]
    else:
        slots.append(InterfaceSlot(primary_card, 0, "interface"))
        if card0_takes_efa:
            slots.append(InterfaceSlot(primary_card, 1, "efa-only"))
        slots += [InterfaceSlot(c.index, 0, "efa-only") for c in efa_cards if c.index != primary_card]
    return tuple(slots)


def efa_interface_count(slots: tuple[InterfaceSlot, ...]) -> int:
    return sum(1 for s in slots if s.is_efa)


def ips_per_node(slots: tuple[InterfaceSlot, ...]) -> int:
    return sum(1 for s in slots if s.takes_ip)
