# pyright: strict
"""gpucluster's node package: the programs that run on the cluster's own machines, never on a workstation.

- the Slurm power agent (``python -m gpucluster_agents`` / ``gpucluster-agent``): ResumeProgram, SuspendProgram and
  ResumeFailProgram for EC2 node groups (CreateFleet instant, tags, never leaking an instance), the maintenance
  pass (repairs, holds, topology.conf), on a gpucluster head node or a hybrid site's own slurmctld;
- the boot helper ``gpucluster-aws`` that Slurm nodes run while they boot (``boot``);
- the GPU node health program (``health``), on Slurm nodes and in the Kubernetes sweep;
- the node contract both sides read (``contract``): the schema of every file the control plane writes for a node,
  the tag keys, the node names; with ``ship`` (the package's zip and shipped files), all that ``gpucluster`` imports.

Subpackages: ``contract`` → ``power`` → ``repair``, with ``agent`` (the subcommands) and ``cli`` above them;
``boot`` and ``health`` stand alone (README.md, "Modules"). boto3 and the standard library only (plus
nvidia-ml-py for health); Python 3.9+; never imports ``gpucluster``. Entry point: ``gpucluster_agents.cli:main``.
"""

__version__ = "0.2.0"
