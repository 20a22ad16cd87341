"""EKS nodes' logs into the cluster's log group (docs/logs.md): the values of the pinned
``aws-for-fluent-bit`` chart (:data:`gpucluster.config.kubernetes.FLUENT_BIT_CHART`), whose Fluent Bit runs on every
cloud node as a DaemonSet.

What it ships, each into a stream ``<node>/<log>`` of ``/gpucluster/<cluster>`` (``<node>`` is the Kubernetes node
name, from the pod's ``spec.nodeName``): ``kubelet`` and ``containerd`` from the journal (AL2023 nodes write them
there only), and ``containers``, every container's output from ``/var/log/containers`` (one stream a node; each event
is the CRI record with the file it came from, which names the pod, namespace and container). The chart's own input,
Kubernetes filter and output are off: its output would create the group (``auto_create_group``) and name streams by
tag. Ours never creates a group (the stack makes it, with its key and retention), and the stream names are the
three that :data:`EKS_STREAM_PATTERNS` lets the Fluent Bit role write.

Site nodes of EKS Hybrid Nodes are left out (``eks.amazonaws.com/compute-type`` ``hybrid``): their logs stay on the
site, as the on-prem Slurm controller's do.
"""

from __future__ import annotations

from typing import Any

from gpucluster.render.monitoring.logs import log_group_name

FLUENT_BIT_NAMESPACE = "gpucluster-logs"
FLUENT_BIT_SERVICE_ACCOUNT = "fluent-bit"
FLUENT_BIT_RELEASE = "fluent-bit"
NODE_NAME_ENV = "NODE_NAME"
HYBRID_COMPUTE_TYPE = ("eks.amazonaws.com/compute-type", "hybrid")

JOURNAL_UNITS = {"kubelet": "kubelet.service", "containerd": "containerd.service"}
"""The journald units an EKS node runs (stream name → unit)."""
CONTAINERS_STREAM = "containers"
CONTAINERS_PATH = "/var/log/containers/*.log"
JOURNAL_PATH = "/var/log/journal"
STATE_DIR = "/var/log"  # the offsets (Fluent Bit's DB files) live on the node, so a restarted pod resumes
EKS_STREAM_PATTERNS = tuple(f"*/{name}" for name in (*JOURNAL_UNITS, CONTAINERS_STREAM))
"""The stream names an EKS node's Fluent Bit writes, as IAM resource patterns (``<node>/<log>``)."""


def _section(kind: str, entries: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in entries) + 1
    return f"[{kind}]\n" + "".join(f"    {k.ljust(width)}{v}\n" for k, v in entries)


def fluent_bit_inputs() -> str:
    """The ``[INPUT]`` sections: one ``systemd`` input per journal unit (tag ``node.<name>``), and a ``tail`` of the
    containers' logs (tag ``node.containers``), each with its own offsets file."""
    sections = [
        _section(
            "INPUT",
            [
                ("Name", "systemd"),
                ("Tag", f"node.{name}"),
                ("Path", JOURNAL_PATH),
                ("Systemd_Filter", f"_SYSTEMD_UNIT={unit}"),
                ("DB", f"{STATE_DIR}/gpucluster-fluent-bit-{name}.db"),
                ("Strip_Underscores", "On"),
            ],
        )
        for name, unit in JOURNAL_UNITS.items()
    ]
    sections.append(
        _section(
            "INPUT",
            [
                ("Name", "tail"),
                ("Tag", f"node.{CONTAINERS_STREAM}"),
                ("Path", CONTAINERS_PATH),
                ("Path_Key", "file"),
                ("multiline.parser", "cri"),
                ("DB", f"{STATE_DIR}/gpucluster-fluent-bit-{CONTAINERS_STREAM}.db"),
                ("Mem_Buf_Limit", "16MB"),
                ("Skip_Long_Lines", "On"),
                ("Refresh_Interval", "10"),
            ],
        )
    )
    return "".join(sections)


def fluent_bit_outputs(cluster: str, region: str) -> str:
    """The ``[OUTPUT]`` sections: one ``cloudwatch_logs`` output per stream, into ``/gpucluster/<cluster>``, never
    creating the group. A journal event is its ``MESSAGE`` only (a line, as the Slurm nodes' shipper sends)."""
    sections = []
    for name in (*JOURNAL_UNITS, CONTAINERS_STREAM):
        entries = [
            ("Name", "cloudwatch_logs"),
            ("Match", f"node.{name}"),
            ("region", region),
            ("log_group_name", log_group_name(cluster)),
            ("log_stream_name", f"${{{NODE_NAME_ENV}}}/{name}"),
            ("auto_create_group", "false"),
        ]
        if name in JOURNAL_UNITS:
            entries.append(("log_key", "MESSAGE"))
        sections.append(_section("OUTPUT", entries))
    return "".join(sections)


def fluent_bit_values(cluster: str, region: str) -> dict[str, Any]:
    """The chart's values: our inputs and outputs in place of the chart's, the node name in the environment, on
    every cloud node whatever its taints (GPU nodes, the boot taint), never a site node; no privilege escalation,
    no capabilities (root reads the root-owned logs as their owner)."""
    key, hybrid = HYBRID_COMPUTE_TYPE
    not_hybrid = {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [hybrid]}]}
    return {
        "fullnameOverride": FLUENT_BIT_RELEASE,
        "serviceAccount": {"create": True, "name": FLUENT_BIT_SERVICE_ACCOUNT},
        "input": {"enabled": False},
        "filter": {"enabled": False},
        "cloudWatchLogs": {"enabled": False},
        "additionalInputs": fluent_bit_inputs(),
        "additionalOutputs": fluent_bit_outputs(cluster, region),
        "env": [{"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "tolerations": [{"operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [not_hybrid]}}},
        "priorityClassName": "system-node-critical",
        "volumes": [{"name": "varlog", "hostPath": {"path": "/var/log"}}],
        "volumeMounts": [{"name": "varlog", "mountPath": "/var/log"}],
        "containerSecurityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
