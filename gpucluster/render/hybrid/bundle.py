"""The bundle a site installs on its own slurmctld host to burst into the stack's AWS node groups
(``gpucluster bundle --stack X --out DIR``).

The Slurm files come from :mod:`.bundle_slurm`; this module adds the agent (the same ``gpucluster_agents``
package, installed into its own virtual environment under ``controller.installDir``), its config, the AWS
config profile whose ``credential_process`` runs ``aws_signing_helper`` (IAM Roles Anywhere: no access key
anywhere), the wrappers slurmctld runs, the systemd service and timer of the agent's maintenance pass, the
firewall rules the site mirrors, an install script and INSTALL.md.

Values only AWS knows (launch template ids, subnet ids, the Roles Anywhere ARNs) come from the stack's
``hybrid`` output (:class:`AwsValues`, ``gpucluster bundle --outputs FILE``). Offline they are
placeholders ``@@name@@``: the agent refuses such a config (every key named) and ``install.sh`` refuses to
install while one is left, so a bundle made before ``pulumi up`` can be read and reviewed but never runs
half-configured."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpucluster.facts.downloads import site_requirements
from gpucluster.render.core import render
from gpucluster.render.hybrid.bundle_slurm import (
    Site,
    cloud_conf,
    cloud_gres_conf,
    cloud_topology_conf,
    site_settings,
    slurm_conf_site,
)
from gpucluster.render.hybrid.fabric import HYBRID_TASK_PROLOG, hybrid_task_prolog
from gpucluster.render.slurm.agent import LaunchTarget, agent_bundle, agent_config, sha256
from gpucluster.render.slurm.names import AGENT_LOG, PROGRAMS, SLURMD_PORT, munge_secret_name
from gpucluster_agents import contract
from gpucluster_agents.contract import site as agent_site

STATE_DIR = "/var/lib/gpucluster/agent"
PLACEHOLDER_RE = re.compile(r"@@[A-Za-z0-9_.-]+@@")
ARN_PATTERNS = {
    "trustAnchorArn": re.compile(r"^arn:aws[a-z-]*:rolesanywhere:[a-z0-9-]+:\d{12}:trust-anchor/[0-9a-f-]{36}$"),
    "profileArn": re.compile(r"^arn:aws[a-z-]*:rolesanywhere:[a-z0-9-]+:\d{12}:profile/[0-9a-f-]{36}$"),
    "roleArn": re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$"),
}


def placeholder(name: str) -> str:
    return f"@@{name}@@"


@dataclass(frozen=True)
class AwsValues:
    """What the stack's ``hybrid`` output holds for the bundle; a missing value is rendered as a placeholder."""

    targets: Mapping[str, LaunchTarget] = field(default_factory=dict)
    arns: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_output(cls, output: Mapping[str, Any]) -> AwsValues:
        """Read the stack's ``hybrid`` output (``pulumi stack output hybrid --json``): its burst groups' launch
        templates and subnets and its credentials' ARNs; raises ValueError naming the key."""
        slurm = output.get("slurm") or {}
        groups = slurm.get("burstNodeGroups") if isinstance(slurm, dict) else None
        if not isinstance(groups, dict):
            raise ValueError("hybrid.slurm.burstNodeGroups must be an object of node group → {launchTemplateId, subnetIds}")
        targets: dict[str, LaunchTarget] = {}
        for name, raw in groups.items():
            where = f"hybrid.slurm.burstNodeGroups.{name}"
            lt, subnets = (raw or {}).get("launchTemplateId"), (raw or {}).get("subnetIds")
            if not isinstance(lt, str) or not re.fullmatch(r"lt-[0-9a-f]+", lt):
                raise ValueError(f"{where}.launchTemplateId {lt!r} is not a launch template id (lt-…)")
            if (
                not isinstance(subnets, list)
                or not subnets
                or not all(re.fullmatch(r"subnet-[0-9a-f]+", str(s)) for s in subnets)
            ):
                raise ValueError(f"{where}.subnetIds {subnets!r} is not a non-empty list of subnet ids (subnet-…)")
            targets[str(name)] = LaunchTarget(lt, tuple(str(s) for s in subnets), raw.get("placementGroupName") or None)
        credentials = output.get("credentials") or {}
        arns: dict[str, str] = {}
        for key, pattern in ARN_PATTERNS.items():
            value = credentials.get(key) if isinstance(credentials, dict) else None
            if value is None:
                continue
            if not isinstance(value, str) or not pattern.match(value):
                raise ValueError(f"hybrid.credentials.{key} {value!r} is not a {key[:-3]} ARN")
            arns[key] = value
        return cls(targets, arns)

    def target(self, group: str) -> LaunchTarget:
        return self.targets.get(group) or LaunchTarget(
            placeholder(f"{group}.launchTemplateId"), (placeholder(f"{group}.subnetIds"),)
        )

    def arn(self, key: str) -> str:
        return self.arns.get(key) or placeholder(key)


def profile_name(site: Site) -> str:
    return f"gpucluster-{site.ctx.cluster}"


def agent_json(site: Site, aws: AwsValues) -> str:
    """The agent's config on the site's controller: the burst groups' launch targets, its session from the
    profile, the site's previous programs, and no topology.conf of its own (the site's file is the site's)."""
    targets = {g.name: aws.target(g.name) for g in site.groups}
    cfg = replace(
        agent_config(site.ctx, targets),
        log_file=AGENT_LOG,
        state_dir=STATE_DIR,
        topology_conf=None,
        site=agent_site.Site(
            aws_profile=profile_name(site),
            aws_config_file=f"{site.etc_dir}/aws-config",
            resume_program=site.controller.resume_program,
            suspend_program=site.controller.suspend_program,
        ),
    )
    return contract.to_json(cfg)


def aws_config(site: Site, aws: AwsValues) -> str:
    creds = site.hybrid.credentials
    command = [
        creds.signing_helper_path,
        "credential-process",
        "--certificate",
        creds.certificate_path,
        "--private-key",
        creds.private_key_path,
        "--trust-anchor-arn",
        aws.arn("trustAnchorArn"),
        "--profile-arn",
        aws.arn("profileArn"),
        "--role-arn",
        aws.arn("roleArn"),
        "--region",
        site.ctx.region,
        "--session-duration",
        str(creds.duration_seconds),
    ]
    return render("hybrid/bundle/aws-config.j2", profile=profile_name(site), region=site.ctx.region, command=" ".join(command))


def firewall_rules(site: Site) -> list[dict[str, Any]]:
    """What the site's firewalls must let through (the VPC's security groups hold the AWS side)."""
    c, h = site.controller, site.hybrid
    vpc = site.spec.network.vpc_cidr
    low, high = h.srun_ports
    rules: list[dict[str, Any]] = [
        {"from": vpc, "to": c.address, "protocol": "tcp", "ports": str(c.port), "why": "cloud slurmd → slurmctld"},
        {"from": c.address, "to": vpc, "protocol": "tcp", "ports": str(SLURMD_PORT), "why": "slurmctld → cloud slurmd"},
    ]
    if c.slurmdbd_port:
        rules.append(
            {"from": vpc, "to": c.address, "protocol": "tcp", "ports": str(c.slurmdbd_port), "why": "sacct on cloud nodes"}
        )
    for cidr in h.login_node_cidrs:
        rules.append({"from": cidr, "to": vpc, "protocol": "tcp", "ports": str(SLURMD_PORT), "why": "srun → cloud slurmd"})
        rules.append({"from": vpc, "to": cidr, "protocol": "tcp", "ports": f"{low}-{high}", "why": "slurmstepd → srun"})
    for host in (f"ec2.{site.ctx.region}.amazonaws.com", f"rolesanywhere.{site.ctx.region}.amazonaws.com"):
        rules.append({"from": c.address, "to": host, "protocol": "tcp", "ports": "443", "why": "the agent's AWS calls"})
    return rules


def _shell_context(site: Site) -> dict[str, Any]:
    c = site.controller
    return {
        "cluster": site.ctx.cluster,
        "install_dir": c.install_dir,
        "bin_dir": site.bin_dir,
        "etc_dir": site.etc_dir,
        "conf_dir": c.conf_dir,
        "slurm_user": c.slurm_user,
        "state_dir": STATE_DIR,
        "log_file": AGENT_LOG,
        "programs": [(name, command) for _, name, command in PROGRAMS],
        "creds": site.hybrid.credentials,
    }


@dataclass(frozen=True)
class BundleFile:
    path: str  # relative to the bundle's folder
    content: bytes
    mode: int = 0o644


def bundle_files(site: Site, aws: AwsValues | None = None) -> list[BundleFile]:
    """Every file of the bundle, in a fixed order."""
    aws = aws or AwsValues()
    shell = _shell_context(site)
    package = agent_bundle()
    texts: list[tuple[str, str, int]] = [
        ("cloud.conf", cloud_conf(site), 0o644),
        ("cloud_gres.conf", cloud_gres_conf(site), 0o644),
        ("cloud_topology.conf", cloud_topology_conf(site), 0o644),
        ("slurm.conf.site", slurm_conf_site(site), 0o644),
        ("agent.json", agent_json(site, aws), 0o644),
        ("aws-config", aws_config(site, aws), 0o644),
        ("firewall.json", json.dumps(firewall_rules(site), indent=2, ensure_ascii=False) + "\n", 0o644),
        ("task-prolog", hybrid_task_prolog(site.cluster), 0o755),
        ("requirements.txt", site_requirements(), 0o644),
    ]
    for name, command in shell["programs"]:
        texts.append((f"bin/{name}", render("hybrid/bundle/wrapper.sh.j2", command=command, **shell), 0o755))
    texts += [
        ("systemd/gpucluster-agent-maintain.service", render("hybrid/bundle/maintain.service.j2", **shell), 0o644),
        ("systemd/gpucluster-agent-maintain.timer", render("hybrid/bundle/maintain.timer.j2", **shell), 0o644),
        ("install.sh", render("hybrid/bundle/install.sh.j2", **shell), 0o755),
        ("INSTALL.md", install_md(site, aws), 0o644),
    ]
    files = [BundleFile(path, text.encode(), mode) for path, text, mode in texts]
    files.append(BundleFile("gpucluster_agents.zip", package))
    files.append(BundleFile("gpucluster_agents.zip.sha256", f"{sha256(package)}  gpucluster_agents.zip\n".encode()))
    return files


def install_md(site: Site, aws: AwsValues) -> str:
    groups = site.groups
    missing = sorted({m for f in (agent_json(site, aws), aws_config(site, aws)) for m in PLACEHOLDER_RE.findall(f)})
    return render(
        "hybrid/bundle/INSTALL.md.j2",
        site=site.hybrid.site,
        controller=site.controller,
        slurm_version=site.ctx.slurm_version,
        partitions=[(g.partition, g.node_names[0], g.instance_type, g.max_size) for g in groups],
        settings=site_settings(site),
        firewall=firewall_rules(site),
        missing=missing,
        profile=profile_name(site),
        task_prolog=HYBRID_TASK_PROLOG,
        munge_secret=munge_secret_name(site.ctx.cluster),
        fabric={"roce": "RoCE", "infiniband": "InfiniBand"}[site.hybrid.fabric],
        **_shell_context(site),
    )
