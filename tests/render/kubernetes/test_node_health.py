"""GPU node health on Kubernetes (``gpucluster:kubernetes.health``): the EKS node monitoring agent add-on
and node auto repair on GPU managed node groups (planned under mocks), the DCGM exporter's extra
counters (checked against the pinned ClusterPolicy schema), and the sweep DaemonSet: every object valid
against the Kubernetes 1.33 schemas and pinned by a golden file, its node package importable from the
ConfigMap's zip, and the sweep (gpucluster_agents.health.k8s_sweep) run against a fake API server with a fake
health program, and once as the pod runs it, with the real health program, from the ConfigMap alone."""

from __future__ import annotations

import base64
import ctypes.util
import json
import subprocess
import sys
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import jsonschema
import pytest
import yaml

from gpucluster.config.errors import ConfigError
from gpucluster.config.kubernetes.health import KubernetesHealthSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.kubernetes.health import (
    CONDITION,
    DCGM_CSV_KEY,
    DCGM_METRICS,
    PACKAGE_KEY,
    SETTINGS_KEY,
    SWEEP_NAME,
    TAINT_KEY,
    config_key,
    dcgm_exporter_values,
    dcgm_metrics_configmap,
    dcgm_metrics_csv,
    node_repair_config,
    sweep_config,
    sweep_objects,
    sweep_settings,
)
from gpucluster.render.slurm.agent import agent_bundle
from gpucluster.resolve.compute.health import health_config
from gpucluster_agents.boot.helper import HEALTH_MAIN
from gpucluster_agents.contract.health import parse, to_json
from gpucluster_agents.contract.sweep import SWEEP_MAIN
from gpucluster_agents.health import k8s_sweep
from tests.agents.health.fakes import kernel_log
from tests.components.kubernetes.test_eks_cluster import ADDON, MNG, build
from tests.conftest import GOLDEN, check_golden, eks_spec
from tests.render.kubernetes.schemas import crd_schema, schema_file, validate_object

# --- EKS: the add-on and auto repair ------------------------------------------------------------------------


def test_node_monitoring_agent_and_auto_repair_on_gpu_groups(run_components, p5_spec):
    plan = run_components(lambda: build(p5_spec))
    addons = {r.inputs["addonName"]: r for r in plan.of_type(ADDON)}
    assert "addonVersion" not in addons["eks-node-monitoring-agent"].inputs  # EKS's default for 1.33
    groups = {r.inputs["nodeGroupName"]: r.inputs for r in plan.of_type(MNG)}
    assert groups["k-gpu"]["nodeRepairConfig"] == {"enabled": True}
    assert "nodeRepairConfig" not in groups["k-system"]


def test_repair_thresholds_and_switches(run_components):
    spec = eks_spec(health={"maxUnhealthyPercentage": 20, "maxParallelRepairsPercentage": 10})
    groups = {r.inputs["nodeGroupName"]: r.inputs for r in run_components(lambda: build(spec)).of_type(MNG)}
    assert groups["k-gpu"]["nodeRepairConfig"] == {
        "enabled": True,
        "maxUnhealthyNodeThresholdPercentage": 20,
        "maxParallelNodesRepairedPercentage": 10,
    }
    off = eks_spec(health={"nodeMonitoringAgent": False, "autoRepair": False})
    plan = run_components(lambda: build(off))
    assert "eks-node-monitoring-agent" not in {r.inputs["addonName"] for r in plan.of_type(ADDON)}
    assert all("nodeRepairConfig" not in r.inputs for r in plan.of_type(MNG))


def test_auto_repair_without_the_agent_is_refused_with_the_fix():
    with pytest.raises(ConfigError) as exc:
        eks_spec(health={"nodeMonitoringAgent": False})
    (finding,) = exc.value.findings
    assert finding.path.startswith("gpucluster:kubernetes.health")
    assert "nodeMonitoringAgent: true, or autoRepair: false" in finding.message


def test_node_repair_config_uses_pulumi_aws_argument_names():
    import pulumi_aws as aws

    config = node_repair_config(KubernetesHealthSpec(maxUnhealthyPercentage=30, maxParallelRepairsPercentage=5))
    assert config is not None
    aws.eks.NodeGroupNodeRepairConfigArgs(**config)  # a wrong name raises TypeError
    assert node_repair_config(KubernetesHealthSpec(autoRepair=False)) is None


# --- DCGM exporter --------------------------------------------------------------------------------------------


def test_dcgm_counters_cover_ecc_row_remapping_xid_and_nvlink():
    fields = [f for f, _, _ in DCGM_METRICS]
    assert len(fields) == len(set(fields))
    for needed in (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    ):
        assert needed in fields
    # the exporter's format: field, counter|gauge|label, help; no help text with a comma (it would split)
    for line in dcgm_metrics_csv().splitlines()[1:]:
        field, kind, text = (p.strip() for p in line.split(","))
        assert field.startswith("DCGM_FI_") and kind in ("counter", "gauge", "label") and text


# dcgm-exporter's default list: the lines of etc/default-counters.csv not commented out, at
# NVIDIA/dcgm-exporter@d5e5f510a1b6b393f39a43293ccd9dc985defc79 (a copy of the names and types, pinned here).
UPSTREAM_DEFAULT_COMMIT = "d5e5f510a1b6b393f39a43293ccd9dc985defc79"
UPSTREAM_DEFAULT = {
    "DCGM_FI_DEV_SM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEMORY_TEMP": "gauge",
    "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
    "DCGM_FI_DEV_ENC_UTIL": "gauge",
    "DCGM_FI_DEV_DEC_UTIL": "gauge",
    "DCGM_FI_DEV_XID_ERRORS": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_DEV_FB_RESERVED": "gauge",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "gauge",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "counter",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "counter",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "gauge",
    "DCGM_FI_DRIVER_VERSION": "label",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge",
    "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
}


def test_dcgm_list_keeps_every_field_of_upstreams_default_and_adds_the_throttle_and_activity_fields():
    """Our ConfigMap replaces dcgm-exporter's default CSV: dropping a default field would lose it on EKS."""
    from gpucluster.render.kubernetes.health import DCGM_UPSTREAM_DEFAULT_COMMIT

    assert DCGM_UPSTREAM_DEFAULT_COMMIT == UPSTREAM_DEFAULT_COMMIT
    ours = {f: kind for f, kind, _ in DCGM_METRICS}
    assert {f: ours.get(f) for f in UPSTREAM_DEFAULT} == UPSTREAM_DEFAULT  # a superset, with upstream's types
    for added in (
        "DCGM_FI_DEV_POWER_VIOLATION",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    ):
        assert added in ours
    csv_fields = [line.split(",")[0] for line in dcgm_metrics_csv().splitlines() if not line.startswith("#")]
    assert csv_fields == list(ours)  # the ConfigMap carries all of them


def test_our_exporter_writes_the_dcgm_names_it_shares_with_the_eks_list():
    """Slurm nodes (our NVML exporter) and EKS (dcgm-exporter with this list) feed one set of rules: every
    DCGM name our exporter writes is one the EKS list turns on, with the same type."""
    from gpucluster_agents.metrics.gpu import FIELDS, NVLINK_ERRORS, RESERVED, XID_LAST

    ours = {f: kind for f, kind, _ in DCGM_METRICS}
    exported = {name: kind for name, kind, *_ in FIELDS} | {n: "counter" for n, _, _ in NVLINK_ERRORS}
    exported |= {RESERVED[0]: RESERVED[1], XID_LAST[0]: XID_LAST[1]}
    assert {n: ours.get(n) for n in exported} == exported


def test_dcgm_config_fits_the_cluster_policy_and_the_chart_documents_it():
    schema = crd_schema("nvidia.com/v1", "ClusterPolicy")["properties"]["spec"]["properties"]["dcgmExporter"]
    jsonschema.Draft7Validator(schema).validate({"enabled": True, **dcgm_exporter_values()})
    with pytest.raises(jsonschema.ValidationError):  # the check can fail
        jsonschema.Draft7Validator(schema["properties"]["config"]["properties"]["name"]).validate(7)
    # values.yaml has dcgmExporter.config only as a commented example: the key is the chart's all the same
    text = schema_file("gpu-operator/v26.7.0/values.yaml").read_text()
    block = text.split("\ndcgmExporter:", 1)[1].split("\n# ", 1)[0]
    assert "  # config:" in block and "# name:" in block and DCGM_CSV_KEY in block
    cm = dcgm_metrics_configmap("gpu-operator")
    assert validate_object(cm) and cm["metadata"]["namespace"] == "gpu-operator"


# --- the sweep DaemonSet ----------------------------------------------------------------------------------------


P5_CONFIG = to_json(health_config(load_catalog()["p5.48xlarge"], efa_count=32))  # p5's 32 EFA devices


@pytest.fixture(scope="module")
def objects():
    return sweep_objects(KubernetesHealthSpec(), agent_bundle(), {"gpu": P5_CONFIG})


def test_sweep_objects_valid_and_golden(objects, update_golden):
    for obj in objects:
        validate_object(obj)
    shown = [
        {**o, "binaryData": {k: f"<{len(v)} base64 characters: the node package>" for k, v in o["binaryData"].items()}}
        if "binaryData" in o
        else o
        for o in objects
    ]
    check_golden(GOLDEN / "kubernetes" / "health-sweep.yaml", yaml.safe_dump_all(shown, sort_keys=True), update_golden)


def test_sweep_rights_are_nodes_get_patch_and_status_patch_only(objects):
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"][0]["name"] == SWEEP_NAME and binding["roleRef"]["name"] == SWEEP_NAME


def test_sweep_pod_sees_the_gpus_without_taking_one(objects):
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert "nvidia.com/gpu" not in json.dumps(pod["containers"][0]["resources"])
    # it tolerates the GPU taint and the taint it sets itself (else it could never clear it)
    keys = {t["key"] for t in pod["tolerations"]}
    assert {"nvidia.com/gpu", TAINT_KEY} <= keys


def test_the_node_package_imports_from_the_configmap_zip(objects, tmp_path):
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    (tmp_path / PACKAGE_KEY).write_bytes(base64.b64decode(cm["binaryData"][PACKAGE_KEY]))
    assert cm["data"][SETTINGS_KEY] == sweep_config(300)
    code = "import gpucluster_agents.contract as c, sys; assert c.__file__.startswith(sys.argv[1]); print('ok')"
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, sys.argv[1]); {code}", str(tmp_path / PACKAGE_KEY)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_nothing_is_downloaded_when_the_sweep_starts(objects):
    """No init container, no pip, no PyPI: the pod's only code is the image's Python and the ConfigMap."""
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert "initContainers" not in pod and [v["name"] for v in pod["volumes"]] == ["code", "api-token", "kmsg"]
    assert not any(word in json.dumps(objects) for word in ("pip install", "nvidia-ml-py", "pypi"))
    zip_path = f"/opt/gpucluster/{PACKAGE_KEY}"
    assert pod["containers"][0]["command"] == [
        "python3",
        "-I",
        "-c",
        SWEEP_MAIN,
        zip_path,
        "--config",
        f"/opt/gpucluster/{SETTINGS_KEY}",
    ]
    assert sweep_settings(300).package == zip_path


def test_the_sweep_runs_from_the_configmap_alone(objects, tmp_path):
    """What the pod runs, run here with site-packages switched off (``python -S``: the test's own
    nvidia-ml-py is out of reach): the program and NVIDIA's binding both load from the ConfigMap's zip, the
    group's thresholds from its ``health-<group>.json``, and on this machine without an NVIDIA driver the real
    binding's NVML fails to start, which the sweep reports as a ``driver`` fault (exit 1), not as a program
    that could not run (exit 2)."""
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    package = tmp_path / PACKAGE_KEY
    package.write_bytes(base64.b64decode(cm["binaryData"][PACKAGE_KEY]))
    config = tmp_path / config_key("gpu")
    rendered = json.loads(cm["data"][config_key("gpu")])
    assert parse(rendered).gpu_count == 8 and rendered["kernel_log_file"] is None  # a node reads /dev/kmsg
    # here: a fixture kernel log (the crafted segfault report among its records) and sysfs, not this machine's
    (tmp_path / "kernel.log").write_text(kernel_log())
    rendered.update(kernel_log_file=str(tmp_path / "kernel.log"), sysfs_root=str(tmp_path / "sys"))
    config.write_text(json.dumps(rendered))
    env = {"PYTHONPATH": str(package), "PATH": "/usr/bin:/bin"}
    where = "import pynvml, gpucluster_agents.health.cli as c; print(pynvml.__file__); print(c.__file__)"
    # cwd: a directory without the sources (python puts it first on the path)
    done = subprocess.run([sys.executable, "-S", "-c", where], env=env, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert all(line.startswith(str(package)) for line in done.stdout.split()), done.stdout
    # as the sweep runs it (isolated, from /, the zip put on the path by the code: PYTHONPATH is ignored)
    sweep = [sys.executable, "-S", "-I", "-c", HEALTH_MAIN, str(package), "sweep", "--config", str(config), "--json"]
    done = subprocess.run(sweep, env=env, cwd="/", capture_output=True, text=True, timeout=60, check=False)
    verdict = json.loads(done.stdout)
    driver = next(c for c in verdict["checks"] if c["name"] == "driver")
    if ctypes.util.find_library("nvidia-ml"):  # a GPU machine: NVML starts through the zip's binding
        assert done.returncode in (0, 1) and driver["ok"] is True, done.stderr
    else:
        assert (done.returncode, verdict["mode"]) == (1, "sweep"), done.stderr
        assert driver["ok"] is False and verdict["reason"].startswith("gpucluster: driver")


def test_each_gpu_group_gets_its_own_thresholds(run_components):
    from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform, KubernetesPlatformArgs

    spec = eks_spec()
    args = KubernetesPlatformArgs(
        **spec.kubernetes.model_dump(exclude_none=True),
        cluster_name="k",
        node_groups=[g.model_dump(exclude_none=True, exclude={"image_ssm_parameter"}) for g in spec.groups_for("kubernetes")],
    )
    plan = run_components(lambda: KubernetesPlatform("k", args))
    (cm,) = [c for c in plan.of_type("kubernetes:core/v1:ConfigMap") if c.inputs["metadata"]["name"] == SWEEP_NAME]
    configs = {k: parse(json.loads(v)) for k, v in cm.inputs["data"].items() if k.startswith("health-")}
    gpu_groups = [g for g in spec.groups_for("kubernetes") if load_catalog()[g.instance_type].gpu_count]
    assert gpu_groups and set(configs) == {config_key(g.name) for g in gpu_groups}
    for g in gpu_groups:
        cfg = configs[config_key(g.name)]
        assert (cfg.instance_type, cfg.gpu_count) == (g.instance_type, load_catalog()[g.instance_type].gpu_count)


def test_platform_places_the_sweep_after_the_operator(run_components):
    from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform, KubernetesPlatformArgs

    spec = eks_spec()
    args = KubernetesPlatformArgs(
        **spec.kubernetes.model_dump(exclude_none=True),
        cluster_name="k",
        node_groups=[g.model_dump(exclude_none=True, exclude={"image_ssm_parameter"}) for g in spec.groups_for("kubernetes")],
    )
    plan = run_components(lambda: KubernetesPlatform("k", args))
    ds = plan.of_type("kubernetes:apps/v1:DaemonSet")
    assert [d.inputs["metadata"]["name"] for d in ds] == [SWEEP_NAME]
    assert ds[0].inputs["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"  # camelCase reached the provider
    assert {c.inputs["metadata"]["name"] for c in plan.of_type("kubernetes:core/v1:ConfigMap")} >= {
        SWEEP_NAME,
        "gpucluster-dcgm-metrics",
    }
    off = KubernetesPlatformArgs(**{**args, "health": {"sweep": False}})
    assert not run_components(lambda: KubernetesPlatform("k", off)).of_type("kubernetes:apps/v1:DaemonSet")


# --- the sweep script against a fake API server -------------------------------------------------------------------


class FakeApi(BaseHTTPRequestHandler):
    node: ClassVar[dict] = {}
    calls: ClassVar[list] = []

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        FakeApi.calls.append(("GET", self.path, self.headers["Authorization"], None, None))
        self._reply(FakeApi.node)

    def do_PATCH(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeApi.calls.append(("PATCH", self.path, self.headers["Authorization"], self.headers["Content-Type"], body))
        self._reply(FakeApi.node)


@pytest.fixture
def api():
    server = HTTPServer(("127.0.0.1", 0), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeApi.calls = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


# The node package's folder: where the pod has the ConfigMap's zip, these tests have this checkout.
AGENTS_ROOT = str(Path(k8s_sweep.__file__).resolve().parents[2])


def sweep_argv(tmp_path: Path, api: str, program: Path | None, **settings: object) -> list[str]:
    """The DaemonSet's command, run here for one round (``--once``): the sweep isolated (``python -I``) from the
    node package, its rendered settings pointed at the fake API server, a token in ``tmp_path/sa`` and the
    health configs' folder ``tmp_path``, and ``program`` (if given) in the real health program's place."""
    sa = tmp_path / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text("t0ken\n")
    rendered = json.loads(sweep_config(300))
    rendered.update(api=api, service_account_dir=str(sa), health_config_dir=str(tmp_path), **settings)
    (tmp_path / SETTINGS_KEY).write_text(json.dumps(rendered))
    argv = [sys.executable, "-I", "-c", SWEEP_MAIN, AGENTS_ROOT, "--config", str(tmp_path / SETTINGS_KEY), "--once"]
    return argv + (["--health-program", str(program)] if program else [])


def run_sweep(tmp_path: Path, api: str, exit_code: int, node: dict) -> list:
    FakeApi.node = node
    program = tmp_path / "health"
    program.write_text(f"#!/bin/sh\necho checking\necho 'verdict line {exit_code}'\nexit {exit_code}\n")
    program.chmod(0o755)
    env = {"NODE_NAME": "ip-10-0-0-1"}
    done = subprocess.run(sweep_argv(tmp_path, api, program), env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return FakeApi.calls


OTHER_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def patches(calls, path_end):
    return [c for c in calls if c[0] == "PATCH" and c[1].endswith(path_end)]


def test_a_fault_sets_the_condition_and_the_taint(tmp_path, api):
    node = {"metadata": {"resourceVersion": "7"}, "spec": {"taints": [OTHER_TAINT]}, "status": {"conditions": []}}
    calls = run_sweep(tmp_path, api, 1, node)
    assert all(c[2] == "Bearer t0ken" for c in calls)
    (status,) = patches(calls, "/ip-10-0-0-1/status")
    assert status[3] == "application/strategic-merge-patch+json"
    (condition,) = status[4]["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        CONDITION,
        "False",
        "SweepFault",
        "verdict line 1",
    )
    (taint,) = patches(calls, "/nodes/ip-10-0-0-1")
    assert taint[3] == "application/merge-patch+json"
    assert taint[4] == {
        "metadata": {"resourceVersion": "7"},
        "spec": {"taints": [OTHER_TAINT, {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}]},
    }


def test_a_healthy_sweep_clears_only_its_own_taint(tmp_path, api):
    ours = {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}
    node = {"metadata": {"resourceVersion": "8"}, "spec": {"taints": [OTHER_TAINT, ours]}, "status": {"conditions": []}}
    calls = run_sweep(tmp_path, api, 0, node)
    assert patches(calls, "/status")[0][4]["status"]["conditions"][0]["status"] == "True"
    (taint,) = patches(calls, "/nodes/ip-10-0-0-1")
    assert taint[4]["spec"]["taints"] == [OTHER_TAINT]


def test_the_condition_message_is_the_verdicts_reason(tmp_path, api):
    """The real program prints its verdict as JSON (``--json``) and, in a pod, a complaint that scontrol is
    missing on stderr: the condition carries the verdict's reason, not the complaint."""
    reason = "gpucluster: row_remap gpu3 row remap pending (reboot)"
    node = {"metadata": {"resourceVersion": "9"}, "spec": {"taints": []}, "status": {"conditions": []}}
    FakeApi.node = node
    program = tmp_path / "health"
    verdict = json.dumps({"action": "reboot", "reason": reason})
    program.write_text(
        f"#!/bin/sh\necho \"$@\" >{tmp_path}/args\necho '{verdict}'\necho 'gpucluster-health: could not drain' >&2\nexit 1\n"
    )
    program.chmod(0o755)
    env = {"NODE_NAME": "n"}
    done = subprocess.run(sweep_argv(tmp_path, api, program), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (status,) = patches(FakeApi.calls, "/n/status")
    assert status[4]["status"]["conditions"][0]["message"] == reason
    assert (tmp_path / "args").read_text().split() == ["sweep", "--json"]  # no health-<group>.json for an unlabelled node


def test_healthy_and_untainted_patches_only_the_condition(tmp_path, api):
    node = {"metadata": {"resourceVersion": "9"}, "spec": {"taints": [OTHER_TAINT]}, "status": {"conditions": []}}
    calls = run_sweep(tmp_path, api, 0, node)
    assert len(patches(calls, "/status")) == 1 and patches(calls, "/nodes/ip-10-0-0-1") == []


def test_a_sweep_that_could_not_run_leaves_the_taints(tmp_path, api):
    ours = {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}
    node = {"metadata": {"resourceVersion": "1"}, "spec": {"taints": [ours]}, "status": {"conditions": []}}
    calls = run_sweep(tmp_path, api, 2, node)
    assert patches(calls, "/status")[0][4]["status"]["conditions"][0]["status"] == "Unknown"
    assert patches(calls, "/nodes/ip-10-0-0-1") == []


def test_a_check_in_uninterruptible_sleep_times_out_and_the_sweep_goes_on(tmp_path):
    """The program hangs in D state (tests/agents/health/dstate.py's FUSE file): the round reports SweepTimedOut at
    its budget (a fault: the node is tainted) instead of waiting for a process that cannot be reaped, which
    would stop every later round."""
    import time

    from tests.agents.health.dstate import hung_file, wait_for_state

    with hung_file(tmp_path) as hang:
        checker = tmp_path / "checker"
        checker.write_text(f"#!/bin/sh\necho $$ >{tmp_path}/checker.pid\nexec cat {hang}\n")
        checker.chmod(0o755)
        settings = replace(sweep_settings(300), sweep_budget_seconds=2, boot_budget_seconds=2)
        start = time.monotonic()
        verdict = k8s_sweep.verdict(settings, [str(checker)], None, "sweep")
        assert verdict == ("False", "SweepTimedOut", "the health sweep did not finish within 2 s")
        assert time.monotonic() - start < 5
        assert wait_for_state(int((tmp_path / "checker.pid").read_text()), "D") == "D"


def test_the_sweep_runs_the_program_isolated_from_the_zip():
    """Without a test's override, the sweep runs its own interpreter with -I from /, the ConfigMap's zip (in
    the pod's code folder) put on the path by the code itself: no PYTHONPATH, no working directory."""
    program = k8s_sweep.health_program(sweep_settings(300))
    assert program == [sys.executable, "-I", "-c", HEALTH_MAIN, f"/opt/gpucluster/{PACKAGE_KEY}"]


def test_the_daemonsets_command_runs_a_round_from_the_configmap_alone(objects, tmp_path, api):
    """The pod's own command over the ConfigMap's files (its code folder is ``tmp_path`` here): the sweep and
    the real health program both load from the zip, the settings from ``sweep.json`` (the API server, token and
    config folders pointed at this test's), the thresholds from the node's group's ``health-gpu.json``. On
    this machine without an NVIDIA driver the real program finds a ``driver`` fault, which the round puts on the
    node as condition False with the verdict's reason and the fault taint."""
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    package = tmp_path / PACKAGE_KEY
    package.write_bytes(base64.b64decode(cm["binaryData"][PACKAGE_KEY]))
    thresholds = json.loads(cm["data"][config_key("gpu")])
    (tmp_path / "kernel.log").write_text(kernel_log())
    # fixtures, not this machine's kernel log, sysfs, health log or Slurm
    thresholds.update(kernel_log_file=str(tmp_path / "kernel.log"), sysfs_root=str(tmp_path / "sys"))
    thresholds.update(log_file=str(tmp_path / "health.jsonl"), slurm_bin_dir=str(tmp_path / "bin"))
    (tmp_path / config_key("gpu")).write_text(json.dumps(thresholds))
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "token").write_text("t0ken\n")
    settings = json.loads(cm["data"][SETTINGS_KEY])
    settings.update(api=api, service_account_dir=str(tmp_path / "sa"), health_config_dir=str(tmp_path), package=str(package))
    (tmp_path / SETTINGS_KEY).write_text(json.dumps(settings))
    command = [a.replace("/opt/gpucluster", str(tmp_path)) for a in ds["spec"]["template"]["spec"]["containers"][0]["command"]]
    assert command[0] == "python3"
    labels = {"gpucluster/node-group": "gpu"}
    FakeApi.node = {"metadata": {"resourceVersion": "5", "labels": labels}, "spec": {"taints": []}, "status": {}}
    done = subprocess.run(
        [sys.executable, *command[1:], "--once"], env={"NODE_NAME": "n9"}, cwd="/", capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (status,) = patches(FakeApi.calls, "/n9/status")
    (condition,) = status[4]["status"]["conditions"]
    if ctypes.util.find_library("nvidia-ml"):  # a GPU machine: the driver check passes through the zip's binding
        assert condition["reason"] in ("SweepPassed", "SweepFault") and not condition["message"].startswith("gpucluster: driver")
    else:
        assert (condition["status"], condition["reason"]) == ("False", "SweepFault"), condition
        assert condition["message"].startswith("gpucluster: driver"), condition
        (taints,) = patches(FakeApi.calls, "/nodes/n9")
        assert taints[4]["spec"]["taints"] == [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
    assert json.loads((tmp_path / "health.jsonl").read_text().splitlines()[-1])["mode"] == "sweep"
