"""Helpers of the bundle tests: a stack's bundle, and a small "site" slurm.conf that includes it the way
INSTALL.md tells an administrator to (the keys of ``slurm.conf.site`` merged, ``Include cloud.conf`` last,
``Include cloud_gres.conf`` in gres.conf, ``cloud_topology.conf`` appended to the site's topology.conf)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gpucluster.load import load_spec
from gpucluster.render.hybrid.bundle import AwsValues, BundleFile, bundle_files
from gpucluster.render.hybrid.bundle_slurm import Site, site_of
from gpucluster.tools.plan.run.stackfile import load_stack_config

REPO = Path(__file__).resolve().parents[3]
SITE_NODES = "onprem-[1-2]"


def stack_config(stack: str = "hybrid-slurm") -> dict[str, Any]:
    _, config, _ = load_stack_config(stack, REPO)
    return dict(config)


def site_for(
    config: dict[str, Any], stack: str = "hybrid-slurm", credentials: dict[str, Any] | None = None, **controller: Any
) -> Site:
    """The bundle's view of ``config`` with ``controller`` (and ``credentials``) keys, camelCase, laid over the stack's."""
    import json

    config = copy.deepcopy(config)
    hybrid = (
        json.loads(config["gpucluster:hybrid"]) if isinstance(config["gpucluster:hybrid"], str) else config["gpucluster:hybrid"]
    )
    hybrid["controller"].update(controller)
    hybrid["credentials"].update(credentials or {})
    config["gpucluster:hybrid"] = hybrid
    return site_of(load_spec(config, stack=stack).cluster)


def files_of(site: Site, aws: AwsValues | None = None) -> dict[str, BundleFile]:
    return {f.path: f for f in bundle_files(site, aws)}


def text(files: dict[str, BundleFile], path: str) -> str:
    return files[path].content.decode()


def site_settings_lines(files: dict[str, BundleFile]) -> list[str]:
    return [line for line in text(files, "slurm.conf.site").splitlines() if line and not line.startswith("#")]


def site_files(files: dict[str, BundleFile], programs: str, site_state: str = "FUTURE") -> dict[str, str]:
    """The site's slurm.conf, gres.conf and topology.conf with the bundle merged in as INSTALL.md says, and the
    bundle's cloud.conf and cloud_gres.conf next to them. ``programs``: what cloud.conf's Resume/Suspend
    programs become (the agent's wrappers exist only on an installed controller). ``site_state``: the site's
    nodes' State (FUTURE for a config check: no slurmd answers there, and slurmctld would ping them)."""
    base = [
        "ClusterName=site",
        "SlurmctldHost=slurmctl01",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MailProg=/bin/true",
        f"NodeName={SITE_NODES} NodeAddr=127.0.0.1 CPUs=4 RealMemory=8000 State={site_state}",
        f"PartitionName=gpu Nodes={SITE_NODES} Default=YES MaxTime=INFINITE State=UP",
    ]
    slurm_conf = "\n".join([*base, *site_settings_lines(files), "Include cloud.conf"]) + "\n"
    cloud = "\n".join(
        f"{line.split('=', 1)[0]}={programs}"
        if line.startswith(("ResumeProgram=", "SuspendProgram=", "ResumeFailProgram="))
        else line
        for line in text(files, "cloud.conf").splitlines()
    )
    return {
        "slurm.conf": slurm_conf,
        "cloud.conf": cloud + "\n",
        "gres.conf": "AutoDetect=off\nInclude cloud_gres.conf\n",
        "cloud_gres.conf": text(files, "cloud_gres.conf"),
        "topology.conf": f"SwitchName=site-leaf Nodes={SITE_NODES}\n" + text(files, "cloud_topology.conf"),
    }
