"""What collects and ships: the head node's Prometheus agent config (checked by the real ``promtool check config``,
pinned by a golden), the EKS scraper's configuration (golden; Debian's promtool is built without Kubernetes service
discovery, so its structure is asserted), the log shipper's config per role (parsed back by the node package's own
strict parser, pinned by goldens), and the policies each role or topic gets."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.policy.iam_eval import Request, evaluate
from gpucluster.render.monitoring.collection import (
    AGENT_WAL_PATH,
    TARGETS_DIR,
    prometheus_agent_config,
    scraper_config,
)
from gpucluster.render.monitoring.logs import LOGS_CONFIG_PATH, log_group_name, logs_config, logs_files, stream_patterns
from gpucluster.render.monitoring.policies import log_shipping_policy, remote_write_policy, topic_policy
from gpucluster.render.slurm.collector import (
    COLLECTOR_MEMORY_MAX,
    COLLECTOR_UNIT,
    SIGNER_LISTEN,
    SIGNER_MEMORY_MAX,
    SIGNER_UNIT,
    collector_unit,
    signer_sysusers,
    signer_unit,
)
from gpucluster.render.slurm.guard import COLLECTOR_USER, SIGNER_USER
from gpucluster_agents.contract.logs import parse_logs
from gpucluster_agents.logship.shipper import stream_name
from tests.conftest import GOLDEN, check_golden, require_tool

WORKSPACE = "ws-12345678-abcd-ef01-2345-6789abcdef01"


def _promtool(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_tool("promtool"), "check", "config", str(path)], capture_output=True, text=True, timeout=60)


def test_m2_prometheus_config_makes_no_aws_call() -> None:
    """Prometheus holds no AWS credentials on the head node (the IMDS guard refuses its user): its config discovers
    nothing in EC2 and signs nothing; its targets are the signer's files, one a job, in the signer's StateDirectory."""
    text = prometheus_agent_config("slurm-p5", WORKSPACE, 30, signer=SIGNER_LISTEN)
    assert "ec2_sd_configs" not in text and "sigv4" not in text and "amazonaws.com" not in text
    doc = yaml.safe_load(text)
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert set(jobs) == {"gpu", "node", "head"}
    for name, job in jobs.items():
        assert job["file_sd_configs"] == [{"files": [f"{TARGETS_DIR}/{name}.json"], "refresh_interval": "1m"}]
    assert TARGETS_DIR == "/var/lib/" + _unit_value(signer_unit("us-east-1", WORKSPACE, "slurm-p5"), "StateDirectory")
    assert doc["global"]["external_labels"] == {"cluster": "slurm-p5"}


def _unit_value(unit: str, key: str) -> str:
    [value] = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith(f"{key}=")]
    return value


def test_promtool_refuses_a_broken_agent_config(tmp_path: Path) -> None:
    """The check bites: a remote write without its URL is refused."""
    doc = yaml.safe_load(prometheus_agent_config("c", WORKSPACE, 30, signer=SIGNER_LISTEN))
    del doc["remote_write"][0]["url"]
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(doc))
    assert _promtool(path).returncode != 0


def test_scraper_config_scrapes_dcgm_node_exporter_and_kueue(update_golden: bool) -> None:
    text = scraper_config("eks-p5", 30, "gpu-operator", "kueue-system")
    check_golden(GOLDEN / "monitoring" / "eks-p5.scraper.yaml", text, update_golden)
    doc = yaml.safe_load(text)
    assert doc["global"]["scrape_interval"] == "30s"
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert set(jobs) == {"gpu", "node", "kueue"}
    keep = {name: [r["regex"] for r in job["relabel_configs"] if r.get("action") == "keep"] for name, job in jobs.items()}
    assert keep["gpu"] == ["gpu-operator", "nvidia-dcgm-exporter-.*", "9400"]
    assert keep["kueue"][0] == "kueue-system" and jobs["kueue"]["scheme"] == "https"
    # dcgm-exporter's pod/namespace/container of the GPU's workload win over the target's labels (a real Prometheus
    # scraping this job's settings keeps them: tests/e2e/test_alerts_e2e.py); the other jobs keep Prometheus's default
    assert {name: job.get("honor_labels", False) for name, job in jobs.items()} == {"gpu": True, "node": False, "kueue": False}


OWN_LOGS = {
    "head": {"slurmctld", "slurmdbd", "gpucluster-agent"},
    "compute": {"slurmd", "health"},
    "login": {"auth", "syslog", "sssd", "ssm-agent"},
}


@pytest.mark.parametrize("role", sorted(OWN_LOGS))
def test_the_log_shippers_config_per_role(role: str, update_golden: bool) -> None:
    """What each role ships, read back by the node package's strict parser (a key it does not know fails here)."""
    [config] = [f.text() for f in logs_files("slurm-p5", "us-east-1", role) if f.path == LOGS_CONFIG_PATH]
    check_golden(GOLDEN / "monitoring" / f"slurm-p5.{role}.logs.json", config, update_golden)
    parsed = parse_logs(config)
    files = {f.name: f.path for f in parsed.files}
    assert set(files) == OWN_LOGS[role] | {"cloud-init", "cloud-init-output", "gpucluster-setup"}
    assert all(p.startswith("/var/log/") for p in files.values()) and parsed.log_root == "/var/log"
    assert parsed.log_group == log_group_name("slurm-p5") == "/gpucluster/slurm-p5" and parsed.region == "us-east-1"
    assert parsed.state_file == "/var/lib/gpucluster-logs/state.json"  # the unit's StateDirectory
    assert len(config) < 600  # compute nodes carry it in their 16 KB of user data


def test_policies_grant_one_resource_each() -> None:
    ws = f"arn:aws:aps:us-east-1:123456789012:workspace/{WORKSPACE}"
    write = remote_write_policy(ws)["Statement"]
    assert write[0] == {"Sid": "RemoteWriteToTheClusterWorkspace", "Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": ws}
    logs = log_shipping_policy("arn:aws:logs:us-east-1:123456789012:log-group:/gpucluster/c", ("*/slurmd",))["Statement"]
    actions = {a for st in logs for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}
    assert actions == {"logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"}
    topic = "arn:aws:sns:us-east-1:123456789012:c-alerts"
    amp = next(s for s in topic_policy(topic, ws, "123456789012")["Statement"] if s["Sid"] == "AmpAlertmanagerPublishes")
    assert amp["Principal"] == {"Service": "aps.amazonaws.com"} and amp["Resource"] == topic
    assert amp["Condition"] == {"ArnEquals": {"aws:SourceArn": ws}, "StringEquals": {"aws:SourceAccount": "123456789012"}}


GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/gpucluster/c"


def _put(policy: dict[str, Any], stream: str, group: str = GROUP) -> bool:
    return evaluate([policy], Request("logs:PutLogEvents", f"{group}:log-stream:{stream}")).allowed


def test_l4_a_compute_node_cannot_write_the_head_nodes_streams() -> None:
    """IAM cannot tie a stream to its instance, so each role writes its own logs' streams only: root on a compute node
    cannot append forged lines to the head node's slurmctld, slurmdbd or agent stream, nor a login node's auth log;
    a login node none of the head's or compute's. Every stream the shipper makes
    for a role's files (its own stream_name) is one its role may write."""
    head, compute = (log_shipping_policy(GROUP, stream_patterns(role)) for role in ("head", "compute"))
    for name in ("slurmctld", "slurmdbd", "gpucluster-agent"):
        assert _put(head, f"i-0head000000000000/{name}") and not _put(compute, f"i-0head000000000000/{name}")
    for name in ("slurmd", "health"):
        assert _put(compute, f"i-0abc000000000000/{name}") and not _put(head, f"i-0abc000000000000/{name}")
    assert not _put(compute, "i-0abc000000000000/slurmctld/x") and not _put(compute, "i-0abc000000000000/slurmdx")
    assert not _put(compute, "i-0abc000000000000/slurmd", group=GROUP.replace("/c", "/other"))
    login = log_shipping_policy(GROUP, stream_patterns("login"))
    for name in ("auth", "syslog", "ssm-agent", "sssd/sssd_LDAP.log"):  # forged sshd or sudo lines from a job's node
        assert _put(login, f"i-0log000000000000/{name}") and not _put(compute, f"i-0log000000000000/{name}")
        assert not _put(head, f"i-0log000000000000/{name}")
    for name in ("slurmctld", "slurmdbd", "gpucluster-agent", "slurmd", "health"):
        assert not _put(login, f"i-0abc000000000000/{name}")
    for role, policy in (("head", head), ("compute", compute), ("login", login)):
        for spec in logs_config("c", "us-east-1", role).files:
            path = spec.path.replace("*", "boot") if spec.is_glob else spec.path
            assert _put(policy, stream_name("i-0abc000000000000", spec, path)), (role, spec.name)


def test_head_node_writes_through_its_signer_a_config_promtool_passes(tmp_path: Path, update_golden: bool) -> None:
    """What the head node runs: the same discovery, remote-written in plain HTTP to the signer on 127.0.0.1 (which
    signs for AMP: tests/e2e/test_collector_e2e.py), no ``sigv4:`` left for Prometheus to drop."""
    text = prometheus_agent_config("slurm-p5", WORKSPACE, 30, signer=SIGNER_LISTEN)
    path = tmp_path / "prometheus.yml"
    path.write_text(text)
    result = _promtool(path)
    assert result.returncode == 0, result.stdout + result.stderr
    check_golden(GOLDEN / "monitoring" / "slurm-p5.collector.prometheus.yml", text, update_golden)
    write = yaml.safe_load(text)["remote_write"]
    assert len(write) == 1 and "sigv4" not in write[0]
    assert write[0]["url"] == f"http://127.0.0.1:9091/workspaces/{WORKSPACE}/api/v1/remote_write"


def test_collector_units_are_read_by_systemd_and_pinned(tmp_path: Path, update_golden: bool) -> None:
    """Both units pass ``systemd-analyze verify`` (their programs exist here: Debian's prometheus, python3) and are
    pinned, with the hardening the docs promise and a memory cap each; the collector on 127.0.0.1 only."""
    analyze = require_tool("systemd-analyze")
    units = {COLLECTOR_UNIT: collector_unit(), SIGNER_UNIT: signer_unit("us-east-1", WORKSPACE, "slurm-p5")}
    for name, text in units.items():
        check_golden(GOLDEN / "monitoring" / name, text, update_golden)
        for line in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes"):
            assert line in text.splitlines(), (name, line)
        unit = tmp_path / name
        unit.write_text(text)
        verify = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False)
        # only the units' dependencies on the head node's other units may be missing here
        errors = [e for e in verify.stderr.splitlines() if e and "gpucluster-" not in e]
        assert errors == [], verify.stderr
    collector = units[COLLECTOR_UNIT]
    assert "--web.listen-address=127.0.0.1:9090" in collector and "--enable-feature=agent" in collector
    assert f"ReadWritePaths={AGENT_WAL_PATH}" in collector and f"--storage.agent.path={AGENT_WAL_PATH}" in collector
    assert f"--listen {SIGNER_LISTEN} --region us-east-1 --workspace {WORKSPACE}" in units[SIGNER_UNIT]
    broken = tmp_path / "broken.service"
    broken.write_text(collector.replace("ProtectSystem=", "ProtectSystm="))  # the check can fail
    assert "Unknown key" in subprocess.run([analyze, "verify", "--man=no", str(broken)], capture_output=True, text=True).stderr


def test_m1_collector_units_have_a_memory_cap() -> None:
    """Neither loopback service can take the head node's memory (slurmctld, slurmdbd, MariaDB beside them)."""
    for text in (collector_unit(), signer_unit("us-east-1", WORKSPACE, "slurm-p5")):
        assert _unit_value(text, "MemoryMax") in (COLLECTOR_MEMORY_MAX, SIGNER_MEMORY_MAX)
    assert _unit_value(collector_unit(), "MemoryMax") == "40%" and _unit_value(signer_unit("r", "w", "c"), "MemoryMax") == "512M"


def test_m2_only_the_signer_runs_as_its_own_user() -> None:
    """The signer, the one process of the collector with AWS credentials, runs as its own system user (the guard's);
    Prometheus as the package's ``prometheus``, which the guard refuses."""
    assert (_unit_value(signer_unit("r", "w", "c"), "User"), _unit_value(signer_unit("r", "w", "c"), "Group")) == (
        SIGNER_USER,
    ) * 2
    assert _unit_value(collector_unit(), "User") == COLLECTOR_USER == "prometheus"
    assert f"--cluster c --targets-dir {TARGETS_DIR}" in signer_unit("r", "w", "c")
    assert signer_sysusers().splitlines()[1] == f'u {SIGNER_USER} - "gpucluster collector signer" /nonexistent /usr/sbin/nologin'
