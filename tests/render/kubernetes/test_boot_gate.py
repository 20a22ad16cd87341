"""The boot gate of EKS GPU nodes (Build item 1): a GPU node registers with the boot taint
(nodeadm NodeConfig, kubelet ``--register-with-taints``), everything its boot check needs tolerates that
taint, and the sweep DaemonSet's first run on the node runs the program's ``boot`` mode: a pass takes the
taint off, a fault leaves it on and adds the fault taint and condition."""

from __future__ import annotations

import base64
import email
import json
import re
import subprocess
import threading
from http.server import HTTPServer
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpucluster.config.kubernetes.health import KubernetesHealthSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.kubernetes import (
    BOOT_TAINT,
    GPU_TAINT,
    efa_device_plugin_values,
    fsx_csi_addon_configuration,
    gpu_operator_values,
    node_config,
)
from gpucluster.render.kubernetes.health import CONDITION, TAINT_KEY, sweep_objects, sweep_settings
from gpucluster.render.slurm.agent import agent_bundle
from tests.components.kubernetes.test_eks_cluster import build
from tests.conftest import eks_spec
from tests.render.kubernetes.schemas import chart_defaults, crd_schema, unknown_values, validate_object
from tests.render.kubernetes.test_node_health import OTHER_TAINT, FakeApi, patches, sweep_argv

FLAG = "--register-with-taints="
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def parse_taints(flag: str) -> list[dict[str, str]]:
    """kubelet's reading of ``--register-with-taints`` (k8s.io/kubernetes pkg/util/taints: comma-separated
    ``key=value:effect``; key a qualified name, value a label value, effect one of three); raises otherwise."""
    assert flag.startswith(FLAG), flag
    out = []
    for spec in flag[len(FLAG) :].split(","):
        key, rest = spec.split("=", 1)
        value, effect = rest.rsplit(":", 1)
        assert QUALIFIED.match(key) and len(key.split("/")[-1]) <= 63, key
        assert LABEL_VALUE.match(value), value
        assert effect in EFFECTS, effect
        out.append({"key": key, "value": value, "effect": effect})
    return out


def tolerates(tolerations: list[dict], taint: dict[str, str]) -> bool:
    """The scheduler's rule (core/v1 Toleration.ToleratesTaint)."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("key") and t["key"] != taint["key"]:
            continue
        if not t.get("key") and t.get("operator") != "Exists":
            continue
        if t.get("operator", "Equal") == "Exists" or t.get("value", "") == taint["value"]:
            return True
    return False


P5 = load_catalog()["p5.48xlarge"]
CPU = load_catalog()["m7i.xlarge"]
# What a GPU node registers with, as kubelet reads the flag.
REGISTERED = parse_taints(node_config(P5, True, boot_gate=True)["spec"]["kubelet"]["flags"][0])


# --- the NodeConfig ---------------------------------------------------------------------------------------------


def test_gpu_nodes_register_with_the_gpu_and_the_boot_taint():
    config = node_config(P5, True, boot_gate=True)
    assert config["spec"]["kubelet"] == {
        "flags": [FLAG + "nvidia.com/gpu=true:NoSchedule,gpucluster.io/health-boot=pending:NoSchedule"]
    }
    assert REGISTERED == [GPU_TAINT, BOOT_TAINT]
    # The Node the kubelet registers is a valid object with these taints.
    validate_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ip-10-0-0-1"}, "spec": {"taints": REGISTERED}})
    with pytest.raises(AssertionError):  # the parser can fail
        parse_taints(FLAG + "gpucluster.io/health-boot=pending:NoWhere")


def test_no_boot_taint_without_the_sweep_or_without_gpus():
    assert "kubelet" not in node_config(P5, True, boot_gate=False)["spec"]  # nothing would take it off
    assert "kubelet" not in node_config(CPU, True, boot_gate=True)["spec"]


def nodeadm_part(plan, template: str) -> dict:
    text = base64.b64decode(plan.by_name(template).inputs["userData"]).decode()
    parts = {p.get_content_type(): p.get_payload() for p in email.message_from_string(text).get_payload()}
    return yaml.safe_load(parts["application/node.eks.aws"])


def test_the_gpu_launch_template_carries_the_flag_and_follows_the_sweep_switch(run_components, p5_spec):
    on = nodeadm_part(run_components(lambda: build(p5_spec)), "k-eks-gpu-lt")
    assert parse_taints(on["spec"]["kubelet"]["flags"][0]) == [GPU_TAINT, BOOT_TAINT]
    off = nodeadm_part(run_components(lambda: build(eks_spec(health={"sweep": False}))), "k-eks-gpu-lt")
    assert "kubelet" not in off["spec"]


# --- everything the check needs tolerates the taint ---------------------------------------------------------------


def test_the_sweep_and_the_gpu_daemons_tolerate_every_registration_taint():
    (ds,) = [o for o in sweep_objects(KubernetesHealthSpec(), agent_bundle(), {}) if o["kind"] == "DaemonSet"]
    validate_object(ds)
    values = gpu_operator_values("eks")
    nfd = values["node-feature-discovery"]["worker"]["tolerations"]
    holders = {
        "sweep": ds["spec"]["template"]["spec"]["tolerations"],
        "gpu-operator operands": values["daemonsets"]["tolerations"],
        "nfd worker": nfd,
        "efa device plugin": efa_device_plugin_values()["tolerations"],
    }
    for name, tolerations in holders.items():
        for taint in REGISTERED:
            assert tolerates(tolerations, taint), (name, taint)
    assert not tolerates(values["daemonsets"]["tolerations"], {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"})


def test_operator_values_keep_the_charts_own_tolerations_and_fit_the_chart():
    defaults = chart_defaults("gpu-operator")
    values = gpu_operator_values("eks")
    assert unknown_values(values, defaults) == []
    # Helm replaces lists: the chart's defaults must still be there
    for t in defaults["daemonsets"]["tolerations"]:
        assert t in values["daemonsets"]["tolerations"]
    for t in defaults["node-feature-discovery"]["worker"]["tolerations"]:
        assert t in values["node-feature-discovery"]["worker"]["tolerations"]
    policy = crd_schema("nvidia.com/v1", "ClusterPolicy")["properties"]["spec"]["properties"]
    jsonschema.Draft7Validator(policy["daemonsets"]).validate(values["daemonsets"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nfd-worker"},
        "spec": {
            "containers": [{"name": "w", "image": "x"}],
            "tolerations": values["node-feature-discovery"]["worker"]["tolerations"],
        },
    }
    validate_object(pod)
    assert "daemonsets" not in gpu_operator_values("on-prem")  # no nodeadm there: nothing to tolerate


def test_the_fsx_node_plugin_tolerates_every_taint():
    """The FSx CSI node plugin (an EKS add-on) mounts Lustre for the boot check's shared_fs check: its pinned
    chart tolerates all taints, and gpucluster's add-on configuration leaves that alone."""
    assert chart_defaults("aws-fsx-csi-driver")["node"]["tolerateAllTaints"] is True
    assert "node" not in fsx_csi_addon_configuration("us-east-1")


def test_efa_values_fit_the_chart():
    assert unknown_values(efa_device_plugin_values(), chart_defaults("aws-efa-k8s-device-plugin")) == []


# --- the sweep's first run: boot mode ---------------------------------------------------------------------------


BOOT = {"key": BOOT_TAINT["key"], "value": "pending", "effect": "NoSchedule"}
FAULT = {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}


@pytest.fixture
def server():
    """The fake API server of test_node_health on an OS-assigned port."""
    httpd = HTTPServer(("127.0.0.1", 0), FakeApi)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def run_round(tmp_path: Path, api: str, exit_code: int, node: dict) -> tuple[list, list[str]]:
    """One round of the sweep with its rendered settings against the fake API server, with a fake health
    program that records its arguments and prints a verdict."""
    FakeApi.node = node
    FakeApi.calls = []
    reason = f"gpucluster: gemm gpu2 600 TFLOP/s < 673 (exit {exit_code})"
    program = tmp_path / "health"
    program.write_text(f"#!/bin/sh\necho \"$@\" >{tmp_path}/args\necho '{json.dumps({'reason': reason})}'\nexit {exit_code}\n")
    program.chmod(0o755)
    done = subprocess.run(sweep_argv(tmp_path, api, program), env={"NODE_NAME": "n1"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return FakeApi.calls, (tmp_path / "args").read_text().split()


def new_node(*taints):
    return {"metadata": {"resourceVersion": "3"}, "spec": {"taints": [OTHER_TAINT, *taints]}, "status": {}}


def condition_of(calls) -> dict:
    (status,) = patches(calls, "/n1/status")
    (condition,) = status[4]["status"]["conditions"]
    assert condition["type"] == CONDITION
    return condition


def test_first_run_passes_the_boot_check_and_takes_the_taint_off(tmp_path, server):
    calls, argv = run_round(tmp_path, server, 0, new_node(BOOT))
    assert argv[:2] == ["boot", "--json"]
    assert (condition_of(calls)["status"], condition_of(calls)["reason"]) == ("True", "BootCheckPassed")
    (taints,) = patches(calls, "/nodes/n1")
    assert taints[4] == {"metadata": {"resourceVersion": "3"}, "spec": {"taints": [OTHER_TAINT]}}


def test_a_boot_fault_keeps_the_node_gated_and_says_why(tmp_path, server):
    calls, argv = run_round(tmp_path, server, 1, new_node(BOOT))
    assert argv[0] == "boot"
    condition = condition_of(calls)
    assert (condition["status"], condition["reason"]) == ("False", "BootCheckFault")
    assert condition["message"] == "gpucluster: gemm gpu2 600 TFLOP/s < 673 (exit 1)"
    (taints,) = patches(calls, "/nodes/n1")
    assert taints[4]["spec"]["taints"] == [OTHER_TAINT, BOOT, FAULT]


def test_a_boot_check_that_could_not_run_changes_no_taint(tmp_path, server):
    calls, argv = run_round(tmp_path, server, 2, new_node(BOOT))
    assert argv[0] == "boot"
    assert (condition_of(calls)["status"], condition_of(calls)["reason"]) == ("Unknown", "BootCheckCouldNotRun")
    assert patches(calls, "/nodes/n1") == []


def test_a_faulty_node_whose_boot_check_passes_later_is_released(tmp_path, server):
    calls, argv = run_round(tmp_path, server, 0, new_node(BOOT, FAULT))
    assert argv[0] == "boot"
    (taints,) = patches(calls, "/nodes/n1")
    assert taints[4]["spec"]["taints"] == [OTHER_TAINT]


def test_without_the_boot_taint_the_round_is_a_sweep(tmp_path, server):
    """A node that passed its boot check (or registered before the gate existed) is swept, never benchmarked
    again while its jobs run."""
    calls, argv = run_round(tmp_path, server, 1, new_node())
    assert argv[:2] == ["sweep", "--json"]
    assert condition_of(calls)["reason"] == "SweepFault"
    (taints,) = patches(calls, "/nodes/n1")
    assert taints[4]["spec"]["taints"] == [OTHER_TAINT, FAULT]


def test_a_boot_check_that_hangs_keeps_the_node_gated(tmp_path, server):
    """A boot check past its budget (a GPU off the bus can hang NVML) is a fault: the boot taint stays and the
    fault taint comes. The rendered budget (300 s) is cut to 1 s here, the program sleeps."""
    FakeApi.node, FakeApi.calls = new_node(BOOT), []
    program = tmp_path / "health"
    program.write_text("#!/bin/sh\nexec sleep 30\n")
    program.chmod(0o755)
    assert sweep_settings(300).boot_budget_seconds == 300
    argv = sweep_argv(tmp_path, server, program, boot_budget_seconds=1)
    done = subprocess.run(argv, env={"NODE_NAME": "n1"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    condition = condition_of(FakeApi.calls)
    assert (condition["status"], condition["reason"]) == ("False", "BootCheckTimedOut")
    assert condition["message"] == "the health boot did not finish within 1 s"
    (taints,) = patches(FakeApi.calls, "/nodes/n1")
    assert taints[4]["spec"]["taints"] == [OTHER_TAINT, BOOT, FAULT]
