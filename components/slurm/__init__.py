"""Slurm: :class:`~gpucluster.components.slurm.slurm_cluster.SlurmCluster` and its private parts, the ``_``
modules: the Args adapter (``_args``), the head node, the Slurm node groups over the compute family's
launch-template core, the node agent's package (``_artifact``), a hybrid site's munge key (``_hybrid``) and the
teardown of the agent's instances. They create resources under the cluster component (its children), never a
component of their own (the teardown is a child component), so names and parents are the cluster's."""
