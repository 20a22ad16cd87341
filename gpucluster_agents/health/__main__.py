# pyright: strict
"""``python -m gpucluster_agents.health <mode>``; see :mod:`gpucluster_agents.health.cli`."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
