"""The Slurm files of a site's bundle, rendered for the site controller's Slurm version: ``cloud.conf`` (the cloud
node groups as ``State=CLOUD`` nodes and their partitions, each with its own ``SuspendTime``/``ResumeTimeout``),
``cloud_gres.conf``, the cloud switch tree for topology.conf, and ``slurm.conf.site`` (the keys the site's own
slurm.conf must carry: comma-list keys such as ``SlurmctldParameters`` belong to the site and are merged by hand,
never overridden from an ``Include``).

Node, partition and GRES lines come from :mod:`gpucluster.render.slurm.conf` (the resolved node groups' facts), and the
version-dependent keys from :mod:`gpucluster.render.slurm.versions`, so a cloud node of a site is described
exactly like a cloud node of a gpucluster head node."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.hybrid import ControllerSpec, HybridSpec
from gpucluster.render.core import render
from gpucluster.render.hybrid.fabric import HYBRID_TASK_PROLOG
from gpucluster.render.slurm.conf import gres_line, gres_name, node_line, partition_line
from gpucluster.render.slurm.names import PROGRAMS, SlurmContext
from gpucluster.render.slurm.versions import version_lines
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster.resolve.compute.node_group import SlurmGroup
from gpucluster_agents.contract import hostrange


class BundleError(ValueError):
    """The stack cannot make a site bundle (the message names the config key and the fix)."""


@dataclass(frozen=True)
class Site:
    """What every file of the bundle is rendered from: the cluster (its burst groups only, for the site
    controller's Slurm version) and the hybrid section."""

    cluster: ResolvedCluster
    ctx: SlurmContext
    hybrid: HybridSpec
    controller: ControllerSpec

    @property
    def bin_dir(self) -> str:
        return f"{self.controller.install_dir}/bin"

    @property
    def etc_dir(self) -> str:
        return f"{self.controller.install_dir}/etc"

    @property
    def spec(self) -> ClusterSpec:
        return self.cluster.spec

    @property
    def groups(self) -> tuple[SlurmGroup, ...]:
        """The burst node groups, resolved, config order."""
        return self.ctx.node_groups


def site_of(cluster: ResolvedCluster) -> Site:
    """The bundle's view of a stack; refuses one that has no site controller, with the fix."""
    spec = cluster.spec
    hybrid = spec.hybrid
    if hybrid is None or hybrid.controller is None:
        raise BundleError(
            f"stack {spec.name!r} has no gpucluster:hybrid.controller, so there is no site slurmctld to make a bundle for; "
            "add hybrid.controller (host, address, slurmVersion) to the stack config"
        )
    if hybrid.credentials.type != "rolesanywhere":
        raise BundleError(
            "the site controller's agent takes its AWS session from IAM Roles Anywhere (a credential_process profile); "
            "gpucluster:hybrid.credentials.type is 'ssm', which the bundle does not set up: use type rolesanywhere"
        )
    if spec.slurm is None:
        raise BundleError(f"stack {spec.name!r} has no gpucluster:slurm section: the cloud partitions come from it; add one")
    ctx = SlurmContext.of(cluster)  # rendered for the site's controller's version (resolved)
    wanted = set(hybrid.burst_node_groups) or {g.name for g in ctx.node_groups}
    missing = sorted(wanted - {g.name for g in ctx.node_groups})
    if missing:
        raise BundleError(
            f"gpucluster:hybrid.burstNodeGroups names {', '.join(missing)}, which is no Slurm node group of the stack; "
            "list node groups that gpucluster:slurm.nodeGroups has"
        )
    ctx = replace(ctx, node_groups=tuple(g for g in ctx.node_groups if g.name in wanted))
    return Site(cluster, ctx, hybrid, hybrid.controller)


def cloud_conf(site: Site) -> str:
    """``cloud.conf``: included at the end of the site's slurm.conf. The power-saving timers are the cloud
    partitions' own; the global ``SuspendTime`` stays the site's."""
    ps = site.ctx.slurm.power_saving
    timers = (
        f"SuspendTime={ps.suspend_time_seconds} SuspendTimeout={ps.suspend_timeout_seconds} "
        f"ResumeTimeout={ps.resume_timeout_seconds}"
    )
    groups = site.groups
    return render(
        "hybrid/bundle/cloud.conf.j2",
        cluster=site.ctx.cluster,
        site=site.hybrid.site,
        slurm_version=site.ctx.slurm_version,
        programs={key: f"{site.bin_dir}/{name}" for key, name, _ in PROGRAMS},
        node_lines=[node_line(g) for g in groups],
        # never the site's default partition: a job goes to the cloud only when it asks for it
        partition_lines=[f"{partition_line(g, default=False)} {timers}" for g in groups],
        static=[g.partition for g in groups if g.static],
    )


def cloud_gres_conf(site: Site) -> str:
    lines = [line for g in site.groups if (line := gres_line(g))]
    return render("hybrid/bundle/cloud_gres.conf.j2", cluster=site.ctx.cluster, lines=lines)


def cloud_switch(site: Site) -> str:
    """The top switch of the cloud tree: no switch of the site's may list it, so no job spans the two sites."""
    return f"{site.ctx.cluster}-cloud"


def cloud_topology_conf(site: Site) -> str:
    """The cloud switch tree, appended to the site's topology.conf: one leaf per node group under one top switch
    that is the cloud's alone."""
    leaves = [(f"{cloud_switch(site)}-{g.name}", hostrange(g.name, g.max_size)) for g in site.groups]
    return render("hybrid/bundle/cloud_topology.conf.j2", cluster=site.ctx.cluster, top=cloud_switch(site), leaves=leaves)


def site_settings(site: Site) -> list[tuple[str, str, str]]:
    """``(key, value, why)`` the site's slurm.conf needs for the cloud nodes, for its Slurm version. A key the
    site already sets with a comma list takes these values added to its own."""
    groups = site.groups
    versioned = version_lines(site.ctx.slurm_version)
    why = f"keys that differ by Slurm version, here for {site.ctx.slurm_version} (gpucluster/render/slurm/versions.py)"
    out = [(line.split("=", 1)[0], line.split("=", 1)[1], "" if i else why) for i, line in enumerate(versioned)]
    gres = sorted({n for g in groups if (n := gres_name(g.facts))})
    if gres:
        out.append(("GresTypes", ",".join(gres), "the cloud nodes' accelerators (add to your own GresTypes)"))
    out += [
        ("TopologyPlugin", "topology/tree", "the cloud switch tree keeps every job on one side"),
        ("SuspendTime", "INFINITE", "unless you set one: the cloud partitions carry their own SuspendTime"),
        ("ResumeRate", "0", "no limit on launches per minute (set it only if your own power saving needs one)"),
        ("SuspendRate", "0", "no limit on power-downs per minute"),
        ("SrunPortRange", site.hybrid.srun_port_range, "the ports the cloud nodes' slurmstepd connect back to on login nodes"),
        ("TCPTimeout", "10", "the link to AWS adds latency (default 2 s)"),
    ]
    out.append(
        (
            "TaskProlog",
            HYBRID_TASK_PROLOG,
            "each side's NCCL environment, and a step spanning both sides fails (file task-prolog; merge with your own TaskProlog)",
        )
    )
    if site.hybrid.enable_nss_slurm:
        out.append(("LaunchParameters", "enable_nss_slurm", "cloud nodes resolve job users through slurmstepd"))
    return out


def slurm_conf_site(site: Site) -> str:
    return render(
        "hybrid/bundle/slurm.conf.site.j2",
        cluster=site.ctx.cluster,
        slurm_version=site.ctx.slurm_version,
        settings=site_settings(site),
    )
