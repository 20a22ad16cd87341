"""Compute: :class:`~gpucluster.components.compute.gpu_node_group.GpuNodeGroup` (an Auto Scaling group of GPU
nodes) and ``_launch_template``, the shared launch-template core (EFA interfaces, placement group, capacity,
IMDSv2, the node role) that the Slurm and EKS node groups are built on too."""
