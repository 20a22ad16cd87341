"""The EKS nodes' Fluent Bit (gpucluster/render/kubernetes/logs.py): the config it runs, parsed section by section as
Fluent Bit's classic format reads it; the pod the chart builds from the values, validated strictly; and the IAM policy
of its role, evaluated: an EKS node writes its own streams only, and no Slurm role writes an EKS node's."""

from __future__ import annotations

import re
from typing import Any

from gpucluster.policy.iam_eval import Request, evaluate
from gpucluster.render.kubernetes.logs import (
    EKS_STREAM_PATTERNS,
    FLUENT_BIT_SERVICE_ACCOUNT,
    NODE_NAME_ENV,
    fluent_bit_inputs,
    fluent_bit_outputs,
    fluent_bit_values,
)
from gpucluster.render.monitoring.logs import logs_config, stream_patterns
from gpucluster.render.monitoring.policies import log_shipping_policy
from gpucluster_agents.logship.shipper import stream_name
from tests.render.kubernetes.schemas import validate_object

GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/gpucluster/c"
NODE = "ip-10-0-12-34.ec2.internal"  # an EKS node's name: a DNS subdomain, never a "/"


def parse_classic(text: str) -> list[tuple[str, dict[str, str]]]:
    """Fluent Bit's classic config: ``[SECTION]`` headers, then indented ``Key value`` lines (keys case-insensitive,
    the value the rest of the line). Anything else fails the test: a stray line is a config Fluent Bit refuses."""
    sections: list[tuple[str, dict[str, str]]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        header = re.fullmatch(r"\[([A-Z]+)\]", line)
        if header:
            sections.append((header.group(1), {}))
            continue
        entry = re.fullmatch(r"    (\S+)\s+(\S.*)", line)
        assert entry and sections, f"not a classic-config line: {line!r}"
        key = entry.group(1).lower()
        assert key not in sections[-1][1], f"{key} twice in one section"
        sections[-1][1][key] = entry.group(2).rstrip()
    return sections


def _put(policy: dict[str, Any], stream: str) -> bool:
    return evaluate([policy], Request("logs:PutLogEvents", f"{GROUP}:log-stream:{stream}")).allowed


def test_fluent_bit_reads_the_journal_units_and_the_containers_and_writes_the_cluster_group_only():
    """Inputs: the journal's kubelet and containerd units (AL2023 writes them nowhere else) and every container's log
    under /var/log/containers; outputs: cloudwatch_logs into /gpucluster/<cluster> as ``<node>/<log>``, never creating
    the group (the stack's, with its key and retention). Each input's tag is matched by exactly one output."""
    inputs = parse_classic(fluent_bit_inputs())
    outputs = parse_classic(fluent_bit_outputs("c", "eu-west-1"))
    assert {kind for kind, _ in inputs} == {"INPUT"} and {kind for kind, _ in outputs} == {"OUTPUT"}
    journal = {s["systemd_filter"]: s for _, s in inputs if s["name"] == "systemd"}
    assert set(journal) == {"_SYSTEMD_UNIT=kubelet.service", "_SYSTEMD_UNIT=containerd.service"}
    assert {s["path"] for s in journal.values()} == {"/var/log/journal"}
    (tail,) = [s for _, s in inputs if s["name"] == "tail"]
    assert tail["path"] == "/var/log/containers/*.log" and tail["multiline.parser"] == "cri" and tail["path_key"] == "file"
    dbs = [s["db"] for _, s in inputs]
    assert len(set(dbs)) == len(inputs) and all(db.startswith("/var/log/") for db in dbs), "an offsets file each, on the node"
    streams = {}
    for _, out in outputs:
        assert out["name"] == "cloudwatch_logs" and out["region"] == "eu-west-1"
        assert out["log_group_name"] == "/gpucluster/c" and out["auto_create_group"] == "false"
        assert not {"log_group_template", "log_stream_prefix", "log_retention_days", "role_arn"} & set(out)
        matched = [s for _, s in inputs if s["tag"] == out["match"]]
        assert len(matched) == 1, out["match"]
        streams[out["log_stream_name"]] = matched[0]
    assert set(streams) == {f"${{{NODE_NAME_ENV}}}/{n}" for n in ("kubelet", "containerd", "containers")}
    assert streams["${NODE_NAME}/kubelet"]["systemd_filter"] == "_SYSTEMD_UNIT=kubelet.service"
    assert streams["${NODE_NAME}/containers"] is tail


def test_the_chart_runs_our_pipeline_on_every_cloud_node_and_no_site_node():
    """The chart's own input, Kubernetes filter and output (which would create the group) are off; the DaemonSet's
    pod, as the chart's template places these values, is a valid pod: the node name in its environment, every taint
    tolerated (GPU nodes), EKS Hybrid Nodes' site nodes excluded, no privilege escalation and no capability."""
    values = fluent_bit_values("c", "us-east-1")
    assert values["input"] == values["filter"] == values["cloudWatchLogs"] == {"enabled": False}
    assert values["additionalInputs"] == fluent_bit_inputs()
    assert values["additionalOutputs"] == fluent_bit_outputs("c", "us-east-1")
    assert values["serviceAccount"] == {"create": True, "name": FLUENT_BIT_SERVICE_ACCOUNT}
    pod = {
        "serviceAccountName": FLUENT_BIT_SERVICE_ACCOUNT,
        "priorityClassName": values["priorityClassName"],
        "containers": [
            {
                "name": "aws-for-fluent-bit",
                "image": "public.ecr.aws/aws-observability/aws-for-fluent-bit:3.2.1",
                "securityContext": values["containerSecurityContext"],
                "env": values["env"],
                "volumeMounts": [{"name": "fluentbit-config", "mountPath": "/fluent-bit/etc/"}, *values["volumeMounts"]],
            }
        ],
        "volumes": [{"name": "fluentbit-config", "configMap": {"name": "fluent-bit"}}, *values["volumes"]],
        "tolerations": values["tolerations"],
        "affinity": values["affinity"],
    }
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": values["fullnameOverride"], "namespace": "gpucluster-logs"},
        "spec": {
            "selector": {"matchLabels": {"app": "fluent-bit"}},
            "template": {"metadata": {"labels": {"app": "fluent-bit"}}, "spec": pod},
        },
    }
    assert validate_object(daemonset) == "built-in"
    assert values["env"] == [{"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert values["tolerations"] == [{"operator": "Exists"}]
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["hybrid"]}]}]
    security = values["containerSecurityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}


def test_an_eks_node_writes_its_own_streams_and_no_slurm_nodes():
    """The Fluent Bit role (the Slurm shippers' policy shape with the EKS patterns) may write the three streams a node
    makes, and none of the head, compute or login streams; no Slurm role may write an EKS node's streams. What IAM
    cannot tell: which node writes (any node's Fluent Bit may write another node's ``<node>/kubelet``: the role is
    one for the DaemonSet), nor a Slurm node's ``x/gpucluster-setup/kubelet`` (its setup-log glob) from an EKS
    stream; EKS node names hold no ``/``, so no real EKS stream has that shape."""
    eks = log_shipping_policy(GROUP, EKS_STREAM_PATTERNS)
    made = [f"{NODE}/{name}" for name in ("kubelet", "containerd", "containers")]
    assert all(_put(eks, s) for s in made)
    assert _put(eks, "ip-10-0-99-1.ec2.internal/kubelet"), "IAM cannot tie a stream to its node"
    slurm = {role: log_shipping_policy(GROUP, stream_patterns(role)) for role in ("head", "compute", "login")}
    for role, policy in slurm.items():
        for stream in made:
            assert not _put(policy, stream), (role, stream)
        for spec in logs_config("c", "us-east-1", role).files:  # every stream the Slurm shipper makes for the role
            path = spec.path.replace("*", "boot") if spec.is_glob else spec.path
            assert not _put(eks, stream_name("i-0abc000000000000", spec, path)), (role, spec.name)
    assert not _put(eks, f"{NODE}/kubeletx") and not _put(eks, f"{NODE}/containers/x")
    assert _put(slurm["compute"], "i-0abc000000000000/gpucluster-setup/kubelet"), "the limit the docstring names"
    policy = eks["Statement"]
    actions = {a for st in policy for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}
    assert actions == {"logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"}
