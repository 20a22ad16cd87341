"""Where the package's own files are.

The Pulumi components and the Jinja2 templates are the top-level folders ``components/`` and ``templates/`` of a
checkout (the layout users were promised), installed as ``gpucluster.components`` and ``gpucluster.templates``
(pyproject.toml's package-dir). A wheel holds them inside the package; an editable install and a checkout keep them
beside it.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _folder(name: str) -> Path:
    inside = PACKAGE_DIR / name
    return inside if inside.is_dir() else PACKAGE_DIR.parent / name


TEMPLATES_DIR = _folder("templates")
COMPONENTS_DIR = _folder("components")
