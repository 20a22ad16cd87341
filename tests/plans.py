"""The plans of the shipped stacks, made once per test process and shared by every test that reads one.

A shipped stack's plan (``run_plan(stack)``: the real ``__main__.py`` under the mocks, the stack file as committed) is
the same every time in one process (``tests/tools/plan/test_plan.py::test_plans_are_deterministic`` holds that), so
the render, component and plan tests that read it need not run the stack program again: about 30 modules read these
plans, several of them at collection, and running each stack once instead of once per reader is most of what keeps
``pytest -m "not slow"`` short (CONTRIBUTING.md, "The fast loop"). Each caller gets its own deep copy, so a test that
changes its plan changes no other test's.

A test that plans with other inputs (``config_overrides``, another project directory, a monkeypatched lookup) calls
``run_plan`` itself.
"""

from __future__ import annotations

import copy
import functools

from gpucluster.tools.plan.run.engine import Plan, run_plan
from tests.conftest import ROOT


@functools.cache
def _planned(stack: str) -> Plan:
    return run_plan(stack, ROOT)


def shipped_plan(stack: str) -> Plan:
    """``run_plan(stack)`` for a shipped stack, planned once per process; a copy of its own for each caller."""
    return copy.deepcopy(_planned(stack))
