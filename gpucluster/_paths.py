"""Where the package's own files are.

In a checkout, ``gpucluster/templates`` and ``gpucluster/components`` are links to the top-level
``templates/`` and ``components/`` folders (the layout users were promised); a wheel holds the files
themselves. Either way the templates are ``PACKAGE_DIR / "templates"``.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"
