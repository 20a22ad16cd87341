"""GpuCluster: the whole cluster from the stack config's fields — network, storage, then node groups.

Built two ways that share one builder: from :class:`GpuClusterArgs` (a program in any Pulumi language,
validated on the stack's own load path) or, by the stack program, from the spec it already loaded.
"""

from collections.abc import Mapping

import pulumi
from pydantic.alias_generators import to_camel

from gpucluster.components._shared.build import adopt, part
from gpucluster.components._shared.config_types import ClusterConfig
from gpucluster.components._shared.edge import Adapted, at_edge
from gpucluster.components._shared.inputs import Inputs, is_output
from gpucluster.components.compute._launch_template import ASG, NodeGroupParts, NodeWiring, build_node_group
from gpucluster.components.compute._launch_template import TOKEN as NODE_GROUP
from gpucluster.components.hybrid._parts import HybridParts, create_hybrid
from gpucluster.components.kubernetes._args import node_group_subnets
from gpucluster.components.kubernetes.eks_cluster import TOKEN as EKS
from gpucluster.components.kubernetes.eks_cluster import EksParts, EksWiring, build_eks_cluster
from gpucluster.components.kubernetes.kubernetes_platform import TOKEN as PLATFORM
from gpucluster.components.kubernetes.kubernetes_platform import PlatformParts, PlatformWiring, build_kubernetes_platform
from gpucluster.components.monitoring._wiring import MonitoringWiring
from gpucluster.components.monitoring.monitoring import TOKEN as MONITORING
from gpucluster.components.monitoring.monitoring import (
    MonitoringParts,
    MonitoringStore,
    build_monitoring,
    build_monitoring_store,
)
from gpucluster.components.network.network import TOKEN as NETWORK
from gpucluster.components.network.network import NetworkWiring, build_network
from gpucluster.components.slurm._args import HeadNetwork, SlurmWiring
from gpucluster.components.slurm._people import People
from gpucluster.components.slurm.slurm_cluster import TOKEN as SLURM
from gpucluster.components.slurm.slurm_cluster import SlurmParts, build_slurm_cluster
from gpucluster.components.storage._setup import HeadNodeAddress, SetupHost
from gpucluster.components.storage.data_bucket import DataBucket, DataBucketArgs
from gpucluster.components.storage.lustre_storage import TOKEN as LUSTRE
from gpucluster.components.storage.lustre_storage import LustreParts, LustreWiring, build_lustre
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.errors import ConfigError, error
from gpucluster.config.naming import cluster_tags
from gpucluster.config.storage import NVME_MOUNT_OPTIONS
from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_args
from gpucluster.render.compute.node import LustreMount, node_cloud_config, user_data_title
from gpucluster.render.compute.user_data import lustre_stand_in, scheduler_part, user_data_findings
from gpucluster.render.core import (
    CloudConfig,
    render_cloud_config,
)
from gpucluster.resolve.cluster import ResolvedCluster, ResolvedSlurm
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup
from gpucluster.resolve.cost.estimate import Estimate
from gpucluster.resolve.kubernetes import ResolvedKubernetes

TOKEN = "gpucluster:index:GpuCluster"


GpuClusterArgs = ClusterConfig
"""Inputs of :class:`GpuCluster`: the whole stack config, one field per ``gpucluster:<key>`` of a stack file
(``name`` and ``region`` included), with the stack's defaults and checks.

The config type itself, not a subclass (``class GpuClusterArgs(ClusterConfig)``): the cluster adds no wiring
field, and Pulumi's schema analyzer reads a field's description only from the class that declares it, so a
subclass would publish every inherited field without one."""


class GpuCluster(pulumi.ComponentResource):
    """A GPU cluster (network, shared storage, node groups, Slurm or EKS) from a stack file's settings."""

    vpc_id: pulumi.Output[str]
    """The id of the cluster's VPC (created, or the one given as ``network.vpcId``)."""
    launch_template_ids: pulumi.Output[dict[str, str]]
    """Launch template id of each node group that no scheduler runs (``scheduler: none``), by group name."""
    slurm_controller: pulumi.Output[str | None]
    """The Slurm controller's address (``slurmctld`` host) when the cluster has a ``slurm`` section; else none."""

    def __init__(self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("GpuCluster"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        adopt(self, build_gpu_cluster(self, name, adapted.resolved))


def from_args(args: GpuClusterArgs) -> Adapted[ResolvedCluster, None]:
    """``args`` loaded, checked and resolved as a stack file is (``load_args``); warnings logged. No wiring: the
    cluster connects its own parts."""
    inputs = Inputs("GpuCluster", str(args.get("region") or "us-east-1"))
    plain = inputs.prepare(args, ClusterConfig)
    if inputs.deferred:
        # The parts get the resolved spec, not the Outputs behind its stand-ins, so a stand-in would
        # reach AWS: the whole cluster takes plain ids (its parts take Outputs themselves).
        raise ConfigError(
            [
                error(p, "is an Output; GpuCluster needs the plain id", "pass the id, or build the cluster from its parts")
                for p in _output_paths(args, "args")
            ],
            source="GpuCluster args",
        )
    loaded = load_args(plain, catalog=load_catalog(), source="GpuCluster args")
    too_large = user_data_findings(loaded.cluster, prefix="args.")
    if too_large:
        raise ConfigError(too_large, source="GpuCluster args")
    for finding in loaded.findings:
        pulumi.log.warn(finding.render())
    return Adapted(loaded.cluster, None)


def build_gpu_cluster(parent: pulumi.ComponentResource, name: str, resolved: ResolvedCluster) -> "ClusterParts":
    """Every resource of the cluster from the ``resolved`` cluster, children of ``parent`` (a ``GpuCluster``, or the
    stack program's part of that type); registers ``parent``'s outputs. The stack program's path: ``spec`` is
    already loaded, checked and resolved (``load_spec``)."""
    parts = ClusterParts(parent, resolved)
    parts._build(name)
    return parts


class ClusterParts:
    """What :func:`build_gpu_cluster` made: each family's parts, the user data and the estimate."""

    vpc_id: pulumi.Output[str]
    launch_template_ids: pulumi.Output[dict[str, str]]
    slurm_controller: pulumi.Output[str | None]

    def __init__(self, parent: pulumi.ComponentResource, resolved: ResolvedCluster) -> None:
        self._parent = parent
        self.spec, self.resolved = resolved.spec, resolved

    def _build(self, name: str) -> None:
        spec, resolved, parent = self.spec, self.resolved, self._parent
        tags = cluster_tags(spec.name, spec.tags)
        child = pulumi.ResourceOptions(parent=parent)
        self.estimate: Estimate = resolved.estimate
        # Render everything that can fail before the first resource is registered (with stand-ins
        # for values only AWS knows, such as the file system's DNS name): cloud-init text per node group.
        self.user_data: dict[str, str] = {
            g.name: render_cloud_config(
                user_data_title(spec.name, g),
                node_cloud_config(spec.name, g, lustre_stand_in(spec)) + scheduler_part(resolved, g),
                gzipped=g.scheduler != "kubernetes",
            )
            for g in resolved.node_groups
        }

        # A hybrid link adds routes to the private route tables: no inline routes there.
        net_wiring = NetworkWiring(spec.name, spec.region, tags, route_resources=spec.hybrid is not None)
        self.network = build_network(part(NETWORK, f"{name}-network", parent), f"{name}-network", spec.network, net_wiring)
        self.security_group_ids = [self.network.efa_security_group_id, self.network.node_security_group_id]
        self.shared_storage: list[SharedStorage] = []  # what nodes mount, in the shape Slurm and Kubernetes share
        self.bucket: DataBucket | None = None
        self.lustre: LustreParts | None = None
        self._head_address: HeadNodeAddress | None = None
        self.storage_setup: SetupHost | None = None  # the file system's admin host where no head node is
        self._create_storage(name, tags, child)
        self.node_groups: dict[str, NodeGroupParts] = {}
        # Groups a scheduler runs (slurm, kubernetes) are built by that scheduler's component; the
        # rest are plain Auto Scaling groups.
        for g in resolved.groups_for("none"):
            self.node_groups[g.name] = build_node_group(
                part(NODE_GROUP, f"{name}-{g.name}", parent),
                f"{name}-{g.name}",
                g,
                NodeWiring(
                    cluster_name=spec.name,
                    subnet_ids=self.subnets_for(g.spec),
                    security_group_ids=self.security_group_ids,
                    user_data=self.node_user_data(g),
                    tags=tags,
                ),
                ASG,
                auto_scaling=True,
            )
        # The metrics store first: the Slurm head node's collector remote-writes to its workspace.
        self._monitoring_store: MonitoringStore | None = None
        if resolved.monitoring is not None:
            store_part = part(MONITORING, f"{name}-monitoring", parent)
            self._monitoring_store = build_monitoring_store(store_part, f"{name}-monitoring", resolved, tags)
        self.slurm: SlurmParts | None = None
        if resolved.slurm is not None:
            self._create_slurm(name, resolved.slurm, tags, child)
        if self._head_address is not None:
            self._head_address.check_resolved()
        self.hybrid: HybridParts | None = None
        if spec.hybrid is not None:
            self.hybrid = create_hybrid(name, spec, self.network, self.slurm, tags, parent)
        self.eks: EksParts | None = None
        self.kubernetes: PlatformParts | None = None
        if resolved.kubernetes is not None:
            self._create_kubernetes(name, resolved.kubernetes, tags, child)
        self.monitoring: MonitoringParts | None = None
        if self._monitoring_store is not None:
            self._create_monitoring(self._monitoring_store, tags)
        self.vpc_id = self.network.vpc_id
        self.launch_template_ids = pulumi.Output.all(*[ng.launch_template_id for ng in self.node_groups.values()]).apply(
            lambda ids: dict(zip(self.node_groups, ids, strict=True))
        )
        self.slurm_controller = pulumi.Output.from_input(self.slurm.controller_address if self.slurm is not None else None)
        parent.register_outputs(
            {"vpcId": self.vpc_id, "launchTemplateIds": self.launch_template_ids, "slurmController": self.slurm_controller}
        )

    def _create_storage(self, name: str, tags: dict[str, str], child: pulumi.ResourceOptions) -> None:
        storage = self.resolved.storage
        if storage is None:
            return
        if storage.spec.bucket is not None:
            self.bucket = DataBucket(
                f"{name}-data",
                DataBucketArgs(
                    **storage.spec.bucket.model_dump(exclude_none=True),
                    cluster_name=self.spec.name,
                    protect=storage.protect,
                    tags=tags,
                ),
                opts=child,
            )
        if storage.lustre is not None:
            fs, admins = storage.lustre.spec, storage.lustre.admins
            subnet_id = storage.lustre.subnet_id or self.network.private_subnet_ids[storage.lustre.zone]
            # Its no-squash clients: the head node (its address comes once SlurmCluster made it) or a setup host.
            self._head_address = HeadNodeAddress() if admins.head_node else None
            wiring = LustreWiring(
                cluster_name=self.spec.name,
                vpc_id=self.network.vpc_id,
                subnet_id=subnet_id,
                client_security_group_id=self.network.efa_security_group_id,
                efa_security_group_id=self.network.efa_security_group_id,
                admin_host_ips=(self._head_address.ip,) if self._head_address else (),
                setup_directories=admins.directories if admins.setup_host else None,
                node_security_group_ids=self.security_group_ids,
                bucket_name=self.bucket.bucket_name if self.bucket else None,
                protect=storage.protect,
                tags=tags,
            )
            self.lustre = build_lustre(part(LUSTRE, f"{name}-lustre", self._parent), f"{name}-lustre", fs, wiring)
            self.shared_storage.append(self.lustre.shared_storage)
            self.storage_setup = self.lustre.setup_host
        if storage.spec.nvme_scratch is not None:
            scratch = storage.spec.nvme_scratch
            self.shared_storage.append(SharedStorage("scratch", "nvme", scratch.mount_point, NVME_MOUNT_OPTIONS))

    def node_user_data(self, group: ResolvedNodeGroup, extra: CloudConfig | None = None) -> pulumi.Output[str]:
        """cloud-init user data for ``group``'s nodes: node facts, NCCL/EFA, storage mounts, then
        ``extra`` (a scheduler's own part). Resolved once the file system's DNS name is known."""
        stand_in = lustre_stand_in(self.spec)

        def render(values: list[str]) -> str:
            mount = None
            if stand_in is not None and values:
                mount = LustreMount(
                    **{**stand_in.__dict__, "dns_name": values[0], "mount_name": values[1], "file_system": values[2]}
                )
            config = node_cloud_config(self.spec.name, group, mount)
            return render_cloud_config(
                user_data_title(self.spec.name, group), config + (extra or CloudConfig()), gzipped=group.scheduler != "kubernetes"
            )

        if self.lustre is None:
            return pulumi.Output.from_input(render([]))
        return pulumi.Output.all(self.lustre.dns_name, self.lustre.mount_name, self.lustre.file_system_id).apply(render)

    def _create_slurm(self, name: str, slurm: ResolvedSlurm, tags: dict[str, str], child: pulumi.ResourceOptions) -> None:
        """The Slurm head node and the ``scheduler: slurm`` groups' launch templates (and Auto Scaling
        groups for static ones); compute user data is the node's own plus the slurmd part."""
        spec, groups = slurm.spec, slurm.node_groups
        head = spec.head_node
        self.slurm = build_slurm_cluster(
            part(SLURM, f"{name}-slurm", self._parent),
            f"{name}-slurm",
            self.resolved,
            SlurmWiring(
                vpc_id=self.network.vpc_id,
                head_subnet_id=head.subnet_id or self.network.private_subnet_ids[slurm.head_zone],
                node_group_subnet_ids={g.name: self.subnets_for(g.spec) for g in groups},
                security_group_ids=self.security_group_ids,
                user_data={g.name: self.node_user_data(g, extra=scheduler_part(self.resolved, g)) for g in groups},
                shared_storage=self.shared_storage,
                tags=tags,
                people=self._people(slurm),
                hybrid=self.spec.hybrid if self.spec.hybrid is not None and self.spec.hybrid.controller is not None else None,
                metrics_workspace_id=self._monitoring_store.workspace.id if self._monitoring_store is not None else None,
                head_network=HeadNetwork(
                    compute_group_id=self.network.efa_security_group_id,
                    egress_group_ids=(self.network.node_security_group_id,),
                    lustre_group_id=self.lustre.security_group_id if self.lustre is not None else None,
                ),
            ),
        )
        if self._head_address is not None:
            self._head_address.resolve(self.slurm.head_private_ip)

    def _people(self, slurm: ResolvedSlurm) -> People:
        """The people part of the Slurm cluster, with the network's subnets where the resolution left a
        new VPC's to pick (empty subnet ids: that VPC's private subnet of each zone)."""
        login, home = slurm.login, slurm.home
        private = self.network.private_subnet_ids
        login_subnets = lb_subnets = None
        if login is not None:
            login_subnets = list(login.subnets) or [private[z] for z in login.zones]
            if login.ssh is not None:
                if not login.ssh.subnets and login.ssh.scheme == "internet-facing":
                    raise ValueError(
                        "an internet-facing SSH load balancer in a new VPC needs its public subnets, which the Network "
                        "does not expose yet: use your own VPC (network.vpcId) with loginNodes.ssh.publicSubnetIds"
                    )
                lb_subnets = list(login.ssh.subnets) or login_subnets
        return People(
            identity=slurm.identity,
            login=login,
            home=home,
            vpc_cidr=self.network.vpc_cidr,
            login_subnet_ids=login_subnets,
            login_lb_subnet_ids=lb_subnets,
            home_subnet_id=(home.subnet or private[home.zone]) if home is not None else None,
            lustre_security_group_id=self.lustre.security_group_id if self.lustre is not None else None,
        )

    def _create_kubernetes(
        self, name: str, resolved: ResolvedKubernetes, tags: dict[str, str], child: pulumi.ResourceOptions
    ) -> None:
        """EKS for the ``scheduler: kubernetes`` groups (``resolved``), then the GPU platform on it through its
        provider."""
        groups = list(self.resolved.groups_for("kubernetes"))
        cluster_subnets: list[pulumi.Input[str]] = [*self.network.private_subnet_ids.values()]
        security_groups: list[pulumi.Input[str]] = [*self.security_group_ids]
        inputs = Inputs("EksCluster", self.spec.region)
        wiring = EksWiring(
            region=self.spec.region,
            cluster_subnet_ids=cluster_subnets,
            node_group_subnet_ids=node_group_subnets(resolved, inputs, {g.name: self.subnets_for(g.spec) for g in groups}),
            security_group_ids=security_groups,
            user_data={g.name: self.node_user_data(g) for g in groups},
            protect_data=self.resolved.protect_data,
            tags=tags,
            inputs=inputs,
            hybrid=self.spec.hybrid,
        )
        eks = part(EKS, f"{name}-eks", self._parent)
        self.eks = build_eks_cluster(eks, f"{name}-eks", resolved, wiring)
        platform = part(PLATFORM, f"{name}-k8s", self._parent, pulumi.ResourceOptions(provider=self.eks.provider))
        self.kubernetes = build_kubernetes_platform(
            platform, f"{name}-k8s", resolved, PlatformWiring(shared_storage=tuple(self.shared_storage), hybrid=self.spec.hybrid)
        )

    def _create_monitoring(self, store: MonitoringStore, tags: dict[str, str]) -> None:
        """Metrics, alerts and logs, after the schedulers: the Slurm nodes' roles get their rights, EKS gets
        a scraper."""
        slurm, eks = self.slurm, self.eks
        private = [*self.network.private_subnet_ids.values()]
        wiring = MonitoringWiring(
            tags=tags,
            head_role_id=slurm._head_role_id if slurm is not None else None,
            node_role_id=slurm._node_role_id if slurm is not None else None,
            login_role_id=slurm._login_role_id if slurm is not None else None,
            vpc_id=self.network.vpc_id,
            vpc_cidr=self.network.vpc_cidr,
            private_subnet_ids=private,
            lustre_file_system_id=self.lustre.file_system_id if self.lustre is not None else None,
        )
        if eks is not None:
            wiring.eks_cluster_arn, wiring.eks_cluster_name = eks.cluster_arn, eks.cluster_name
            wiring.eks_subnet_ids = private
            wiring.eks_security_group_ids = [self.network.efa_security_group_id, eks.cluster_security_group_id]
            wiring.kubernetes_provider = eks.provider
        self.monitoring = build_monitoring(store, self.resolved, wiring)

    def subnets_for(self, group: NodeGroupSpec) -> list[pulumi.Input[str]]:
        """The subnets a node group launches in: its own (BYO VPC) or the private subnet of each zone."""
        if group.subnet_ids:
            return list(group.subnet_ids)
        return [self.network.private_subnet_ids[z] for z in group.availability_zones]


def _output_paths(value: object, path: str) -> list[str]:
    """The camelCase paths under ``path`` whose value is an Output (or another awaitable)."""
    if is_output(value):
        return [path]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _output_paths(v, f"{path}.{to_camel(str(k))}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _output_paths(v, f"{path}[{i}]")]
    return []
