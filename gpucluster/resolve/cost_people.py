"""The estimate's lines for the people of a Slurm cluster: login nodes (the catalog's instance price × count), the
SSH load balancer and the shared home. The price data has no Elastic Load Balancing or FSx for OpenZFS figures, so
those two lines say "unknown" and why rather than carry an invented price (the estimate's total is then unknown too,
as with any unpriced item)."""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.prices import PriceBook

NLB_UNKNOWN = (
    "unknown: the price data has no Elastic Load Balancing figures (a network load balancer is billed per hour and per NLCU)"
)
OPENZFS_UNKNOWN = (
    "unknown: the price data has no FSx for OpenZFS figures (billed per GB-month of storage and of backups and per "
    "MBps-month of throughput)"
)


Part = tuple[str, "float | None", float, str, str, "str | None"]
"""``(name, usd_per_hour, kw, source, key, price_date)``: the fields of the estimate's ``LineItem``."""


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
            )
        )
        if login.ssh is not None:
            items.append((f"SSH load balancer ({login.ssh.scheme})", None, 0.0, NLB_UNKNOWN, "slurm-login-nlb", None))
    home = slurm.home
    if slurm.identity is not None and (home is None or home.enabled):
        size = home.storage_capacity_gib if home is not None else 128
        items.append((f"FSx for OpenZFS /home {size} GiB", None, 0.0, OPENZFS_UNKNOWN, "slurm-home-openzfs", None))
    return items
