"""The node exporter of gpucluster (gpucluster_agents.metrics): its text checked by the real ``promtool check
metrics`` (Debian's prometheus) for every fake-NVML scenario, the values each scenario must show, label
escaping with hostile values, the EFA / Lustre / Slurm / agent sources from fixtures, and HTTP on a free port."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gpucluster_agents.metrics import fabric, gpu, head
from gpucluster_agents.metrics.cli import _parser, main, sources
from gpucluster_agents.metrics.exposition import Registry
from gpucluster_agents.metrics.server import Exporter, Sources, make_server
from tests.agents.health.fakes import scenario
from tests.agents.metrics import nodes

CI = os.environ.get("CI") == "true"
PROMTOOL = shutil.which("promtool")
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)\Z")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by metric name; every line must be a comment or a sample (the format's grammar)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        body = m.group(2) or ""
        labels = {k: _unescape(v) for k, v in _LABEL.findall(body)}
        assert _LABEL.sub("", body) == "", f"labels not in the format: {body!r}"
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def by_gpu(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> dict[str, float]:
    return {labels["gpu"]: value for labels, value in samples.get(name, []) if "gpu" in labels}


@pytest.fixture(scope="module")
def node_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("metrics-node")
    nodes.exporter_args(tmp, "healthy", head=True, efa=2)  # the shared fixtures: sysfs, llite, Slurm, agent state
    return tmp


def exporter(tmp: Path, name: str, head_node: bool = False) -> Exporter:
    return Exporter(sources(_parser().parse_args(["print", *nodes.exporter_args(tmp, name, head_node)])))


def scrape(tmp: Path, name: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return parse(exporter(tmp, name).collect().render())


# --- promtool ------------------------------------------------------------------------------------------------

# What promtool's linter says of names and labels we keep on purpose: dcgm-exporter's own (upper-case _TOTAL,
# camelCase modelName/UUID, "COUNTER" in a name) and the EFA exporter's counters without _total. Nothing else.
ALLOWED_LINT = (
    re.compile(r'^(DCGM_FI_\w+) counter metrics should have "_total" suffix$'),
    re.compile(r"^(DCGM_FI_\w+|gpucluster_gpu_xid_errors_total) label names should be written in 'snake_case' not 'camelCase'$"),
    re.compile(r"^(DCGM_FI_DEV_PCIE_REPLAY_COUNTER) metric name should not include type 'counter'$"),
    re.compile(r'^(node_amazonefa_\w+) counter metrics should have "_total" suffix$'),
)


def promtool_check(text: str) -> list[str]:
    if PROMTOOL is None:
        if CI:
            pytest.fail("promtool (Debian package prometheus) is missing: .ci/run installs it")
        pytest.skip("promtool is not installed here (apt install prometheus)")
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode in (0, 3), f"promtool could not parse the exposition (rc {proc.returncode}): {lines[:5]}"
    return lines


@pytest.mark.parametrize("name", sorted(nodes.SCENARIOS))
def test_promtool_parses_every_scenario_and_lints_only_the_dcgm_names(node_dir: Path, name: str) -> None:
    text = exporter(node_dir, name, head_node=True).collect().render()
    for line in promtool_check(text):
        assert any(p.match(line) for p in ALLOWED_LINT), f"promtool: {line}"


def test_promtool_rejects_a_broken_exposition() -> None:
    """The check above can fail: a sample with a bad value is an error (exit 1), not a lint."""
    if PROMTOOL is None:
        pytest.skip("promtool is not installed here")
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input='x{a="1"} one\n', capture_output=True, text=True)
    assert proc.returncode == 1


# --- values per scenario -------------------------------------------------------------------------------------


def test_healthy_node_reads_an_idle_h100(node_dir: Path) -> None:
    s = scrape(node_dir, "healthy")
    assert s["gpucluster_nvml_up"][0][1] == 1 and s["gpucluster_gpus"][0][1] == 8
    labels = s["DCGM_FI_DEV_GPU_TEMP"][0][0]
    assert labels == {
        "gpu": "0",
        "UUID": "GPU-00000000-0000-4000-8000-000000000000",
        "pci_bus_id": "00000000:53:00.0",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "healthy-node",
        "DCGM_FI_DRIVER_VERSION": "580.159.04",
    }
    assert set(by_gpu(s, "DCGM_FI_DEV_GPU_TEMP").values()) == {37}
    assert set(by_gpu(s, "DCGM_FI_DEV_POWER_USAGE").values()) == {71.532}
    assert set(by_gpu(s, "DCGM_FI_DEV_FB_USED").values()) == {4.5}
    assert set(by_gpu(s, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS").values()) == {nodes.GPU_IDLE}
    assert set(by_gpu(s, "DCGM_FI_DEV_XID_ERRORS").values()) == {0}
    for name in ("DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"):
        assert set(by_gpu(s, name).values()) == {0}, name
    assert len(by_gpu(s, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL")) == 8
    assert "gpucluster_gpu_xid_errors_total" not in s
    # NVML has no profiling counters: none is written, none is made up
    assert not [n for n in s if n.startswith("DCGM_FI_PROF_")]
    assert set(by_gpu(s, "gpucluster_gpu_read_errors").values()) == {0}


def test_throttling_gpus_show_their_reasons_and_rising_violation_counters(node_dir: Path) -> None:
    e = exporter(node_dir, "throttling")
    first, second = parse(e.collect().render()), parse(e.collect().render())
    reasons = by_gpu(first, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
    assert reasons["3"] == nodes.HW_SLOWDOWN | nodes.SW_THERMAL | nodes.HW_THERMAL
    assert reasons["4"] == nodes.SW_POWER_CAP | nodes.HW_POWER_BRAKE
    assert reasons["0"] == nodes.GPU_IDLE
    assert by_gpu(first, "DCGM_FI_DEV_GPU_TEMP")["3"] == 89
    thermal = by_gpu(first, "DCGM_FI_DEV_THERMAL_VIOLATION"), by_gpu(second, "DCGM_FI_DEV_THERMAL_VIOLATION")
    power = by_gpu(first, "DCGM_FI_DEV_POWER_VIOLATION"), by_gpu(second, "DCGM_FI_DEV_POWER_VIOLATION")
    assert (thermal[0]["3"], thermal[1]["3"]) == (4e9, 6e9)
    assert (power[0]["4"], power[1]["4"]) == (3e9, 5e9)
    assert thermal[1]["0"] == thermal[0]["0"] == 0 and power[1]["3"] == 0


def test_pending_row_remap_and_its_ecc_counts(node_dir: Path) -> None:
    s = scrape(node_dir, "row_remap")
    assert by_gpu(s, "DCGM_FI_DEV_ROW_REMAP_PENDING") == {str(i): (1 if i == 2 else 0) for i in range(8)}
    assert by_gpu(s, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")["2"] == 1
    assert by_gpu(s, "DCGM_FI_DEV_ROW_REMAP_FAILURE")["2"] == 0
    assert by_gpu(s, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")["2"] == 1
    assert (by_gpu(s, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL")["2"], by_gpu(s, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL")["2"]) == (12, 40)


def test_xid_comes_from_the_kernels_record_and_never_from_forged_text(node_dir: Path) -> None:
    s = scrape(node_dir, "xid")
    last = by_gpu(s, "DCGM_FI_DEV_XID_ERRORS")
    assert last == {str(i): (79 if i == nodes.XID_GPU else 0) for i in range(8)}  # GPU 0's forged 79s: refused
    [(labels, count)] = s["gpucluster_gpu_xid_errors_total"]
    assert (labels["gpu"], labels["xid"], labels["class"], count) == ("5", "79", "replace", 1)


def test_a_gpu_nvml_lost_keeps_its_xid_by_pci_address(tmp_path: Path, node_dir: Path) -> None:
    doc = scenario({5: {"handle": {"error": "GPU_IS_LOST"}}})
    (tmp_path / "nvml.json").write_text(json.dumps(doc))
    _, xid_log = nodes.write_scenario(tmp_path / "xid", "xid")  # the kernel's XID 79 record for GPU 5's address
    src = Sources(hostname="n", fake_nvml=str(tmp_path / "nvml.json"), kernel_log_file=str(xid_log))
    src.sysfs_root = str(node_dir / "sys")
    s = parse(Exporter(src).collect().render())
    assert "5" not in by_gpu(s, "DCGM_FI_DEV_GPU_TEMP") and len(by_gpu(s, "DCGM_FI_DEV_GPU_TEMP")) == 7
    assert by_gpu(s, "gpucluster_gpu_read_errors")["5"] == 1
    lost = [(lb, v) for lb, v in s["DCGM_FI_DEV_XID_ERRORS"] if "gpu" not in lb]
    assert lost == [({"pci_bus_id": "0000:a8:00", "Hostname": "n"}, 79)]


def test_a_driver_without_the_v2_memory_call_still_gives_free_and_used(tmp_path: Path, node_dir: Path) -> None:
    (tmp_path / "nvml.json").write_text(json.dumps(scenario({1: {"memory_v2": "v1 only"}})))
    src = Sources(hostname="n", fake_nvml=str(tmp_path / "nvml.json"), kernel_log_file=str(node_dir / "kernel-healthy.log"))
    src.sysfs_root, src.lustre_roots = str(tmp_path), (str(tmp_path),)
    s = parse(Exporter(src).collect().render())
    assert by_gpu(s, "DCGM_FI_DEV_FB_USED")["1"] == 4.5 and "1" not in by_gpu(s, "DCGM_FI_DEV_FB_RESERVED")
    assert by_gpu(s, "DCGM_FI_DEV_FB_RESERVED")["0"] == 539.0625
    assert by_gpu(s, "gpucluster_gpu_read_errors")["1"] == 0  # NotSupported is not an error


def test_nvml_that_cannot_start_is_reported_not_faked(tmp_path: Path) -> None:
    (tmp_path / "nvml.json").write_text(json.dumps(scenario(init_error="DRIVER_NOT_LOADED")))
    src = Sources(hostname="n", fake_nvml=str(tmp_path / "nvml.json"), kernel_log_file=str(tmp_path / "none.log"))
    src.sysfs_root, src.lustre_roots = str(tmp_path), (str(tmp_path),)
    s = parse(Exporter(src).collect().render())
    assert s["gpucluster_nvml_up"] == [({}, 0)] and s["gpucluster_xid_log_readable"] == [({}, 0)]
    assert not [n for n in s if n.startswith("DCGM_")]


# --- escaping ------------------------------------------------------------------------------------------------

HOSTILE = 'H100 "pwned"} evil_metric 1\n# TYPE x counter\\'


def test_hostile_label_values_stay_inside_their_label(tmp_path: Path, node_dir: Path) -> None:
    doc = scenario({0: {"name": HOSTILE}})
    (tmp_path / "nvml.json").write_text(json.dumps(doc))
    src = Sources(hostname=HOSTILE, fake_nvml=str(tmp_path / "nvml.json"), kernel_log_file=str(node_dir / "kernel-healthy.log"))
    src.sysfs_root, src.lustre_roots = str(tmp_path), (str(tmp_path),)
    text = Exporter(src).collect().render()
    s = parse(text)
    assert "evil_metric" not in s and not any(line.startswith("evil") for line in text.splitlines())
    assert s["DCGM_FI_DEV_GPU_TEMP"][0][0]["modelName"] == HOSTILE
    assert {lb["Hostname"] for lb, _ in s["DCGM_FI_DEV_GPU_TEMP"]} == {HOSTILE}
    promtool_check(text)


def test_names_are_checked_not_escaped() -> None:
    reg = Registry()
    with pytest.raises(ValueError, match="not a valid Prometheus metric"):
        reg.add("bad-name", "gauge", "x", 1)
    with pytest.raises(ValueError, match="label name"):
        reg.add("good", "gauge", "x", 1, {"bad label": "v"})
    with pytest.raises(ValueError, match="declared as gauge and as counter"):
        reg.add("good", "counter", "x", 1)


# --- EFA, Lustre, Slurm, the agent ---------------------------------------------------------------------------


def test_efa_counters_from_sysfs(tmp_path: Path) -> None:
    root = nodes.write_sysfs(tmp_path / "sys", efa=2, gpus=0)
    nodes.make_sysfs(tmp_path / "other", efa=0, other=1)  # an mlx5 device: not EFA, not read
    shutil.move(str(next((tmp_path / "other" / "class" / "infiniband").iterdir())), root / "class" / "infiniband")
    (root / "class" / "infiniband" / "rdmap16s27" / "ports" / "1" / "hw_counters" / "tx_bytes").write_text("garbage\n")
    (root / "class" / "infiniband" / "rdmap16s27" / "ports" / "1" / "hw_counters" / "Bad-Name").write_text("1\n")
    reg = Registry()
    assert fabric.collect_efa(reg, str(root)) == 2
    s = parse(reg.render())
    assert {lb["device"] for lb, _ in s["node_amazonefa_rx_pkts"]} == {"rdmap16s27", "rdmap17s27"}
    assert s["node_amazonefa_tx_pkts"] == [
        ({"device": "rdmap16s27", "port": "1"}, 1033),
        ({"device": "rdmap17s27", "port": "1"}, 2033),
    ]
    assert s["node_amazonefa_tx_bytes"] == [({"device": "rdmap17s27", "port": "1"}, 2032)]  # the garbage one left out
    assert reg.families["node_amazonefa_lifespan"].kind == "gauge" and reg.families["node_amazonefa_rx_drops"].kind == "counter"
    assert len(s) == len(nodes.EFA_COUNTERS)


def test_lustre_llite_stats_both_formats_and_one_root_only(tmp_path: Path) -> None:
    ops, volume = fabric.parse_llite_stats(nodes.LLITE_STATS)
    assert volume == {"read": 68719476736, "write": 10737418240}
    assert ops["open"] == 1200 and ops["ioctl"] == 64 and "snapshot_time" not in ops
    old = "snapshot_time 1.0 secs.usecs\nread_bytes 3 samples [bytes] 4096 8192 16384\nopen 2 samples [regs]\n"
    assert fabric.parse_llite_stats(old) == ({"read_bytes": 3, "open": 2}, {"read": 16384})
    nodes.write_lustre(tmp_path / "proc")
    nodes.write_lustre(tmp_path / "debug")  # the same client seen under both roots: counted once
    reg = Registry()
    assert fabric.collect_lustre(reg, (str(tmp_path / "proc"), str(tmp_path / "debug"))) == 1
    s = parse(reg.render())
    assert ({"fs": "185de874", "direction": "read"}, 68719476736) in s["gpucluster_lustre_client_bytes_total"]


def test_slurm_nodes_jobs_and_drains_without_free_text_labels(node_dir: Path) -> None:
    reg = Registry()
    head.collect_slurm(reg, str(node_dir / "bin"))
    s = parse(reg.render())
    assert (node_dir / "bin" / "sinfo.args").read_text().split() == ["-h", "-N", "-o", "%n|%T|%E"]
    assert dict((lb["state"], v) for lb, v in s["gpucluster_slurm_nodes"]) == {
        "allocated": 1,
        "mixed": 1,
        "idle~": 2,
        "drained": 2,
        "draining": 1,
        "down*": 1,
    }  # p5-1 listed twice (two partitions) counts once
    drains = {(lb["check"], lb["action"]): v for lb, v in s["gpucluster_slurm_unavailable_nodes"]}
    assert drains == {("xid", "replace"): 1, ("gpu_temperature", "reboot"): 1, ("other", ""): 2}
    assert dict((lb["reason"], v) for lb, v in s["gpucluster_slurm_pending_jobs"]) == {"Resources": 1, "Priority": 2, "other": 1}
    assert dict((lb["state"], v) for lb, v in s["gpucluster_slurm_jobs"]) == {"RUNNING": 2, "PENDING": 4, "COMPLETING": 1}
    # GPUs allocated per node: one series per GPU node (typed entries summed, an index list's comma is no new
    # entry), none for a node without GPUs nor for a name that is not a host name
    assert (node_dir / "bin" / "sinfo-gres.args").read_text().split() == ["-h", "-N", "-O", "NodeHost:|,GresUsed:|"]
    assert [(lb, v) for lb, v in s["gpucluster_slurm_node_gpus_allocated"]] == [
        ({"node": n}, v) for n, v in (("p5-1", 8), ("p5-2", 3), ("p5-3", 0), ("p5-4", 0), ("p5-5", 0), ("p5-6", 3))
    ]


def test_slurm_failure_is_a_collector_failure_not_a_lost_scrape(tmp_path: Path, node_dir: Path) -> None:
    nodes.write_slurm(tmp_path / "bin")
    (tmp_path / "bin" / "sinfo").write_text(
        "#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller' >&2\nexit 1\n"
    )
    src = Sources(hostname="h", gpus=False, sysfs_root=str(node_dir / "sys"), slurm_bin_dir=str(tmp_path / "bin"))
    src.lustre_roots = (str(node_dir / "llite"),)
    s = parse(Exporter(src).collect().render())
    ok = {lb["collector"]: v for lb, v in s["gpucluster_metrics_collector_success"]}
    assert ok == {"efa": 1, "lustre": 1, "slurm": 0}
    assert "node_amazonefa_tx_pkts" in s and "gpucluster_slurm_nodes" not in s


def test_agent_state_files(node_dir: Path) -> None:
    reg = Registry()
    head.collect_agent(reg, str(node_dir / "state"))
    s = parse(reg.render())
    assert s["gpucluster_agent_launches_in_flight"] == [({"group": "p5"}, 2)]
    holds = {(lb["scope"], lb["kind"]): v for lb, v in s["gpucluster_agent_holds"]}
    assert holds == {
        ("group", "insufficient_capacity"): 1,
        ("group", "protected_mode"): 1,
        ("node", "insufficient_capacity"): 1,
        ("node", "launch_failure"): 1,
    }
    assert s["gpucluster_agent_protected"] == [({"group": "g6"}, 1), ({"group": "p5"}, 0)]
    assert {(lb["action"], lb["outcome"]): v for lb, v in s["gpucluster_agent_repairs_recent"]} == {
        ("reboot", "healthy"): 3,
        ("replace", "replaced"): 1,
    }
    assert s["gpucluster_agent_repair_brake_tripped"] == [({"group": "g6"}, 1)]
    empty = Registry()
    head.collect_agent(empty, str(node_dir / "no-such-dir"))  # a head node before the agent's first run
    assert empty.render() == ""


# --- HTTP and the command line -------------------------------------------------------------------------------


def test_serves_metrics_over_http_on_a_free_port(node_dir: Path) -> None:
    server = make_server(exporter(node_dir, "xid"), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            assert "DCGM_FI_DEV_XID_ERRORS" in parse(resp.read().decode())
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "/", timeout=10)
        assert err.value.code == 404
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_command_line_print_and_its_errors(node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["print", *nodes.exporter_args(node_dir, "row_remap")]) == 0
    assert "DCGM_FI_DEV_ROW_REMAP_PENDING" in parse(capsys.readouterr().out)
    from gpucluster_agents.cli import main as agent_main  # gpucluster-agent metrics …: the same command line

    assert agent_main(["metrics", "print", *nodes.exporter_args(node_dir, "xid")]) == 0
    assert by_gpu(parse(capsys.readouterr().out), "DCGM_FI_DEV_XID_ERRORS")["5"] == 79
    assert main(["serve", "--no-gpus", "--port", "70000"]) == 2
    assert "not a TCP port" in capsys.readouterr().err
    assert main(["serve", "--no-gpus", "--listen", "192.0.2.1", "--port", "0"]) == 2  # not this machine's address
    assert "cannot listen on 192.0.2.1" in capsys.readouterr().err


def test_every_metric_name_is_in_the_docs() -> None:
    from tests.conftest import ROOT

    doc = "".join((ROOT / "docs" / page).read_text() for page in ("monitoring.md", "dashboards.md"))  # teams' series
    from gpucluster_agents.contract import metrics as series

    names = list(gpu.NAMES) + [
        v[0] for v in vars(series).values() if isinstance(v, tuple) and len(v) == 3 and str(v[0]).startswith("gpucluster_")
    ]
    names += [series.EFA_PREFIX, *(f[0] for f in series.ACCOUNT_FAMILIES)]
    assert {"gpucluster_slurm_nodes", "gpucluster_lustre_client_bytes_total", "gpucluster_metrics_collector_success"} <= set(
        names
    )
    missing = [n for n in names if f"`{n}" not in doc]
    assert not missing, f"neither docs/monitoring.md nor docs/dashboards.md lists {missing}"
