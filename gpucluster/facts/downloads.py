"""Everything a node or a site machine downloads at boot or install, pinned: what it is, where from, how it is checked.

- **nodeadm** (EKS Hybrid Nodes, the site's ``install.sh``): from its versioned release path
  (:data:`NODEADM_URL`; the eks-hybrid release build publishes ``releases/<version>/bin/linux/<arch>/nodeadm`` with a
  ``nodeadm.sha256`` beside it, as well as ``releases/latest``), checked with ``sha256sum -c`` against the sha256 the
  stack pins (``hybrid.kubernetes.nodeadm``). AWS's documentation gives only the ``latest`` URL and no checksum, so
  the version and sha256 are config inputs, not facts: install.sh refuses to download nodeadm until they are set.
- **boto3 for the site's agent** (the hybrid bundle's ``install.sh``): ``requirements.txt`` with every package pinned
  by version and sha256 (:func:`site_requirements`, from ``data/site_requirements.json``), installed with
  ``pip install --require-hashes --no-deps --only-binary :all:``.
- **The FSx for Lustre client repository key** (``mount-lustre.sh`` on Ubuntu nodes without the client):
  :data:`FSX_UBUNTU_KEY_URL`. The script accepts the file only if it holds exactly one primary key and, when
  :data:`FSX_UBUNTU_KEY_FINGERPRINT` is set, only that key. The FSx user guide publishes no fingerprint for it and none
  could be fetched where this was written, so the constant is None: the key is then trusted over TLS and its
  fingerprint logged (``/var/log/gpucluster/lustre.log``) so an operator can compare it and pin it here.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data" / "site_requirements.json"

NODEADM_URL = "https://hybrid-assets.eks.amazonaws.com/releases/{version}/bin/linux/{arch}/nodeadm"
"""nodeadm's versioned download (github.com/aws/eks-hybrid, buildspecs/prod-release-nodeadm.yml and
hack/validate-release-artifacts.sh: ``releases/${VERSION}/bin/linux/{amd64,arm64}/nodeadm[.sha256]``)."""

NODEADM_ARCHES = ("amd64", "arm64")

FSX_UBUNTU_KEY_URL = "https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc"
"""The FSx Lustre client repository's signing key (FSx for Lustre user guide, "Installing the Lustre client")."""

FSX_UBUNTU_KEY_FINGERPRINT: str | None = None
"""The primary key fingerprint (40 uppercase hex digits, as ``gpg --with-colons`` prints it) that key must have; None
while no authoritative value is known (see the module's docstring)."""


def site_requirements() -> str:
    """The bundle's ``requirements.txt``: ``name==version ; marker --hash=sha256:…`` per line."""
    doc = json.loads(DATA.read_text())
    lines = [f"# {doc['about']}", f"# Source: {doc['source']}"]
    for p in doc["packages"]:
        marker = f" ; {p['marker']}" if p["marker"] else ""
        lines.append(f"{p['name']}=={p['version']}{marker} --hash=sha256:{p['sha256']}")
    return "\n".join(lines) + "\n"
