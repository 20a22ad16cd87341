# pyright: strict
"""What the usage reports' two ends agree on besides the accounts contract (:mod:`.accounts`, whose ``gpu_prices`` and
``usage`` the report reads): the day grammar of ``--since``/``--until``, which ``gpucluster usage`` checks on the
operator's machine before it sends the head node's ``gpucluster-agent usage`` the same words, and the directory of the
teams' reports, which the head node's publisher writes and ``gpucluster-usage`` reads on the login nodes.

:data:`REPORTS_DIR` is defined in :mod:`gpucluster_agents.usage.show`: that program is shipped as one self-contained
file (it can import nothing of this package); this module is the contract's face of that one definition."""

from __future__ import annotations

import datetime as dt

from ..usage.show import DEFAULT_DIR as REPORTS_DIR

__all__ = ["REPORTS_DIR", "parse_day"]


def parse_day(text: str, today: dt.date, option: str) -> dt.date:
    """``YYYY-MM-DD``, ``today`` or ``yesterday``; ValueError naming the option otherwise."""
    if text == "today":
        return today
    if text == "yesterday":
        return today - dt.timedelta(days=1)
    try:
        return dt.datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        raise ValueError(f"{option} {text!r}: expected a day as YYYY-MM-DD, today or yesterday") from None
