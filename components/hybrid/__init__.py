"""Hybrid: :class:`~gpucluster.components.hybrid.hybrid_link.HybridLink` (the routes and security rules to an
on-premises site) and :class:`~gpucluster.components.hybrid.onprem_credentials.OnPremCredentials` (IAM Roles
Anywhere for a Slurm site's agent); ``_parts`` builds both for ``GpuCluster``, ``_security`` holds the site's
security group rules (the Slurm node groups of a hybrid cluster use them too)."""
