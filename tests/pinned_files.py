"""Pinned upstream files the tests read (CRDs and Helm chart values), never committed to this repository.

Each file is named by its public repository, the commit of the release tag it comes from, its path there
and its sha256. The tests find a file in one of two places:

1. ``$GPUCLUSTER_K8S_SCHEMAS`` when it is set: a directory laid out ``<repo-name>/<tag>/<file name>``
   (``.ci/run`` points it at ``../shared/k8s-schemas`` when that directory exists);
2. otherwise a download cache (``$GPUCLUSTER_CACHE``, default ``~/.cache/gpucluster``): a file missing
   there is fetched from ``$GPUCLUSTER_K8S_SCHEMAS_URL`` (default raw.githubusercontent.com), as
   ``<base>/<owner>/<repo>/<commit>/<path>``.

Either way the bytes must match the pinned sha256, or the file is refused with a message that says which
file, where it came from, and what to do. ``python -m tests.pinned_files fetch`` fills the cache ahead of
the test run (``.ci/run`` does this on a clone without ``../shared``) and exits 1 with one line per file
that could not be had, never a traceback.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Pin:
    relative: str
    """Where the file lies under the schemas directory: ``<repo-name>/<tag>/<file name>``."""
    repository: str
    commit: str
    path: str
    sha256: str

    shared: str = ""
    """Where else a copy may lie, under ``../shared/schemas`` (``$GPUCLUSTER_SCHEMAS``): files that are not
    Kubernetes schemas (the CloudWatch agent's config schema) are kept there, checked against the same sha256."""

    def url(self, base: str) -> str:
        return f"{base.rstrip('/')}/{self.repository}/{self.commit}/{self.path}"


_KUEUE = ("kubernetes-sigs/kueue", "8eab68778fc1b52affe165fdf5af29d1e9b4f3cb")
_JOBSET = ("kubernetes-sigs/jobset", "f22e565ac3cc3265c7c45ef67ecffdc689af5d77")
_NETOP = ("Mellanox/network-operator", "85afd6d9c6978eb871a3292b9897f49746cc43cd")
_GPUOP = ("NVIDIA/gpu-operator", "10ee5b3638b89e11e949412aafa5ba99279c3721")
_EKS_CHARTS = ("aws/eks-charts", "5239609242f3430be50fb0b714a24d3ef2b47983")
_TRAINER = ("kubeflow/trainer", "4445c12aa62e4345b0c2c6ac9b215a70eca46ed7")
_FSX_CSI = ("kubernetes-sigs/aws-fsx-csi-driver", "0267bab6c628903ebe08d8eaedc444df1f3785d9")
_KUEUE_CRDS = "config/components/crd/bases"

PINS: dict[str, Pin] = {
    p.relative: p
    for p in (
        Pin(
            "kueue/v0.19.2/kueue.x-k8s.io_resourceflavors.yaml",
            *_KUEUE,
            f"{_KUEUE_CRDS}/kueue.x-k8s.io_resourceflavors.yaml",
            "19e339c47e9ca3fa2c9eeddd27715a512f765c4794ed859733408a9715720173",
        ),
        Pin(
            "kueue/v0.19.2/kueue.x-k8s.io_clusterqueues.yaml",
            *_KUEUE,
            f"{_KUEUE_CRDS}/kueue.x-k8s.io_clusterqueues.yaml",
            "e0a5fc9b370c70f3d993d4f599865817338ecf94187b30b15b12ff33c579bd55",
        ),
        Pin(
            "kueue/v0.19.2/kueue.x-k8s.io_localqueues.yaml",
            *_KUEUE,
            f"{_KUEUE_CRDS}/kueue.x-k8s.io_localqueues.yaml",
            "dd10ef8d3578e7212fa52763549e7b6be0949793a5b924495fcd293330109fed",
        ),
        Pin(
            "kueue/v0.19.2/kueue.x-k8s.io_topologies.yaml",
            *_KUEUE,
            f"{_KUEUE_CRDS}/kueue.x-k8s.io_topologies.yaml",
            "f703575d3bb64d26f6e839f831e01646367ed41a89b3abf163f8e842ca1c4d2b",
        ),
        Pin(
            "kueue/v0.19.2/kueue.x-k8s.io_workloads.yaml",
            *_KUEUE,
            f"{_KUEUE_CRDS}/kueue.x-k8s.io_workloads.yaml",
            "1970ff6fcc5dc1a29e3f290ed736032c5d4509c94efe2c642d64a244ad1b8aa5",
        ),
        Pin(
            "kueue/v0.19.2/controller_manager_config.yaml",
            *_KUEUE,
            "config/components/manager/controller_manager_config.yaml",
            "8e93a0218d6f2cfdedf1297b20811742d55991e5d030273c5f970543ff06e53b",
        ),
        Pin(
            "jobset/v0.12.0/jobset.x-k8s.io_jobsets.yaml",
            *_JOBSET,
            "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
            "d022b87624512cf0b6741b31b24a2bea9945b5a838b50713af29332c878bb6fe",
        ),
        Pin(
            "network-operator/v26.4.1/mellanox.com_nicclusterpolicies.yaml",
            *_NETOP,
            "deployment/network-operator/crds/mellanox.com_nicclusterpolicies.yaml",
            "6e7233dcad83ff1f2f2e14dde7b7bce85129cfd249ec87780f76d67c49fc67df",
        ),
        Pin(
            "network-operator/v26.4.1/values.yaml",
            *_NETOP,
            "deployment/network-operator/values.yaml",
            "18f0caf13a7c728c1c08f7232e4ca4422d8d7515f0b2f19713bec9c62e9bcac5",
        ),
        Pin(
            "network-operator/v26.4.1/Chart.yaml",
            *_NETOP,
            "deployment/network-operator/Chart.yaml",
            "766812d2dac7e06265e29051a95cb6435aa005e9b6ebb90f58e61c3901fa0067",
        ),
        Pin(
            "gpu-operator/v26.7.0/nvidia.com_clusterpolicies.yaml",
            *_GPUOP,
            "deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml",
            "fcece7d07504e57fd5815525b3baa1eccc659a2f3b48895578be731dcde4042a",
        ),
        Pin(
            "gpu-operator/v26.7.0/values.yaml",
            *_GPUOP,
            "deployments/gpu-operator/values.yaml",
            "21ebfaa82dbfb6ad92b3c0ff33d7c891c7e66c9a0b008ce1c60a1897bae34418",
        ),
        Pin(
            "gpu-operator/v26.7.0/Chart.yaml",
            *_GPUOP,
            "deployments/gpu-operator/Chart.yaml",
            "77e74cbc232317ca82ea772a5064d9fe5139c8b3a0a836ed96fdf84938873364",
        ),
        Pin(
            "eks-charts/v0.0.242/values.yaml",
            *_EKS_CHARTS,
            "stable/aws-efa-k8s-device-plugin/values.yaml",
            "a2ca624e12b53dab0317a8437c8a4d095d695daad40bc616299c50083efd2441",
        ),
        Pin(
            "eks-charts/v0.0.242/Chart.yaml",
            *_EKS_CHARTS,
            "stable/aws-efa-k8s-device-plugin/Chart.yaml",
            "d040cb7de43b3f1815ec85e58c628ca1ed42c8430231aadebf57120bba00035f",
        ),
        Pin(
            "trainer/v1.9.4/kubeflow.org_pytorchjobs.yaml",
            *_TRAINER,
            "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
            "8b8a8a719cc94173169290251e817f7ac2bb425c20b6c2fa813397bcf4e932ed",
        ),
        Pin(
            "aws-fsx-csi-driver/v1.9.0/values.yaml",
            *_FSX_CSI,
            "charts/aws-fsx-csi-driver/values.yaml",
            "e007d24725a963002b2efab6e0ffdd8caf488410eb5ccf7622bf23c4b0862055",
        ),
        Pin(
            "aws-fsx-csi-driver/v1.9.0/Chart.yaml",
            *_FSX_CSI,
            "charts/aws-fsx-csi-driver/Chart.yaml",
            "d4652b3377c75a75fd7852689822e86abff1bdf118f02fb7975e13b5ba128050",
        ),
    )
}


class PinnedFileError(Exception):
    """A pinned file could not be had or did not match its sha256; the message says which and what to do."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def schemas_dir() -> Path | None:
    value = os.environ.get("GPUCLUSTER_K8S_SCHEMAS")
    return Path(value) if value else None


def shared_schemas_dir() -> Path:
    """``$GPUCLUSTER_SCHEMAS``, else ``../shared/schemas`` beside the repository."""
    value = os.environ.get("GPUCLUSTER_SCHEMAS")
    return Path(value) if value else Path(__file__).resolve().parents[2] / "shared" / "schemas"


def cache_dir() -> Path:
    return Path(os.environ.get("GPUCLUSTER_CACHE") or Path.home() / ".cache" / "gpucluster") / "k8s-schemas"


def base_url() -> str:
    return os.environ.get("GPUCLUSTER_K8S_SCHEMAS_URL") or DEFAULT_BASE_URL


def _checked(pin: Pin, path: Path, origin: str) -> Path:
    actual = _sha256(path.read_bytes())
    if actual != pin.sha256:
        raise PinnedFileError(
            f"{pin.relative} from {origin} has sha256 {actual}, the pin says {pin.sha256}: "
            f"replace it with {pin.repository}@{pin.commit}:{pin.path}"
        )
    return path


def download(pin: Pin, base: str, target: Path) -> Path:
    """Fetch ``pin`` from ``base`` into ``target`` (written only once the sha256 matches)."""
    url = pin.url(base)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:  # https, or a test server on 127.0.0.1
            data = response.read()
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise PinnedFileError(f"{pin.relative}: could not download {url}: {reason}") from None
    actual = _sha256(data)
    if actual != pin.sha256:
        raise PinnedFileError(f"{pin.relative}: {url} served sha256 {actual}, the pin says {pin.sha256}; refusing it")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, target)
    return target


def pinned_path(relative: str) -> Path:
    """The verified local copy of pinned file ``relative`` (raises PinnedFileError with a clear message)."""
    pin = PINS.get(relative)
    if pin is None:
        raise PinnedFileError(f"{relative} is not a pinned file; add it to tests/pinned_files.py PINS with its sha256")
    shared = shared_schemas_dir() / pin.shared if pin.shared else None
    if shared is not None and shared.is_file():
        return _checked(pin, shared, str(shared))
    directory = schemas_dir()
    if directory is not None and shared is None:
        path = directory / relative
        if not path.is_file():
            raise PinnedFileError(
                f"{relative} is missing from GPUCLUSTER_K8S_SCHEMAS={directory}; point it at a directory that holds the pinned "
                "files, or unset it to download them"
            )
        return _checked(pin, path, str(path))
    cached = cache_dir() / relative
    if cached.is_file() and _sha256(cached.read_bytes()) == pin.sha256:
        return cached
    return download(pin, base_url(), cached)


def fetch_all() -> list[str]:
    """Make every pinned file available; the problems, one line each (empty when all are there)."""
    problems = []
    for relative in PINS:
        try:
            pinned_path(relative)
        except PinnedFileError as e:
            problems.append(str(e))
    return problems


def main(argv: list[str]) -> int:
    if argv != ["fetch"]:
        print("usage: python -m tests.pinned_files fetch", file=sys.stderr)
        return 2
    problems = fetch_all()
    where = schemas_dir() or cache_dir()
    for line in problems:
        print(f"pinned files: {line}", file=sys.stderr)
    if problems:
        print(
            f"pinned files: {len(problems)} of {len(PINS)} could not be had; set GPUCLUSTER_K8S_SCHEMAS to a directory "
            "holding them (e.g. ../shared/k8s-schemas) or allow downloads from GPUCLUSTER_K8S_SCHEMAS_URL",
            file=sys.stderr,
        )
        return 1
    print(f"pinned files: all {len(PINS)} verified in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
