"""Slurm's major releases, the slurmd each Ubuntu LTS ships, and which cloud image a site's controller can drive.

A site that bursts keeps its own slurmctld; the cloud nodes' slurmd must not be newer than it and at most two
major releases older (SchedMD's upgrade guide: daemons talk to the two previous major releases). Slurm node
groups boot Ubuntu with the distribution's slurm-wlm, so the controller's release decides the Ubuntu release of
the cloud image (or the site brings an image with its own slurmd and says which release it has).
"""

from __future__ import annotations

MAJORS = ("20.11", "21.08", "22.05", "23.02", "23.11", "24.05", "24.11", "25.05")
"""SchedMD's major releases in order (the window counts steps in this list, not calendar months)."""

UBUNTU_SLURM = {"22.04": "21.08", "24.04": "23.11"}
"""slurm-wlm in each Ubuntu LTS's archive (jammy: 21.08.5, noble: 23.11.4)."""

WINDOW = 2
"""How many major releases older than slurmctld a slurmd may be."""


def compatible(controller: str, slurmd: str) -> bool:
    """True when a slurmd of release ``slurmd`` may register with a slurmctld of release ``controller``."""
    if controller not in MAJORS or slurmd not in MAJORS:
        return False
    behind = MAJORS.index(controller) - MAJORS.index(slurmd)
    return 0 <= behind <= WINDOW


def cloud_ubuntu_for(controller: str) -> str | None:
    """The newest Ubuntu LTS whose slurm-wlm works with ``controller``, or None when none does (bring an image)."""
    fitting = [release for release, slurmd in UBUNTU_SLURM.items() if compatible(controller, slurmd)]
    return max(fitting) if fitting else None
