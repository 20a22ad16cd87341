"""End to end on 127.0.0.1: our exporter → a real Prometheus with our rules → a real Alertmanager with our routing
tree → a webhook; then every dashboard query against that Prometheus.

- gpucluster's exporter (``python -m gpucluster_agents.metrics serve``) runs on the fake-NVML "faulty" node of
  tests/agents/metrics/nodes.py (GPU 2: a pending row remap after an uncorrected ECC error; GPU 3: thermal
  throttling, its violation counter rising at every read; GPU 4: power brake; GPU 5: XID 79 in the kernel's own
  records) and as the head node (fixed sinfo/squeue output, the agent's state files: a protected node group,
  health-check drains, a tripped repair brake);
- a real ``prometheus-node-exporter`` (meminfo, filesystem, loadavg collectors) reading a fixture procfs: a
  head node with 5 % of its memory available; with the head node's systemd flags as its drop-in renders them
  (the collector limited to slurmctld/slurmdbd): the real exporter takes them and runs the collector, pointed
  at a D-Bus socket that does not exist (never this machine's own units), so the unit-state half of the rules
  is proved by ``promtool test rules`` only;
- the GPU target carries ``node="p5-1"`` (the collector's label from the node-name tag); the head fixture's
  sinfo gives p5-1 8 allocated GPUs and the faulty node keeps 6 of its 8 GPUs idle, so the per-node
  allocated-but-idle alert waits pending for that node;
- Prometheus scrapes both every second and evaluates the rendered rules every second, with their real ``for:``
  durations. What fires here is what fires at once (``for: 0m``) on these readings: uncorrected ECC, XID of the
  replace class, the pending row remap, thermal throttling, health drains, protected mode, failed launches, the
  repair brake. The alerts with longer ``for:`` (temperature, hardware slowdown, the head node's memory) are
  seen *pending* here and never delivered; that they fire once ``for:`` has passed is proved by ``promtool test
  rules`` in tests/render/monitoring/test_rules.py, never by shortening them here;
- the EKS scraper's ``gpu`` job as rendered (its Kubernetes pod discovery swapped for one static target with the
  labels its relabeling gives: the exporter's own ``pod``, the ``node``; Debian's Prometheus has no Kubernetes
  discovery) scrapes a fixed dcgm-exporter exposition whose GPU 0 carries its workload's pod/namespace/container:
  the rendered ``honor_labels`` keeps them (not ``exported_pod``);
- Alertmanager runs AMP's ``alertmanager_config`` as rendered, with two test-only changes: the SNS receiver
  becomes a webhook receiver of the same name (nothing here speaks SNS), and ``group_wait``/``group_interval`` are
  1 s instead of 30 s / 5 min (timings only: the tree, grouping and inhibition are the rendered ones).
  The inhibition is checked for real: GPU 2's critical ECC alert suppresses its own row-remap warning.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.render.monitoring.alertmanager import alertmanager_definition
from gpucluster.render.monitoring.collection import TEAMS_JOB, scraper_config
from gpucluster.render.monitoring.dashboards import dashboards, queries
from gpucluster.render.monitoring.rules import rule_groups
from gpucluster.render.slurm.metrics import HEAD_NODE_EXPORTER_FLAGS
from tests.agents.metrics.nodes import env, exporter_args
from tests.agents.metrics.test_teams import write_team_snapshot
from tests.conftest import require_tool
from tests.e2e.prometheus_stack import HOST, Daemons, StaticExporter, Webhook, free_port, get_json, query, wait_for

pytestmark = pytest.mark.slow  # starts Prometheus and Alertmanager

CLUSTER = "e2e"
ARN = "arn:aws:sns:us-east-1:123456789012:e2e-alerts"
# Fire at once on the faulty node and the head node's fixtures
DELIVERED = {
    "GpuUncorrectableEccErrors",
    "GpuXidReplace",
    "GpuThermalThrottling",
    "SlurmNodesDrainedByHealthCheck",
    "NodeGroupProtectedMode",
    "NodeLaunchFailuresRepeated",
    "RepairBrakeTripped",
}


EXPORTER_POD = "nvidia-dcgm-exporter-x7k2p"
# dcgm-exporter on an EKS node (its Kubernetes pod mapping on): GPU 0 given to a pod, GPU 1 to nobody
DCGM_EKS = (
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-e0",Hostname="ip-10-0-1-5",pod="train-0",namespace="team-a",container="trainer"} 0\n'
    'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-e1",Hostname="ip-10-0-1-5"} 0\n'
)


def _eks_gpu_job(port: int) -> dict[str, Any]:
    """The rendered EKS scraper's ``gpu`` job, its pod discovery and relabeling replaced by one static target with
    the labels that relabeling gives it (the exporter's pod, the node)."""
    (job,) = [
        j
        for j in yaml.safe_load(scraper_config(CLUSTER, 30, "gpu-operator", "kueue-system"))["scrape_configs"]
        if j["job_name"] == "gpu"
    ]
    del job["kubernetes_sd_configs"], job["relabel_configs"]
    labels = {"pod": EXPORTER_POD, "node": "ip-10-0-1-5.ec2.internal"}
    return job | {"job_name": "eks-gpu", "static_configs": [{"targets": [f"{HOST}:{port}"], "labels": labels}]}


@dataclass
class Stack:
    prom: str
    am: str
    webhook: Webhook
    daemons: Daemons


def _alertmanager_config(webhook_url: str) -> tuple[str, str]:
    """(config, template) from AMP's definition, the SNS receiver swapped for a webhook of the same name."""
    doc = yaml.safe_load(alertmanager_definition(ARN, "us-east-1"))
    config = yaml.safe_load(doc["alertmanager_config"])
    (receiver,) = config["receivers"]
    config["receivers"] = [{"name": receiver["name"], "webhook_configs": [{"url": webhook_url, "send_resolved": False}]}]
    config["route"].update(group_wait="1s", group_interval="1s")
    (template,) = doc["template_files"].values()
    return yaml.safe_dump(config), template


def _host_fixture(root: Path) -> list[str]:
    """A head node short on memory (5 % available), as the node exporter's procfs: never this machine's own."""
    (root / "proc" / "1").mkdir(parents=True)
    (root / "sys").mkdir()
    (root / "rootfs").mkdir()
    (root / "proc" / "meminfo").write_text(
        "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:     800000 kB\n"
        "Buffers:           10000 kB\nCached:           200000 kB\n"
    )
    (root / "proc" / "loadavg").write_text("0.50 0.40 0.30 1/200 12345\n")
    (root / "proc" / "1" / "mounts").write_text("/dev/root / ext4 rw,relatime 0 0\n")
    return [f"--path.procfs={root / 'proc'}", f"--path.sysfs={root / 'sys'}", f"--path.rootfs={root / 'rootfs'}"]


def _prometheus_config(exporter: int, node: int, am: int, eks: int, teams: int) -> dict[str, Any]:
    head = {"role": "head"}
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": ["rules.yaml"],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"{HOST}:{am}"]}]}]},
        "scrape_configs": [
            {
                "job_name": "gpu",
                "honor_labels": True,
                "static_configs": [{"targets": [f"{HOST}:{exporter}"], "labels": {**head, "node": "p5-1"}}],
            },
            {"job_name": "node", "static_configs": [{"targets": [f"{HOST}:{node}"], "labels": head}]},
            {"job_name": TEAMS_JOB, "static_configs": [{"targets": [f"{HOST}:{teams}"], "labels": head}]},
            _eks_gpu_job(eks),
        ],
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tools = {name: require_tool(name) for name in ("prometheus", "prometheus-alertmanager", "prometheus-node-exporter")}
    tmp = tmp_path_factory.mktemp("alerts-e2e")
    daemons, webhook, dcgm = Daemons(tmp), Webhook(), StaticExporter(DCGM_EKS)
    try:
        ports = {name: free_port() for name in ("exporter", "node", "am", "prom", "teams")}
        args = exporter_args(tmp / "node", "faulty", head=True)
        _, team_snapshot = write_team_snapshot(tmp / "teams")  # each team's figures, as the head node's loop reads them
        serve = [sys.executable, "-m", "gpucluster_agents.metrics", "serve", "--listen", HOST, "--no-gpus"]
        daemons.start("teams", [*serve, "--port", str(ports["teams"]), "--team-snapshot", str(team_snapshot)], env=env())
        daemons.start(
            "exporter",
            [
                sys.executable,
                "-m",
                "gpucluster_agents.metrics",
                "serve",
                "--listen",
                HOST,
                "--port",
                str(ports["exporter"]),
                *args,
            ],
            env=env(),
        )
        daemons.start(
            "node-exporter",
            [
                tools["prometheus-node-exporter"],
                f"--web.listen-address={HOST}:{ports['node']}",
                "--collector.disable-defaults",
                "--collector.meminfo",
                "--collector.filesystem",
                "--collector.loadavg",
                *HEAD_NODE_EXPORTER_FLAGS,
                *_host_fixture(tmp / "host"),
            ],
            env={"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={tmp / 'no-bus'}"},
        )
        config, template = _alertmanager_config(webhook.url)
        (tmp / "alertmanager.yml").write_text(config)
        (tmp / "gpucluster").write_text(template)
        daemons.start(
            "alertmanager",
            [
                tools["prometheus-alertmanager"],
                f"--config.file={tmp / 'alertmanager.yml'}",
                f"--storage.path={tmp / 'am-data'}",
                f"--web.listen-address={HOST}:{ports['am']}",
                "--cluster.listen-address=",
            ],
        )
        (tmp / "rules.yaml").write_text(rule_groups(CLUSTER, ("slurm",)))
        (tmp / "prometheus.yml").write_text(
            yaml.safe_dump(_prometheus_config(ports["exporter"], ports["node"], ports["am"], dcgm.port, ports["teams"]))
        )
        daemons.start(
            "prometheus",
            [
                tools["prometheus"],
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address={HOST}:{ports['prom']}",
                "--rules.alert.resend-delay=1s",
            ],
        )
        prom, am = f"http://{HOST}:{ports['prom']}", f"http://{HOST}:{ports['am']}"
        wait_for("Alertmanager ready", lambda: get_json(f"{am}/api/v2/status"), 20, daemons, "alertmanager")
        wait_for("both targets up", lambda: _targets_up(prom), 20, daemons, "prometheus")
        yield Stack(prom, am, webhook, daemons)
    finally:
        daemons.stop()
        webhook.close()
        dcgm.close()


def _targets_up(prom: str) -> bool:
    active = get_json(f"{prom}/api/v1/targets")["data"]["activeTargets"]
    return len(active) == 4 and all(t["health"] == "up" for t in active)


def test_alerts_fire_and_reach_the_webhook(stack: Stack) -> None:
    def delivered() -> set[str] | None:
        got = {a["labels"]["alertname"] for a in stack.webhook.alerts()}
        return got if DELIVERED <= got else None

    got = wait_for("the alerts at the webhook", delivered, 25, stack.daemons, "alertmanager")
    assert got == DELIVERED, f"unexpected alerts delivered: {got - DELIVERED}"
    by_name = {a["labels"]["alertname"]: a for a in stack.webhook.alerts()}
    xid = by_name["GpuXidReplace"]
    assert (xid["labels"]["gpu"], xid["labels"]["severity"], xid["labels"]["cluster"]) == ("5", "critical", CLUSTER)
    assert "XID 79" in xid["annotations"]["summary"] and "replace the instance" in xid["annotations"]["runbook"]
    assert by_name["GpuThermalThrottling"]["labels"]["gpu"] == "3"
    assert by_name["GpuUncorrectableEccErrors"]["labels"]["gpu"] == "2"
    for note in stack.webhook.received:  # grouped by the rendered tree: one alert name per notification
        assert set(note["groupLabels"]) == {"cluster", "alertname"} and note["receiver"] == "sns"


def test_critical_on_a_gpu_inhibits_its_warnings(stack: Stack) -> None:
    """GPU 2's row-remap warning fires in Prometheus but Alertmanager holds it back: GPU 2's critical ECC alert."""
    firing = wait_for(
        "the row-remap alert firing",
        lambda: [
            a
            for a in get_json(f"{stack.prom}/api/v1/alerts")["data"]["alerts"]
            if a["labels"]["alertname"] == "GpuRowRemapPending" and a["state"] == "firing"
        ],
        15,
        stack.daemons,
        "prometheus",
    )
    assert firing[0]["labels"]["gpu"] == "2"
    held = wait_for(
        "Alertmanager to know the row-remap alert",
        lambda: [a for a in get_json(f"{stack.am}/api/v2/alerts") if a["labels"]["alertname"] == "GpuRowRemapPending"],
        15,
        stack.daemons,
        "alertmanager",
    )
    assert held[0]["status"]["state"] == "suppressed" and held[0]["status"]["inhibitedBy"]
    assert "GpuRowRemapPending" not in {a["labels"]["alertname"] for a in stack.webhook.alerts()}


def test_the_head_node_exporter_runs_the_systemd_collector_for_the_slurm_units_only(stack: Stack) -> None:
    """The rendered flags are taken by the real node exporter: its systemd collector runs (and fails here: no
    D-Bus), and no other collector of the defaults is back."""
    status, body = query(stack.prom, 'node_scrape_collector_success{job="node"}')
    assert status == 200, body
    collectors = {r["metric"]["collector"]: r["value"][1] for r in body["data"]["result"]}
    assert collectors == {"meminfo": "1", "filesystem": "1", "loadavg": "1", "systemd": "0"}


def test_the_eks_scrape_keeps_the_gpus_workload_labels(stack: Stack) -> None:
    """honor_labels as rendered: GPU 0's pod/namespace/container are its workload's, not renamed exported_*; GPU 1
    (no workload) carries the target's pod, the exporter's own, which the idle-allocated rule ignores."""
    status, body = query(stack.prom, 'DCGM_FI_DEV_GPU_UTIL{job="eks-gpu"}')
    assert status == 200, body
    got = {r["metric"]["gpu"]: r["metric"] for r in body["data"]["result"]}
    assert (got["0"]["pod"], got["0"]["namespace"], got["0"]["container"]) == ("train-0", "team-a", "trainer")
    assert not [k for k in got["0"] if k.startswith("exported_")]
    assert got["1"]["pod"] == EXPORTER_POD and "namespace" not in got["1"]


def test_every_dashboard_query_runs(stack: Stack) -> None:
    failures, with_data, slurm_teams = [], 0, {}
    for name, board in dashboards(gpu_hour_price_usd=4.0).items():
        for title, expr in queries(board):  # the team variable at "All"
            status, body = query(stack.prom, expr)
            if status != 200 or body.get("status") != "success":
                failures.append(f"{name} / {title}: {expr}\n  {status} {body.get('error')}")
            elif body["data"]["result"]:
                with_data += 1
            if title.startswith("Slurm: "):
                slurm_teams[title] = sorted({r["metric"].get("account", "") for r in body["data"]["result"]})
    assert not failures, "\n".join(failures)
    # every Slurm team panel draws both teams of the accounts file, from the loopback exporter's scrape
    assert slurm_teams and all(accounts == ["applied", "research"] for accounts in slurm_teams.values()), slurm_teams
    assert with_data >= 20, f"only {with_data} queries returned data from the exporters"  # the scrape reached the panels


def test_alerts_with_a_for_duration_wait_pending(stack: Stack) -> None:
    """GPU 3 at 89 °C with hardware slowdown bits, GPU 4's power brake and the head node's low memory match their
    rules at once, but stay pending for their ``for:`` and reach nobody."""
    wanted = {"GpuTemperatureHigh", "GpuTemperatureCritical", "GpuHardwareSlowdown", "HeadNodeMemoryLow", "GpuAllocatedIdleSlurm"}

    def pending() -> dict[str, set[str]] | None:
        got: dict[str, set[str]] = {}
        for alert in get_json(f"{stack.prom}/api/v1/alerts")["data"]["alerts"]:
            if alert["state"] == "pending":
                labels = alert["labels"]
                got.setdefault(labels["alertname"], set()).add(labels.get("gpu", labels.get("node", "")))
        return got if wanted <= set(got) else None

    got = wait_for("the pending alerts", pending, 15, stack.daemons, "prometheus")
    assert got["GpuHardwareSlowdown"] == {"3", "4"} and got["GpuTemperatureCritical"] == {"3"}
    assert got["GpuAllocatedIdleSlurm"] == {"p5-1"}  # 8 allocated, 2 busy; p5-2's GPUs are not scraped here
    assert not wanted & {a["labels"]["alertname"] for a in stack.webhook.alerts()}
