"""A peer's rules, not only ours: checkov's Kubernetes checks over every Kubernetes object of
every shipped stack, offline.

Each stack's offline plan is run; its Kubernetes objects (Helm releases aside: their charts are not
rendered offline) and the pods of its example training jobs (the Job a JobSet makes of each replicated job)
are written as YAML files, one directory per stack, and checkov scans them all at once
(``--framework kubernetes --skip-download``: nothing is fetched). checkov lives in its own virtualenv
(``.venv-checkov``, made by ``.ci/run``; ``GPUCLUSTER_CHECKOV`` names another binary), because its
dependencies clash with the project's pins.

Every failing check is either fixed or listed in :data:`ACCEPTED` with its reason; the test fails on any
other failure, and on a listed one that no longer fails (the list must shrink when the code improves).
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import IN_CI, ROOT
from tests.plans import shipped_plan

# checkov is a separate program that scans every stack's objects: seconds of its own start-up and scan per run.
pytestmark = pytest.mark.slow

CHECKOV_VERSION = "3.3.30"
SWEEP = "DaemonSet.gpucluster-health.gpucluster-health-sweep"
EXAMPLE = "Job.*.example-training-workers"  # a pattern: one per team namespace
# (check id, checkov's resource name) → why it stays. Every entry is the health sweep's DaemonSet, the one pod
# that must see the host: docs/kubernetes.md "Exceptions, and why" says the same in prose.
ACCEPTED: dict[tuple[str, str], str] = {
    ("CKV_K8S_16", SWEEP): "privileged: the kernel log /dev/kmsg (XIDs) is a host device, which a container may "
    "open only when privileged",
    ("CKV_K8S_20", SWEEP): "allowPrivilegeEscalation: implied by privileged (the API server refuses false beside it)",
    ("CKV_K8S_23", SWEEP): "root: reading /dev/kmsg needs CAP_SYSLOG where dmesg_restrict=1; a non-root process keeps "
    "no capability even in a privileged container",
    ("CKV_K8S_40", SWEEP): "high UID: it runs as root, for the reason above",
    ("CKV_K8S_28", SWEEP): "NET_RAW: a privileged container has every capability; a drop list beside privileged is "
    "ignored, so writing one would only mislead",
    ("CKV_K8S_37", SWEEP): "capabilities: same as NET_RAW",
    ("CKV_K8S_31", SWEEP): "seccomp: privileged containers always run Unconfined (Kubernetes ignores a profile there)",
    ("CKV_K8S_22", SWEEP): "read-only root: no protection against a privileged root process (it can remount), and "
    "the NVIDIA runtime's hook writes the container's library cache at start — not a risk to take, unverified "
    "offline, on the pod that lifts every GPU node's boot taint",
    ("CKV_K8S_8", SWEEP): "liveness probe: the sweep serves nothing; every call of its loop has a timeout",
    ("CKV_K8S_9", SWEEP): "readiness probe: no Service sends it traffic",
    # The example training job (the pods of each team's JobSet): a starting point for the team's own script.
    ("CKV_K8S_43", EXAMPLE): "image by tag: the example names the AWS Deep Learning Container release a reader "
    "recognises (exampleJob.image takes a digest); nothing in the team's isolation trusts the image",
    ("CKV_K8S_22", EXAMPLE): "read-only root: the team's training code writes where it likes (caches, checkpoints "
    "next to the script); the isolation does not rest on it",
}


def checkov_binary() -> Path:
    path = Path(os.environ.get("GPUCLUSTER_CHECKOV") or ROOT / ".venv-checkov" / "bin" / "checkov")
    if not path.exists():
        reason = f"checkov {CHECKOV_VERSION} not found at {path}: .ci/run makes .venv-checkov (or set GPUCLUSTER_CHECKOV)"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def stacks() -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def kubernetes_objects(stack: str) -> dict[str, dict[str, Any]]:
    """The stack's Kubernetes objects by resource name, and each example job's Job."""
    plan = shipped_plan(stack)
    assert plan.ok, plan.error
    out = {
        r.name: dict(r.inputs)
        for r in plan.resources
        if r.custom and r.type.startswith("kubernetes:") and not r.type.startswith("kubernetes:helm.sh")
    }
    for path, text in plan.files.items():
        if path.endswith("/training-job.yaml"):
            jobset = yaml.safe_load(text)
            for rj in jobset["spec"]["replicatedJobs"]:
                meta = {"name": f"{jobset['metadata']['name']}-{rj['name']}", "namespace": jobset["metadata"]["namespace"]}
                out[path.split("/")[0] + "-job"] = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": meta,
                    "spec": rj["template"]["spec"],
                }
    return out


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> dict[str, Any]:
    binary = checkov_binary()
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=120).stdout.strip()
    assert version == CHECKOV_VERSION, f"checkov {version}, the test pins {CHECKOV_VERSION}"
    root = tmp_path_factory.mktemp("checkov")
    count = 0
    for stack in stacks():
        objects = kubernetes_objects(stack)
        for name, obj in objects.items():
            (root / stack).mkdir(exist_ok=True)
            (root / stack / f"{name}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))
        count += len(objects)
    assert count > 60, "the shipped stacks' Kubernetes objects, not an empty directory"
    done = subprocess.run(
        [str(binary), "-d", str(root), "--framework", "kubernetes", "--skip-download", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: some check failed
    report = json.loads(done.stdout)
    report = report[0] if isinstance(report, list) else report
    assert report["summary"]["parsing_errors"] == 0 and report["summary"]["resource_count"] >= count - 5
    return report


def accepted(check: str, resource: str) -> tuple[str, str] | None:
    """The :data:`ACCEPTED` entry that covers ``resource``'s failure of ``check``."""
    return next(((c, r) for c, r in ACCEPTED if c == check and fnmatch.fnmatchcase(resource, r)), None)


def _results(report: dict[str, Any], kind: str) -> set[tuple[str, str, str]]:
    """(stack, check id, resource) of every failed or passed check."""
    return {(r["file_path"].strip("/").split("/")[0], r["check_id"], r["resource"]) for r in report["results"][kind]}


def test_every_failing_check_is_fixed_or_accepted_with_its_reason(scan):
    failed = _results(scan, "failed_checks")
    names = {r["check_id"]: r["check_name"] for r in scan["results"]["failed_checks"]}
    unexpected = sorted(
        f"{stack}: {check} {names[check]} — {resource}" for stack, check, resource in failed if accepted(check, resource) is None
    )
    assert unexpected == [], "fix these, or accept them in ACCEPTED with the reason:\n" + "\n".join(unexpected)


def test_an_accepted_failure_that_now_passes_leaves_the_list(scan):
    failed = {accepted(c, r) for _, c, r in _results(scan, "failed_checks")}
    passed = {accepted(c, r) for _, c, r in _results(scan, "passed_checks")}
    stale = sorted(f"{c} {r}" for c, r in ACCEPTED if (c, r) in passed or (c, r) not in failed)
    assert stale == [], "these no longer fail: remove them from ACCEPTED\n" + "\n".join(stale)


def test_what_checkov_counts(scan):
    """Measured on the shipped stacks (eks-p5 and hybrid-eks have Kubernetes objects; the Slurm stacks none):
    before this work eks-p5 alone had 16 failures, all on the sweep, plus no NetworkPolicy."""
    failed = _results(scan, "failed_checks")
    assert {stack for stack, _, _ in failed} == {"eks-p5", "hybrid-eks"}
    assert {check for _, check, _ in failed if check.startswith("CKV2_")} == set(), "every pod has a NetworkPolicy"
    print(json.dumps(scan["summary"]))
