"""The shape of an update-safety entry (:mod:`gpucluster.tools.plan.diff.safety` holds the table), apart so the
table's modules share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

TF = "https://github.com/hashicorp/terraform-provider-aws/blob/main/internal/service/"


@dataclass(frozen=True)
class Safety:
    """How one resource type takes a change."""

    source: str
    """Where the force-new properties come from (provider source or API reference)."""
    replace_on: tuple[str, ...] = ()
    """Input paths whose change replaces the resource."""
    replace_on_decrease: tuple[str, ...] = ()
    """Numeric input paths that replace the resource only when they go down (FSx capacity, metadata IOPS)."""
    replace_when: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(flag, paths)``: input paths whose change replaces the resource only while the boolean input ``flag`` is
    true in the new program (an instance's user data with ``userDataReplaceOnChange``)."""
    holds_data: str | None = None
    """What a replacement or deletion loses (``None``: nothing that is not rebuilt from the config)."""
    disruption: str | None = None
    """The running work a change can disrupt: ``node-group`` (instances of an Auto Scaling group or an EKS
    node group), ``head-node`` (the Slurm controller), ``placement`` (instances must leave the group),
    ``template`` (a new launch template version), ``capacity`` (reserved capacity released), ``site-link`` (an
    on-premises site loses its link or credentials: :mod:`gpucluster.tools.plan.diff.safety.hybrid`)."""
