"""TeamNamespace: one team's namespace, its RBAC, its claims on the shared file systems and the example
training job. Takes its Kubernetes provider through ``opts``.

The Role lets the team's groups and users run jobs (Job, JobSet, PyTorchJob), read their pods, logs
and queues; it grants nothing on Secrets, RBAC or the namespace itself. Each shared Lustre file system
becomes a static PersistentVolume (FSx CSI driver, ``fsx.csi.aws.com``) bound to a claim of the same
name as the file system in the namespace. The volume mounts the team's own directory ``/teams/<team>`` (a Lustre
subdirectory mount), never the file system's root, ``nosuid,nodev``: the directory belongs to the team's UID and GID
(:mod:`gpucluster.resolve.storage.team`; GpuCluster's storage setup host creates it, a program that brings its own
file system creates it itself), and each team's volume has its own handle and path.

The namespace enforces Pod Security ``restricted`` and its NetworkPolicies deny all traffic but the
team's own pods, cluster DNS and the internet outside the cluster's networks
(:mod:`gpucluster.render.kubernetes.tenancy`); the cluster's admission policy, which holds the team's pods
to its user IDs and claims, is :class:`~gpucluster.components.kubernetes.kubernetes_platform.KubernetesPlatform`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.components.kubernetes._objects import place_objects
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.kubernetes import TeamSpec
from gpucluster.config.storage.mounts import client_mount_options
from gpucluster.render.kubernetes import TEAM_LABEL
from gpucluster.render.kubernetes.objects import TEAM_ROLE_RULES
from gpucluster.render.kubernetes.tenancy import pod_security_labels, team_network_policies
from gpucluster.resolve.storage.team import team_directory

TOKEN = "gpucluster:index:TeamNamespace"
FSX_CSI_DRIVER = "fsx.csi.aws.com"
EXAMPLES_CONFIG_MAP = "gpucluster-examples"
EXAMPLE_JOB_KEY = "training-job.yaml"
# FSx for Lustre's smallest file system, for a claim on one whose size is unknown.
DEFAULT_LUSTRE_GIB = 1200


@dataclass
class TeamNamespaceArgs:
    """Inputs of :class:`TeamNamespace`."""

    team: TeamSpec
    """The team: name, namespace, groups and users. Required."""

    shared_storage: Sequence[SharedStorage] = ()
    """The cluster's file systems; the Lustre ones get a PersistentVolume and claim when the team
    mounts shared storage. Default: none."""

    example_job: str | None = None
    """The rendered example training job, shipped in the ``gpucluster-examples`` ConfigMap. Default: none."""

    labels: dict[str, str] = field(default_factory=dict)
    """Labels on every object (e.g. the cluster's). Default: none."""

    pod_security_version: str = "latest"
    """The Pod Security standards' version the namespace is held to (``v1.33``: the cluster's Kubernetes
    version, so an upgrade does not change the rules under running teams). Default ``latest``."""

    cluster_networks: Sequence[str] = ()
    """Networks of the cluster beyond the private ranges (the VPC CIDR, a site's networks) that the team's
    pods may not reach but in their own namespace. Default: the private ranges only."""


def claim_name(storage: SharedStorage) -> str:
    """The claim of a shared file system in a team's namespace: the file system's own short name."""
    return storage.name


class TeamNamespace(pulumi.ComponentResource):
    """A team's namespace with RBAC, shared-storage claims and the example job."""

    namespace: pulumi.Output[str]
    """The namespace's name, once it exists (use it to order objects created in it)."""
    claims: dict[str, str]
    """Claim name per shared file system name."""

    def __init__(self, name: str, args: TeamNamespaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        team = args.team
        ns_name = team.effective_namespace
        labels = {**args.labels, TEAM_LABEL: team.name}
        child = pulumi.ResourceOptions(parent=self)
        ns_labels = {**labels, **pod_security_labels("restricted", args.pod_security_version)}
        ns = k8s.core.v1.Namespace(f"{name}-ns", metadata=k8s.meta.v1.ObjectMetaArgs(name=ns_name, labels=ns_labels), opts=child)
        self.namespace = ns.metadata.apply(lambda m: m.name or ns_name)

        def meta(obj_name: str) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(name=obj_name, namespace=self.namespace, labels=labels)

        role = k8s.rbac.v1.Role(
            f"{name}-role",
            metadata=meta("gpucluster-team"),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(api_groups=r["apiGroups"], resources=r["resources"], verbs=r["verbs"])
                for r in TEAM_ROLE_RULES
            ],
            opts=child,
        )
        subjects = [k8s.rbac.v1.SubjectArgs(kind="Group", name=g, api_group="rbac.authorization.k8s.io") for g in team.groups] + [
            k8s.rbac.v1.SubjectArgs(kind="User", name=u, api_group="rbac.authorization.k8s.io") for u in team.users
        ]
        if subjects:
            k8s.rbac.v1.RoleBinding(
                f"{name}-members",
                metadata=meta("gpucluster-team-members"),
                role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name="gpucluster-team"),
                subjects=subjects,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[role]),
            )

        # The namespace's NetworkPolicies are its children: they go with it.
        place_objects(f"{name}-net", team_network_policies(ns_name, labels, args.cluster_networks), ns, depends_on=[ns])

        self.claims = {}
        if team.mount_shared_storage:
            for storage in args.shared_storage:
                if storage.fs_type == "lustre":
                    self._lustre_claim(name, ns_name, team.name, storage, labels)

        if args.example_job is not None:
            k8s.core.v1.ConfigMap(
                f"{name}-examples",
                metadata=meta(EXAMPLES_CONFIG_MAP),
                data={EXAMPLE_JOB_KEY: args.example_job},
                opts=child,
            )
        self.register_outputs({"namespace": self.namespace, "claims": self.claims})

    def _lustre_claim(self, name: str, ns_name: str, team: str, storage: SharedStorage, labels: dict[str, str]) -> None:
        """A static PersistentVolume of the team's directory on the FSx for Lustre file system, pre-bound to the
        team's claim. The driver mounts ``<dnsname>@tcp:/<mountname>`` (aws-fsx-csi-driver v1.9.0,
        ``pkg/driver/node.go``), so a mount name of ``<mount name>/teams/<team>`` is a Lustre subdirectory mount
        (FSx user guide, "Mounting specific filesets"). The handle names the directory too: kubelet tells volumes
        apart by driver and handle, and no two teams' volumes may share one."""
        claim = claim_name(storage)
        size = f"{storage.capacity_gib or DEFAULT_LUSTRE_GIB}Gi"
        pv_name = f"{ns_name}-{storage.name}"
        directory = team_directory(team)
        options = client_mount_options(storage.mount_options).split(",")
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-{storage.name}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=pv_name, labels=labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": size},
                volume_mode="Filesystem",
                access_modes=["ReadWriteMany"],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                mount_options=options or None,
                claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=ns_name, name=claim),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=FSX_CSI_DRIVER,
                    volume_handle=pulumi.Output.from_input(storage.file_system_id or storage.name).apply(
                        lambda fs: f"{fs}{directory}"
                    ),
                    volume_attributes={
                        "dnsname": storage.server or "",
                        "mountname": pulumi.Output.from_input(storage.mount_name or "").apply(lambda m: f"{m}{directory}"),
                    },
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-{storage.name}-pvc",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=claim, namespace=self.namespace, labels=labels),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=pv.metadata.apply(lambda m: m.name or pv_name),
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": size}),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.claims[storage.name] = claim
