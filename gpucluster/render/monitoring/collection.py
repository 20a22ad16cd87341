"""What collects the metrics into AMP: Prometheus in agent mode on the Slurm head node, and the AMP managed
scraper's configuration on EKS.

Ports (the exporters' own, docs/monitoring.md ``## Metrics``): gpucluster's NVML exporter and NVIDIA's dcgm-exporter
on 9400, the node exporter on 9100; the head node's exporter of Slurm's and the agent's figures on 9400 too. Every
exporter listens on its node's private address only (never localhost nor 0.0.0.0).

Slurm's collector reads its targets from files (``file_sd_configs``) that the collector's signer writes every minute
from EC2 (``gpucluster_agents/metrics/targets.py``: Prometheus gets no AWS credentials): the GPU nodes by tag
``gpucluster:cluster`` = the cluster and a ``gpucluster:node-group`` tag, the head node by ``gpucluster:role`` =
head, running instances only (dynamic nodes come and go, and Prometheus follows the files with no restart). The head
node's series carry ``role="head"`` (the alert rules select the head node by it), the others ``role="compute"``.
Every series carries ``cluster``; a GPU node's carry ``node_group`` and ``node`` (its Slurm name).
"""

from __future__ import annotations

from typing import Any

from gpucluster.render.core import to_yaml
from gpucluster_agents.contract import metrics

GPU_EXPORTER_PORT = metrics.GPU_EXPORTER_PORT
NODE_EXPORTER_PORT = metrics.NODE_EXPORTER_PORT
HEAD_EXPORTER_PORT = 9400
KUEUE_METRICS_PORT = 8443
EXPORTER_PORTS = (GPU_EXPORTER_PORT, NODE_EXPORTER_PORT)
"""The ports the head node's collector may open on the GPU nodes (and nothing else new)."""

PROMETHEUS_CONFIG_PATH = "/etc/gpucluster/collector/prometheus.yml"
"""Not /etc/prometheus/prometheus.yml: Debian's prometheus.service would read that one as a full server."""
AGENT_WAL_PATH = "/var/lib/prometheus/agent"
TARGETS_DIR = "/var/lib/gpucluster-collector"
"""Where the signer writes the collector's targets (its unit's StateDirectory; ``gpucluster_agents/metrics/targets.py``)."""
TARGET_JOBS = tuple(metrics.JOB_PORTS)
"""The collector's jobs, one targets file each: ``gpu`` (9400) and ``node`` (9100) of the GPU nodes, ``head`` (both)."""


def _file_job(name: str, targets_dir: str, interval: str) -> dict[str, Any]:
    """A job whose targets, with their labels, are the signer's file ``<targets_dir>/<name>.json``."""
    return {
        "job_name": name,
        "scrape_interval": interval,
        "file_sd_configs": [{"files": [f"{targets_dir}/{name}.json"], "refresh_interval": "1m"}],
    }


TEAMS_JOB = "teams"
"""The head node's loopback exporter of each team's figures (``gpucluster/render/slurm/team_metrics.py``)."""


def prometheus_agent_config(
    cluster: str,
    workspace_id: str,
    interval_seconds: int,
    *,
    signer: str,
    targets_dir: str = TARGETS_DIR,
    teams: str | None = None,
) -> str:
    """The head node's ``prometheus.yml`` (Prometheus ``--enable-feature=agent``): the targets the signer lists in
    ``targets_dir`` (and ``teams``, ``host:port`` on loopback: the exporter of each team's figures, job
    :data:`TEAMS_JOB`, labelled ``role="head"``), remote-written in plain HTTP to gpucluster's signer at ``signer`` (``host:port``), which signs
    for AMP and forwards (``gpucluster_agents/metrics/signer.py``: Debian's Prometheus sends its own ``sigv4:``
    writes unsigned). Prometheus itself holds no AWS credentials."""
    interval = f"{interval_seconds}s"
    write = {"url": f"http://{signer}/workspaces/{workspace_id}/api/v1/remote_write"}
    doc = {
        "global": {"scrape_interval": interval, "scrape_timeout": "10s", "external_labels": {"cluster": cluster}},
        "scrape_configs": [_file_job(job, targets_dir, interval) for job in TARGET_JOBS]
        + ([{"job_name": TEAMS_JOB, "static_configs": [{"targets": [teams], "labels": {"role": "head"}}]}] if teams else []),
        "remote_write": [
            write | {"queue_config": {"max_samples_per_send": 1000, "max_shards": 20, "capacity": 2500}},
        ],
    }
    return f"# gpucluster: Prometheus agent of cluster {cluster}, remote-writing to AMP; generated, do not edit\n{to_yaml(doc)}"


def _pod_job(name: str, namespace_regex: str, pod_regex: str, port: int) -> dict[str, Any]:
    """Pods whose namespace and name match, on ``port``; the node's name as ``node``."""
    return {
        "job_name": name,
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_namespace"], "regex": namespace_regex, "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "regex": pod_regex, "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_container_port_number"], "regex": str(port), "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ],
    }


def scraper_config(cluster: str, interval_seconds: int, gpu_operator_namespace: str, kueue_namespace: str) -> str:
    """The AMP managed scraper's configuration (a Prometheus scrape configuration) for the EKS cluster: the GPU
    Operator's dcgm-exporter, the node exporter where one runs, Kueue's controller metrics.

    The GPU Operator runs no node exporter: the ``node`` job keeps only pods named ``*node-exporter*``, so it
    scrapes nothing until one is installed (docs/monitoring-aws.md says so). kube-state-metrics is not installed by
    gpucluster and is not scraped."""
    doc = {
        "global": {"scrape_interval": f"{interval_seconds}s", "external_labels": {"cluster": cluster}},
        "scrape_configs": [
            # honor_labels: dcgm-exporter's pod mapping writes the GPU's workload as pod/namespace/container; the
            # exporter's labels must win over the target's own "pod" (the exporter's pod), or Prometheus renames
            # them exported_pod/... and the idle-allocated rule sees no workload (docs/monitoring.md).
            _pod_job("gpu", gpu_operator_namespace, "nvidia-dcgm-exporter-.*", GPU_EXPORTER_PORT) | {"honor_labels": True},
            _pod_job("node", ".*", ".*node-exporter.*", NODE_EXPORTER_PORT),
            # Kueue serves its metrics over HTTPS with its own certificate (metrics.bindAddress :8443).
            _pod_job("kueue", kueue_namespace, "kueue-controller-manager-.*", KUEUE_METRICS_PORT)
            | {"scheme": "https", "tls_config": {"insecure_skip_verify": True}},
        ],
    }
    return f"# gpucluster: AMP managed scraper of EKS cluster {cluster}; generated, do not edit\n{to_yaml(doc)}"
