"""The estimate's lines for the people of a Slurm cluster: login nodes (the catalog's instance price × count), the
SSH load balancer and the shared home (FSx for OpenZFS), the last two priced by :mod:`gpucluster.resolve.cost.services`
from the price file's ``Services`` figures."""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.slurm.home import HomeSpec
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.prices import PriceBook
from gpucluster.resolve.cost.services import Part, nlb_part, openzfs_part


def slurm_people_parts(spec: ClusterSpec, catalog: Catalog, book: PriceBook) -> list[Part]:
    """Login nodes, their SSH load balancer, the OpenZFS home; none where a site's slurmctld is the controller."""
    slurm = getattr(spec, "slurm", None)
    hybrid = getattr(spec, "hybrid", None)
    if slurm is None or (hybrid is not None and hybrid.controller is not None):
        return []
    items: list[Part] = []
    login = slurm.login_nodes
    if login is not None:
        facts = catalog.get(login.instance_type)
        quote = book.quote(login.instance_type, spec.region)
        price = quote.usd_per_hour
        items.append(
            (
                f"Slurm login nodes {login.count} × {login.instance_type}",
                None if price is None else round(price * login.count, 3),
                round((facts.estimated_power_kw or 0.0) * login.count, 2) if facts else 0.0,
                f"{quote.source}; their EBS volumes are extra",
                "slurm-login-nodes",
                quote.date,
                ...,
            )
        )
        if login.ssh is not None:
            items.append(nlb_part(book, spec.region, login.ssh.scheme))
    home = slurm.home
    if slurm.identity is not None and (home is None or home.enabled):
        home = home if home is not None else HomeSpec()
        items.append(
            openzfs_part(
                book,
                spec.region,
                deployment_type=home.deployment_type,
                storage_gib=home.storage_capacity_gib,
                throughput_mbps=home.throughput_capacity,
                provisioned_iops=None,  # the home component leaves IOPS automatic: 3 per GB, included
                backup_days=home.automatic_backup_retention_days,
            )
        )
    return items
