"""The install part of a Slurm compute node: what EC2 Image Builder bakes into the group's image, and the
site's hooks the node's configure part runs.

A node's setup is split in two. The *install* part (:func:`node_install_script`, ``slurm/node-install.sh.j2``): the
Ubuntu packages (slurmd, slurm-client, munge, python3-boto3, iptables, PAM/SSSD when people log in), the Lustre client
for the image's kernel, the node package (health checks, identity helper). The *configure* part
(``slurm/node-setup.sh.j2``, the user data): config files, the node's name, munge key, mounts, users, slurmd. On a
baked image (:attr:`~gpucluster.resolve.compute.node_group.SlurmGroup.baked`) the user data holds only the configure part, so
a booting node installs and downloads nothing; with ``slurm.images.bake: false`` it runs both, as before."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.config.images import HookSpec, NodeHooksSpec
from gpucluster.render.core import WriteFile, render
from gpucluster.render.slurm.names import AGENT_LIB, NODE_SETUP, SlurmContext
from gpucluster.render.slurm.pam import COMPUTE_PAM_PACKAGES
from gpucluster.render.slurm.sssd import SSSD_PACKAGES, directory_of
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, SlurmGroup

# Ubuntu 24.04 (noble) packages. python3-boto3 runs the boot helper.
NODE_PACKAGES = ("slurmd", "slurm-client", "munge", "python3-boto3", "iptables")
AGENT_ZIP = "/tmp/gpucluster-node.zip"
"""Where the image's build puts the node package it downloads from the artifact bucket (the component's S3Download
step), for the install script to check and unpack."""
HOOK_DIR = "/etc/gpucluster/hooks"
HOOK_NAMES = {"on_node_start": "onNodeStart", "on_node_configured": "onNodeConfigured"}


def baked(group: ResolvedNodeGroup) -> bool:
    """Whether ``group``'s nodes boot the image the stack bakes."""
    return isinstance(group, SlurmGroup) and group.baked


def needs_package(ctx: SlurmContext, metrics: bool = True) -> bool:
    """Whether compute nodes run the node package: the health programs, the identity helper with a directory, the
    users program with declared users, the metrics exporter (``metrics``) or the log shipper (the cluster's
    monitoring on)."""
    from gpucluster.render.slurm.health import health_enabled
    from gpucluster.render.slurm.identity import has_users_program

    return (
        metrics
        or health_enabled(ctx)
        or directory_of(ctx.identity) is not None
        or has_users_program(ctx.identity)
        or ctx.monitoring is not None
    )


def node_packages(ctx: SlurmContext, metrics: bool = True) -> tuple[str, ...]:
    """The Debian packages a compute node of the cluster runs (``metrics``: with the node exporter)."""
    from gpucluster.render.slurm.metrics import METRICS_PACKAGES

    return (
        NODE_PACKAGES
        + (METRICS_PACKAGES if metrics else ())
        + (COMPUTE_PAM_PACKAGES if ctx.identity is not None else ())
        + (SSSD_PACKAGES if directory_of(ctx.identity) else ())
    )


def node_install_script(
    ctx: SlurmContext, group: ResolvedNodeGroup, *, agent_sha256: str | None, component: str = "node-install"
) -> str:
    """The install part for ``group``'s image: packages, the Lustre client when the group mounts Lustre, the node
    package (``agent_sha256``: the zip the build downloaded; None when the nodes need no package), pyxis and enroot when
    the group runs containers (:mod:`~gpucluster.render.slurm.container_build`)."""
    from gpucluster.facts.downloads import FSX_UBUNTU_KEY_FINGERPRINT, FSX_UBUNTU_KEY_URL
    from gpucluster.render.slurm.container_build import container_build, container_packages

    containers = isinstance(group, SlurmGroup) and group.containers
    return render(
        "slurm/node-install.sh.j2",
        cluster=ctx.cluster,
        group=group.name,
        node_setup=NODE_SETUP,
        component=component,
        packages=node_packages(ctx) + (container_packages() if containers else ()),
        containers=container_build() if containers else None,
        lustre=group.mounts_lustre,
        key_url=FSX_UBUNTU_KEY_URL,
        key_fingerprint=FSX_UBUNTU_KEY_FINGERPRINT or "",
        agent_sha256=agent_sha256,
        agent_zip=AGENT_ZIP,
        agent_lib=AGENT_LIB,
    )


@dataclass(frozen=True)
class HookCall:
    """One hook as the setup script calls it."""

    name: str
    path: str
    s3_uri: str | None = None
    sha256: str | None = None


def _call(key: str, hook: HookSpec | None) -> HookCall | None:
    if hook is None:
        return None
    name = HOOK_NAMES[key]
    return HookCall(name, f"{HOOK_DIR}/{name}.sh", hook.s3_uri, hook.sha256)


def hook_values(hooks: NodeHooksSpec | None) -> dict[str, object] | None:
    """What ``slurm/node-setup.sh.j2`` needs of a group's hooks (None: no hooks)."""
    if hooks is None or (hooks.on_node_start is None and hooks.on_node_configured is None):
        return None
    start, configured = _call("on_node_start", hooks.on_node_start), _call("on_node_configured", hooks.on_node_configured)
    return {
        "timeout": hooks.timeout_seconds,
        "fetch": any(c is not None and c.s3_uri for c in (start, configured)),
        "on_node_start": start,
        "on_node_configured": configured,
    }


def hook_files(hooks: NodeHooksSpec | None) -> tuple[WriteFile, ...]:
    """The inline hooks as root-only files (an S3 hook is fetched and checked at boot)."""
    if hooks is None:
        return ()
    out = []
    for key, hook in (("on_node_start", hooks.on_node_start), ("on_node_configured", hooks.on_node_configured)):
        if hook is not None and hook.inline is not None:
            text = hook.inline if hook.inline.endswith("\n") else hook.inline + "\n"
            out.append(WriteFile(f"{HOOK_DIR}/{HOOK_NAMES[key]}.sh", text, "0700"))
    return tuple(out)


def hook_objects(hooks: NodeHooksSpec | None) -> list[str]:
    """``s3://bucket/key`` of every S3 hook: the node's role may read exactly these objects."""
    if hooks is None:
        return []
    return [h.s3_uri for h in (hooks.on_node_start, hooks.on_node_configured) if h is not None and h.s3_uri]


# --- the Image Builder component document ----------------------------------------------------------------------

COMPONENT_DATA_LIMIT = 16000
"""Image Builder's CreateComponent ``data``: at most 16,000 characters."""


def component_description(cluster: str, group: ResolvedNodeGroup) -> str:
    """The component's description (the plan shows it): what the image holds beyond Slurm."""
    from gpucluster.facts.containers import ENROOT, PYXIS

    what = (
        f"pyxis {PYXIS.version} + enroot {ENROOT.version} + Slurm"
        if isinstance(group, SlurmGroup) and group.containers
        else "Slurm"
    )
    return f"gpucluster {cluster} / {group.name}: {what} (the node's install part)"


def component_document(ctx: SlurmContext, group: ResolvedNodeGroup, *, package_uri: str | None, agent_sha256: str | None) -> str:
    """The Image Builder component document (YAML, schemaVersion 1.0) that bakes ``group``'s install part: the build
    phase downloads the node package (``S3Download``, the build instance's role reads exactly that object) and runs
    :func:`node_install_script`; the validate phase checks what the node's setup expects. Raises ValueError when the
    document is over Image Builder's limit."""
    import yaml

    name = f"{ctx.cluster}-{group.name}-node"
    build: list[dict[str, object]] = []
    if package_uri is not None and agent_sha256 is not None:
        download = {"source": package_uri, "destination": AGENT_ZIP, "overwrite": True}
        build.append({"name": "DownloadNodePackage", "action": "S3Download", "inputs": [download]})
    script = node_install_script(ctx, group, agent_sha256=agent_sha256 if package_uri else None, component=name)
    build.append({"name": "InstallNode", "action": "ExecuteBash", "inputs": {"commands": [script]}})
    checks = ["command -v slurmd munged scontrol iptables", "python3 -c 'import boto3'"]
    if group.mounts_lustre:
        checks.append("command -v mount.lustre || test -x /sbin/mount.lustre")
    if agent_sha256 is not None and package_uri is not None:
        checks.append(f"grep -qx {agent_sha256} {AGENT_LIB}/.sha256")
    if isinstance(group, SlurmGroup) and group.containers:
        from gpucluster.render.slurm.container_build import container_checks

        checks += container_checks()
    document = {
        "name": name,
        "description": f"gpucluster: what a Slurm node of {ctx.cluster} / {group.name} installs, baked",
        "schemaVersion": 1.0,
        "phases": [
            {"name": "build", "steps": build},
            {"name": "validate", "steps": [{"name": "CheckNode", "action": "ExecuteBash", "inputs": {"commands": checks}}]},
        ],
    }

    class Dumper(yaml.SafeDumper):
        pass

    def literal(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, literal)
    text = yaml.dump(document, Dumper=Dumper, sort_keys=False, width=1000)
    if len(text) > COMPONENT_DATA_LIMIT:
        raise ValueError(
            f"the image component of node group {group.name!r} is {len(text)} characters; Image Builder allows {COMPONENT_DATA_LIMIT}"
        )
    return text


def semantic_version(*parts: str) -> str:
    """An Image Builder version (``major.minor.patch``) that changes whenever ``parts`` do: components and recipes
    are immutable per version, so new content needs a new version (the resource is replaced)."""
    import hashlib

    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"1.{int(digest[:5], 16)}.{int(digest[5:10], 16)}"
