"""Where the package's data lives: inside the installed wheel, or at the top of a checkout.

A wheel carries ``templates/`` as ``gpucluster/templates``; a checkout (and an editable install of it) keeps
``templates/`` at the repository's top level, the layout its users were promised.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """``gpucluster/<name>`` in a wheel, else ``<checkout>/<name>``."""
    inside = PACKAGE_DIR / name
    return inside if inside.is_dir() else PACKAGE_DIR.parent / name
