"""The example training job the plan shows and the platform ships in a ConfigMap: a JobSet running
``torchrun`` on whole nodes of a GPU node group, with every GPU and EFA interface, the NCCL/EFA
environment and the team's shared file system, queued through Kueue and placed by topology-aware
scheduling. Rendered through a template so the YAML carries comments for the reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucluster.config.kubernetes.team_posix import TeamPosix
from gpucluster.render.core import render
from gpucluster.render.kubernetes import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    GPU_TOLERATION,
    JOBSET_API,
    LABEL_NODE_GROUP,
    PREFERRED_TOPOLOGY,
    QUEUE_LABEL,
)
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup


@dataclass(frozen=True)
class SharedClaim:
    """A team's PersistentVolumeClaim of a shared file system, and where the job mounts it."""

    claim: str
    mount_point: str


def training_job(
    *,
    name: str,
    namespace: str,
    queue: str,
    group: ResolvedNodeGroup,
    nodes: int,
    image: str,
    preferred_topology: str | None,
    claim: SharedClaim | None,
    posix: TeamPosix,
) -> str:
    """A JobSet (jobset.x-k8s.io/v1alpha2) running ``torchrun`` on ``nodes`` whole nodes of ``group``:
    every GPU and EFA interface of each node (counted from the instance's own network cards), the
    NCCL/EFA environment, the shared file system, queued through Kueue and placed by TAS.

    It passes Pod Security ``restricted`` and the team's admission policy: it runs as the team's first
    user ID and its group (``posix``), not root; no privilege escalation, every capability dropped, the
    runtime's default seccomp profile. GPUs and EFA interfaces are device-plugin resources, which
    ``restricted`` allows; EFA memory registration needs a large locked-memory limit, not a capability
    (docs/kubernetes.md, "Exceptions, and why"). ``HOME`` points at ``/tmp``: the user has no home in the image."""
    facts = group.facts
    pod_spec = trainer_pod(name=name, group=group, nodes=nodes, image=image, claim=claim, posix=posix)
    pod: dict[str, Any] = {"spec": pod_spec}
    if preferred_topology:
        pod = {"metadata": {"annotations": {PREFERRED_TOPOLOGY: preferred_topology}}, **pod}
    job = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "failurePolicy": {"maxRestarts": 3},
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": nodes,
                            "completions": nodes,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": pod,
                        }
                    },
                }
            ],
        },
    }
    # Every value goes through the YAML emitter (to_yaml), none is pasted into YAML text.
    return render(
        "kubernetes/training-job.yaml.j2",
        job=job,
        namespace=namespace,
        nodes=nodes,
        instance_type=facts.instance_type,
        efa_interfaces=group.efa_interfaces,
        posix=posix,
    )


def trainer_limits(group: ResolvedNodeGroup) -> dict[str, int | str]:
    """A trainer's requests and limits: three quarters of the node's CPUs and memory, every GPU and EFA device."""
    facts = group.facts
    limits: dict[str, int | str] = {
        "cpu": facts.vcpus * 3 // 4,
        "memory": f"{facts.memory_mib * 3 // 4 // 1024}Gi",
        GPU_RESOURCE: facts.gpu_count,
    }
    if group.efa_interfaces:
        limits[EFA_RESOURCE] = group.efa_interfaces
    return limits


def trainer_pod(
    *, name: str, group: ResolvedNodeGroup, nodes: int, image: str, claim: SharedClaim | None, posix: TeamPosix
) -> dict[str, Any]:
    """The pod spec of one worker: ``torchrun`` on every GPU of a node of ``group``, as the team's user."""
    gpus = group.facts.gpu_count
    limits = trainer_limits(group)
    script = f"{claim.mount_point}/train.py" if claim else "/workspace/train.py"
    rendezvous = f"{name}-workers-0-0.{name}"
    torchrun = (
        f"torchrun --nnodes={nodes} --nproc-per-node={gpus} --node-rank=${{JOB_COMPLETION_INDEX}} "
        f"--master-addr={rendezvous} --master-port=29500 {script}"
    )
    env = [{"name": k, "value": v} for k, v in group.nccl_env.items()]
    env.append({"name": "HOME", "value": "/tmp"})
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if claim:
        mounts.insert(0, {"name": "shared", "mountPath": claim.mount_point})
        volumes.insert(0, {"name": "shared", "persistentVolumeClaim": {"claimName": claim.claim}})
    return {
        "restartPolicy": "Never",
        # Training talks to no Kubernetes API: no token in the pod.
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": posix.uid_first,
            "runAsGroup": posix.gid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": {LABEL_NODE_GROUP: group.name},
        "tolerations": [dict(GPU_TOLERATION)] if gpus else [],
        "containers": [
            {
                "name": "trainer",
                "image": image,
                # A tag moved between two pods' starts would give one job two images; Always makes every
                # node resolve the tag (a cached copy is reused when the digest has not changed).
                "imagePullPolicy": "Always",
                "command": ["bash", "-c", torchrun],
                "env": env,
                "resources": {"requests": dict(limits), "limits": dict(limits)},
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }
