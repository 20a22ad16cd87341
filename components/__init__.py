"""The Pulumi component resources, by family (``gpucluster.components``; ``components/`` in a checkout).

- ``gpu_cluster``  :class:`GpuCluster`: the whole stack config; it composes the families below;
- ``compute``      ``GpuNodeGroup`` and the launch-template core every node group is built on;
- ``storage``      ``LustreStorage``, ``DataBucket`` and ``SharedStorage``, the one shape a file system takes
                   when it reaches a consumer;
- ``network``      ``Network``: the VPC (new or yours), the nodes' security groups, the flow log;
- ``slurm``        ``SlurmCluster``: its head node, Slurm node groups, the node agent's package and teardown;
- ``kubernetes``   ``EksCluster`` and ``KubernetesPlatform`` with what it installs (GPU Operator, Network
                   Operator, EFA device plugin, Kueue, team namespaces);
- ``hybrid``       ``HybridLink`` and ``OnPremCredentials``: the link to an on-premises site, its agent's credentials.

A module whose name starts with ``_`` is private to this package: a helper that lives beside the family that uses
it (another family may import it: the Slurm and EKS node groups build on ``compute._launch_template``), and
``_shared`` holds the few helpers several families use. A program imports the components from ``gpucluster``
(``from gpucluster import GpuNodeGroup``) or from their modules (``gpucluster.components.compute.gpu_node_group``).
"""
