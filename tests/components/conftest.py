"""A recording mocks fixture, reset per test: build components offline and inspect what they register."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from components.plan.engine import Plan, execute
from components.plan.mocks import PlanMocks
from components.spec.catalog import load_catalog


@pytest.fixture
def run_components() -> Callable[..., Plan]:
    """``run_components(fn)`` runs ``fn`` in a fresh mocked stack and returns the recorded plan.

    Each call installs new mocks and a new monitor, so nothing leaks between tests. Exceptions raised
    inside ``fn`` or inside an ``Output.apply`` fail the call.
    """

    def run(program: Callable[[], object], region: str = "us-east-1") -> Plan:
        mocks = PlanMocks(region=region, catalog=load_catalog())
        plan = execute(program, config={"aws:region": region}, mocks=mocks)
        assert plan.error is None, plan.error
        return plan

    return run
