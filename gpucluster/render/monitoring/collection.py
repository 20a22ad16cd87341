"""What collects the metrics into AMP: Prometheus in agent mode on the Slurm head node, and the AMP managed
scraper's configuration on EKS.

Ports (the exporters' own, docs/monitoring.md ``## Metrics``): gpucluster's NVML exporter and NVIDIA's dcgm-exporter
on 9400, the node exporter on 9100; the head node's exporter of Slurm's and the agent's figures on 9400 too. Every
exporter listens on its node's private address only (never localhost nor 0.0.0.0).

Slurm's collector discovers the nodes with ``ec2_sd_configs``: the GPU nodes by tag ``gpucluster:cluster`` = the
cluster and a ``gpucluster:node-group`` tag, the head node by ``gpucluster:role`` = head, running instances only
(dynamic nodes come and go, and discovery follows them with no restart). The head node's series carry
``role="head"`` (the alert rules select the head node by it), the others ``role="compute"``. Every series carries
``cluster``; a GPU node's carry ``node_group`` and ``node`` (its Slurm name).
"""

from __future__ import annotations

from typing import Any

from gpucluster.render.core import to_yaml
from gpucluster_agents.contract import TAG_CLUSTER, TAG_NODE_GROUP, TAG_NODE_NAME, TAG_ROLE

GPU_EXPORTER_PORT = 9400
NODE_EXPORTER_PORT = 9100
HEAD_EXPORTER_PORT = 9400
KUEUE_METRICS_PORT = 8443
EXPORTER_PORTS = (GPU_EXPORTER_PORT, NODE_EXPORTER_PORT)
"""The ports the head node's collector may open on the GPU nodes (and nothing else new)."""

PROMETHEUS_CONFIG_PATH = "/etc/gpucluster/collector/prometheus.yml"
"""Not /etc/prometheus/prometheus.yml: Debian's prometheus.service would read that one as a full server."""
AGENT_WAL_PATH = "/var/lib/prometheus/agent"


def _tag_label(tag: str) -> str:
    """The ``__meta_ec2_tag_*`` label Prometheus gives an EC2 tag (characters outside ``[a-zA-Z0-9_]`` → ``_``)."""
    return "__meta_ec2_tag_" + "".join(c if c.isalnum() or c == "_" else "_" for c in tag)


def remote_write_url(region: str, workspace_id: str) -> str:
    """AMP's remote-write endpoint of a workspace (``prometheusEndpoint`` + ``api/v1/remote_write``)."""
    return f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{workspace_id}/api/v1/remote_write"


def _ec2_job(name: str, ports: tuple[int, ...], cluster: str, region: str, interval: str, *, head: bool) -> dict[str, Any]:
    """A job of the cluster's running instances on ``ports``: the head node (``head``) or the GPU nodes."""
    which = {"name": f"tag:{TAG_ROLE}", "values": ["head"]} if head else {"name": "tag-key", "values": [TAG_NODE_GROUP]}
    filters = [{"name": f"tag:{TAG_CLUSTER}", "values": [cluster]}, which, {"name": "instance-state-name", "values": ["running"]}]
    # The target's address is its private IP and the discovery's port (ec2_sd_config's default).
    relabel: list[dict[str, Any]] = [
        {"source_labels": ["__meta_ec2_instance_id"], "target_label": "instance_id"},
        {"target_label": "role", "replacement": "head" if head else "compute"},
    ]
    if not head:
        relabel[1:1] = [
            {"source_labels": [_tag_label(TAG_NODE_GROUP)], "target_label": "node_group"},
            {"source_labels": [_tag_label(TAG_NODE_NAME)], "target_label": "node"},
        ]
    return {
        "job_name": name,
        "scrape_interval": interval,
        "ec2_sd_configs": [{"region": region, "port": port, "refresh_interval": "60s", "filters": filters} for port in ports],
        "relabel_configs": relabel,
    }


def prometheus_agent_config(
    cluster: str, region: str, workspace_id: str, interval_seconds: int, *, signer: str | None = None
) -> str:
    """The head node's ``prometheus.yml`` (Prometheus ``--enable-feature=agent``): the GPU nodes found by tag, the
    head node's own exporters, remote-written to the AMP workspace with SigV4 (the instance role's credentials).

    ``signer`` (``host:port``): write in plain HTTP to gpucluster's signer there, which signs and forwards to AMP
    (``gpucluster_agents/metrics/signer.py``: Debian's Prometheus sends its own ``sigv4:`` writes unsigned);
    none: Prometheus signs itself (``sigv4:``), for a Prometheus built with it."""
    interval = f"{interval_seconds}s"
    write: dict[str, Any] = {"url": remote_write_url(region, workspace_id), "sigv4": {"region": region}}
    if signer is not None:
        write = {"url": f"http://{signer}/workspaces/{workspace_id}/api/v1/remote_write"}
    doc = {
        "global": {"scrape_interval": interval, "scrape_timeout": "10s", "external_labels": {"cluster": cluster}},
        "scrape_configs": [
            _ec2_job("gpu", (GPU_EXPORTER_PORT,), cluster, region, interval, head=False),
            _ec2_job("node", (NODE_EXPORTER_PORT,), cluster, region, interval, head=False),
            _ec2_job("head", (HEAD_EXPORTER_PORT, NODE_EXPORTER_PORT), cluster, region, interval, head=True),
        ],
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
    scrapes nothing until one is installed (docs/monitoring.md says so). kube-state-metrics is not installed by
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
