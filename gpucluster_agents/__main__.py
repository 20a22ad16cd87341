# pyright: strict
"""``python -m gpucluster_agents <command> <hostlist>``; see gpucluster_agents.cli."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
