"""Private parts of :class:`~gpucluster.components.slurm_cluster.SlurmCluster`: its head node and the node
agent's package. They create resources under the cluster component (its children), never a component of
their own, so names and parents are the cluster's."""
