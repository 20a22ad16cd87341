"""Kubernetes: :class:`~gpucluster.components.kubernetes.eks_cluster.EksCluster` (the control plane, system and GPU
node groups, access, add-ons, EKS hybrid nodes: the ``_eks_*`` helpers) and
:class:`~gpucluster.components.kubernetes.kubernetes_platform.KubernetesPlatform` with what it installs on any
cluster (GPU Operator, Network Operator, EFA device plugin, Kueue, team namespaces). ``_args`` adapts their Args
to the config, ``_objects`` and ``_helm`` place Kubernetes objects and Helm releases."""
