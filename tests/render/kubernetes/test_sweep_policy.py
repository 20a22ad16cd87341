"""The health sweep's node rights (docs/health.md, "The Kubernetes sweep's rights and privileges"): its admission policy
lets it change only its own node, its own taints and its own condition.

No Kubernetes API server runs here (FACTS.md), so admission is proven through the policy's CEL, run by
cel-python: against node updates built by hand (the allowed ones and the forbidden ones), and against every
request the real rendered sweep script makes, served by a fake API server that applies each patch as the
API server would (JSON merge patch for the taints, strategic merge by condition type for the status) and
admits it only if the policy does.
"""

from __future__ import annotations

import copy
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gpucluster.config.kubernetes import SUPPORTED_EKS_VERSIONS
from gpucluster.config.kubernetes.health import KubernetesHealthSpec
from gpucluster.render.kubernetes import BOOT_TAINT, GPU_TAINT
from gpucluster.render.kubernetes.health import CONDITION, SWEEP_NAME, SWEEP_USER, TAINT_KEY, sweep_objects
from gpucluster.render.kubernetes.sweep_policy import NODE_NAME_EXTRA, SPEC_FIELDS, STATUS_FIELDS
from tests.render.kubernetes.cel import definitions, evaluate, expressions, missing_fields
from tests.render.kubernetes.test_node_health import sweep_argv

NODE = "ip-10-0-1-5.ec2.internal"
FAULT = {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    (vap,) = [o for o in sweep_objects(KubernetesHealthSpec(), b"", {}) if o["kind"] == "ValidatingAdmissionPolicy"]
    return vap


def node(*taints: dict[str, str]) -> dict[str, Any]:
    """A GPU node as the API server stores it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "resourceVersion": "41",
            "labels": {"gpucluster/gpu": "h100", "gpucluster/node-group": "p5", "kubernetes.io/hostname": NODE},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "taints": [dict(GPU_TAINT), *taints]},
        "status": {
            "capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
            "allocatable": {"cpu": "191450m", "memory": "2000000Mi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
            "addresses": [{"type": "InternalIP", "address": "10.0.1.5"}, {"type": "Hostname", "address": NODE}],
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "AcceleratedHardwareReady", "status": "True", "reason": "NvidiaAcceleratedHardwareIsReady"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.4-eks-1234567", "containerRuntimeVersion": "containerd://1.7.27"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def request(node_name: str | None = NODE, username: str = SWEEP_USER) -> dict[str, Any]:
    extra = {NODE_NAME_EXTRA: [node_name], "authentication.kubernetes.io/pod-name": ["gpucluster-health-sweep-x7k2p"]}
    user = {"username": username, "groups": ["system:serviceaccounts"], **({"extra": extra} if node_name else {})}
    return {"operation": "UPDATE", "userInfo": user}


def verdict(policy, old, new, req=None):
    result = evaluate(policy, obj=new, old=old, request=req or request())
    assert not result.errors, result.errors
    return result


def condition(status: str) -> dict[str, str]:
    return {"type": CONDITION, "status": status, "reason": "SweepFault", "message": "gpucluster: xid 79"}


def with_(base: dict[str, Any], change) -> dict[str, Any]:
    new = copy.deepcopy(base)
    change(new)
    return new


ALLOWED = {
    "add its fault taint": (node(), lambda n: n["spec"]["taints"].append(dict(FAULT))),
    "remove its fault taint": (node(FAULT), lambda n: n["spec"].update(taints=[dict(GPU_TAINT)])),
    "remove the boot taint": (node(dict(BOOT_TAINT)), lambda n: n["spec"].update(taints=[dict(GPU_TAINT)])),
    "remove the boot and fault taints": (node(dict(BOOT_TAINT), FAULT), lambda n: n["spec"].update(taints=[dict(GPU_TAINT)])),
    "set its condition": (node(), lambda n: n["status"]["conditions"].append(condition("False"))),
    "change its condition": (
        with_(node(), lambda n: n["status"]["conditions"].append(condition("False"))),
        lambda n: n["status"]["conditions"][-1].update(status="True", reason="SweepPassed"),
    ),
    "a node with no taints at all gets the fault taint": (
        with_(node(), lambda n: n["spec"].pop("taints")),
        lambda n: n["spec"].update(taints=[dict(FAULT)]),
    ),
}


@pytest.mark.parametrize("case", sorted(ALLOWED))
def test_what_the_sweep_does_is_admitted(policy, case):
    old, change = ALLOWED[case]
    assert verdict(policy, old, with_(old, change)).allowed


FORBIDDEN = {
    "a label (steers other teams' pods through the GPU flavor)": (
        node(),
        lambda n: n["metadata"]["labels"].update({"gpucluster/gpu": "a100"}),
        "labels, annotations",
    ),
    "an annotation": (node(), lambda n: n["metadata"]["annotations"].update(x="y"), "labels, annotations"),
    "another taint removed (the GPU taint)": (node(), lambda n: n["spec"].update(taints=[]), "any taint but its own"),
    "another taint added": (
        node(),
        lambda n: n["spec"]["taints"].append({"key": "x", "value": "y", "effect": "NoExecute"}),
        "any taint but its own",
    ),
    "its taint as NoExecute (evicts running jobs)": (
        node(),
        lambda n: n["spec"]["taints"].append({**FAULT, "effect": "NoExecute"}),
        "taint is exactly",
    ),
    "the boot taint added": (node(), lambda n: n["spec"]["taints"].append(dict(BOOT_TAINT)), "never add"),
    "cordon": (node(), lambda n: n["spec"].update(unschedulable=True), "spec but its own taints"),
    "allocatable (advertises GPUs it has not)": (
        node(),
        lambda n: n["status"]["allocatable"].update({"nvidia.com/gpu": "16"}),
        "status but its own condition",
    ),
    "addresses (redirects the API server's kubelet calls)": (
        node(),
        lambda n: n["status"]["addresses"][0].update(address="203.0.113.9"),
        "status but its own condition",
    ),
    "another condition": (node(), lambda n: n["status"]["conditions"][1].update(status="False"), "no node condition but"),
}


@pytest.mark.parametrize("case", sorted(FORBIDDEN))
def test_anything_else_is_refused(policy, case):
    old, change, reason = FORBIDDEN[case]
    result = verdict(policy, old, with_(old, change))
    assert result.refused and any(reason in m for m in result.refused), result.refused


def test_only_its_own_node(policy):
    """The node name comes from the sweep pod's token: a request for another node, or from a token that
    names no node (a token not bound to a pod on a node), is refused."""
    new = with_(node(), lambda n: n["spec"]["taints"].append(dict(FAULT)))
    assert "only the node its pod runs on" in verdict(policy, node(), new, request("ip-10-0-9-9.ec2.internal")).refused[0]
    assert "only the node its pod runs on" in verdict(policy, node(), new, request(None)).refused[0]


def test_other_users_are_not_its_business(policy):
    """kubelet, the node lifecycle controller, an admin: the policy matches the sweep's account only."""
    new = with_(node(), lambda n: n["metadata"]["labels"].update(x="y"))
    assert not evaluate(policy, obj=new, old=node(), request=request(username="system:node:" + NODE)).matched


@pytest.mark.parametrize("version", SUPPORTED_EKS_VERSIONS)
def test_every_field_the_policy_names_exists_in_each_supported_kubernetes(policy, version):
    roots = {
        "object": "io.k8s.api.core.v1.Node",
        "oldObject": "io.k8s.api.core.v1.Node",
        "t": "io.k8s.api.core.v1.Taint",
        "c": "io.k8s.api.core.v1.NodeCondition",
        "request": "io.k8s.api.authentication.v1.UserInfo",  # stand-in root: only request.userInfo.* is read
    }
    found = [m for e in expressions(policy) for m in missing_fields(e, roots, version) if not m.startswith("request.")]
    assert found == []


def test_every_node_field_but_taints_and_conditions_is_compared():
    """The fields compared are all of Node in the oldest supported Kubernetes (1.30) but the sweep's own."""
    defs = definitions("1.30")
    assert set(SPEC_FIELDS) == set(defs["io.k8s.api.core.v1.NodeSpec"]["properties"]) - {"taints"}
    assert set(STATUS_FIELDS) == set(defs["io.k8s.api.core.v1.NodeStatus"]["properties"]) - {"conditions"}


# --- the real sweep script against an admitting API server -----------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_status_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """The strategic merge of a status patch: conditions merge by their ``type`` (Node's patch strategy)."""
    new = copy.deepcopy(target)
    conditions = new["status"].setdefault("conditions", [])
    for c in patch["status"]["conditions"]:
        same = next((x for x in conditions if x["type"] == c["type"]), None)
        if same is None:
            conditions.append(c)
        else:
            same.update(c)
    return new


class AdmittingApi(BaseHTTPRequestHandler):
    """A fake API server that stores one node and admits each update only if the sweep's policy does."""

    node: ClassVar[dict[str, Any]] = {}
    token_node: ClassVar[str] = NODE
    policy: ClassVar[dict[str, Any]] = {}
    refused: ClassVar[list[str]] = []

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._reply(200, AdmittingApi.node)

    def do_PATCH(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        old = AdmittingApi.node
        if not self.path.startswith(f"/api/v1/nodes/{old['metadata']['name']}"):
            self._reply(404, {"kind": "Status", "code": 404})
            return
        if self.path.endswith("/status"):
            new = strategic_status_patch(old, body)
        else:
            new = merge_patch(
                old, {**body, "metadata": {k: v for k, v in body.get("metadata", {}).items() if k != "resourceVersion"}}
            )
        result = evaluate(AdmittingApi.policy, obj=new, old=old, request=request(AdmittingApi.token_node))
        if not result.allowed:
            AdmittingApi.refused += result.refused + result.errors
            self._reply(403, {"kind": "Status", "code": 403, "message": "; ".join(result.refused)})
            return
        AdmittingApi.node = new
        self._reply(200, new)


@pytest.fixture
def api(policy):
    AdmittingApi.policy = policy
    AdmittingApi.refused = []
    AdmittingApi.token_node = NODE
    server = HTTPServer(("127.0.0.1", 0), AdmittingApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def sweep_round(tmp_path: Path, api: str, exit_code: int, node_name: str = NODE) -> subprocess.CompletedProcess[str]:
    program = tmp_path / "health"
    program.write_text(f"#!/bin/sh\necho '{json.dumps({'reason': f'verdict {exit_code}'})}'\nexit {exit_code}\n")
    program.chmod(0o755)
    argv = sweep_argv(tmp_path, api, program)
    return subprocess.run(argv, env={"NODE_NAME": node_name}, capture_output=True, text=True, timeout=60)


def test_every_request_of_the_real_sweep_is_admitted(tmp_path, api):
    """A new node: the boot check passes (boot taint off), a later sweep finds a fault (fault taint on,
    condition False), a later one passes (fault taint off, condition True) — every patch admitted."""
    AdmittingApi.node = node(dict(BOOT_TAINT))
    for exit_code, taints, status in ((0, [GPU_TAINT], "True"), (1, [GPU_TAINT, FAULT], "False"), (0, [GPU_TAINT], "True")):
        done = sweep_round(tmp_path, api, exit_code)
        assert done.returncode == 0 and AdmittingApi.refused == [], (done.stderr, AdmittingApi.refused)
        assert AdmittingApi.node["spec"]["taints"] == taints
        (mine,) = [c for c in AdmittingApi.node["status"]["conditions"] if c["type"] == CONDITION]
        assert mine["status"] == status
    assert AdmittingApi.node["metadata"]["labels"] == node()["metadata"]["labels"]


def test_the_real_sweep_cannot_mark_another_node(tmp_path, api):
    """A sweep pod whose token names another node (a compromised pod aiming at a node it does not run on):
    its first patch is refused and the node is unchanged."""
    AdmittingApi.node = node()
    AdmittingApi.token_node = "ip-10-0-9-9.ec2.internal"
    done = sweep_round(tmp_path, api, 1)
    assert "could not update node" in done.stderr and "403" in done.stderr
    assert AdmittingApi.refused and AdmittingApi.node == node()


def test_the_policy_object_names_the_sweep_account():
    (binding,) = [o for o in sweep_objects(KubernetesHealthSpec(), b"", {}) if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"] == {"policyName": SWEEP_NAME, "validationActions": ["Deny"]}
    assert SWEEP_USER == "system:serviceaccount:gpucluster-health:gpucluster-health-sweep"
