"""The update-safety table: what a change to each resource type does in AWS or Kubernetes (replaces it, loses
data, disrupts running work). :mod:`.table` holds the entries of the compute, storage, network, identity,
EKS and Kubernetes types and the functions that read them, :mod:`.hybrid` those of a hybrid site's link
and credentials, :mod:`.types` the shape of an entry."""

from gpucluster.tools.plan.diff.safety.table import TABLE, TF, Safety, replace_reasons, safety_of

__all__ = ["TABLE", "TF", "Safety", "replace_reasons", "safety_of"]
