"""Slurm rendering, split by collaborators: :mod:`.names` (hosts, nodes, partitions, paths, ports),
:mod:`.conf` (slurm.conf, gres.conf, cgroup.conf, topology.conf, slurmdbd.conf), :mod:`.agent` (the node
agent's config and bundle, the boot helper), :mod:`.guard` (the IMDS guard), :mod:`.head` (the head
node's files and user data) and :mod:`.compute` (a compute node's Slurm part).

Slurm's node, partition and GRES lines are computed from the resolved node groups' facts; templates
in ``templates/slurm/`` only place them. Pure (no Pulumi): values that only AWS knows (launch template
ids, the data volume id, the agent bundle's bucket) come in as plain arguments.

The files and where they go:

- head node (cloud-init ``write_files``): ``/etc/slurm/slurm.conf``, ``gres.conf``, ``cgroup.conf``,
  ``slurmdbd.conf`` (with accounting), the initial ``topology.conf`` (the agent rewrites it), the agent's
  ``/etc/gpucluster/agent.json``, the Resume/Suspend/ResumeFail wrappers, systemd units, and the setup
  script that runs once.
- compute nodes (added to :meth:`GpuCluster.node_user_data` as the ``extra`` part): the setup script
  that waits for the node's name tag and starts ``slurmd --conf-server … -N <node>``, the TaskProlog
  that gives every task the node's NCCL/EFA environment, and a slurmd drop-in. Slurm's own files
  come from slurmctld (configless).

Importers name the module that owns a name; this package re-exports nothing.
"""
