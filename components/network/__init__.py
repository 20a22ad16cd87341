"""Network: :class:`~gpucluster.components.network.network.Network` (a new VPC or yours, the security groups every
node group uses) and ``_flow_logs``, its VPC flow log."""
