"""Storage: :class:`~gpucluster.components.storage.lustre_storage.LustreStorage` (FSx for Lustre, sized from the
workload), :class:`~gpucluster.components.storage.data_bucket.DataBucket` (S3), and
:class:`~gpucluster.components.storage.shared_storage.SharedStorage`, the one shape a file system takes when it
reaches node groups, Slurm or Kubernetes. ``_setup``: the host that prepares a new file system (team directories,
data repository associations)."""
