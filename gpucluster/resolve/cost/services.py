"""The estimate's lines for the managed services a stack creates beside its instances: the FSx for OpenZFS home, the
SSH network load balancer, the Secrets Manager secrets, Image Builder's build instances and EKS's control plane and
system nodes; the fixed us-east-1 list prices of the network's pieces; and the check of ``estimate.pricePerHour``
against the lines a stack has.

Each line is worked out from its quantities (a size, a count, an instance type), so the stack's estimate (from the
resolved config) and the one worked out from a plan's resources (:mod:`gpucluster.tools.plan.show.program_estimate`)
share it. Prices come from the price file's ``Services`` section; where a service bills by use, the usage assumed is
its ``Usage`` section and the line's name says it. A price the file lacks leaves the line unpriced, with the
``estimate.pricePerHour`` key that would price it.
"""

from __future__ import annotations

from types import EllipsisType

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.prices import REFERENCE_REGION, PriceBook, ServicePrice
from gpucluster.resolve.compute.node_group import bakes

HOURS_PER_MONTH = 730

# us-east-1 list prices of the managed pieces a cluster adds (AWS pricing pages; planning figures).
NAT_GATEWAY_USD_PER_HOUR = 0.045
INTERFACE_ENDPOINT_USD_PER_HOUR_PER_ZONE = 0.01
EKS_CONTROL_PLANE_USD_PER_HOUR = 0.10


def us_east_1(region: str, what: str) -> str:
    """The source of a fixed price the catalog only knows for us-east-1."""
    where = "" if region == REFERENCE_REGION else f"; the catalog has no {region} figure"
    return f"us-east-1 list price, {what}{where}"


Part = tuple[str, "float | None", float, str, str, "str | None", "float | EllipsisType | None"]
"""``(name, usd_per_hour, kw, source, key, price_date, usd_per_hour_at_max)``: the fields of the estimate's
``LineItem`` (``...`` at max: the same as now)."""

OPENZFS_PRICED = ("SINGLE_AZ_1",)
"""The FSx for OpenZFS deployment types the price file has figures for (Single-AZ 1; the others bill more)."""
INCLUDED_IOPS_PER_GB = 3
"""FSx for OpenZFS SSD: 3 IOPS per GB of storage are included; only IOPS provisioned above that are billed."""


def override_hint(key: str) -> str:
    """How to price a line the file has no figure for."""
    return f"set gpucluster:estimate.pricePerHour.{key} (USD per hour) to include it"


def _unpriced(name: str, key: str, why: str) -> Part:
    return (name, None, 0.0, f"unpriced: {why}; {override_hint(key)}", key, None, ...)


def _sources(prices: list[ServicePrice]) -> str:
    """The sources of a line's prices, each once, in order."""
    seen: list[str] = []
    for p in prices:
        if p.source not in seen:
            seen.append(p.source)
    return " · ".join(seen)


def openzfs_part(
    book: PriceBook,
    region: str,
    *,
    deployment_type: str,
    storage_gib: int,
    throughput_mbps: int,
    provisioned_iops: int | None,
    backup_days: int,
) -> Part:
    """The OpenZFS ``/home``: storage, throughput, IOPS above those included and its backups, per month / 730."""
    key, name = "slurm-home-openzfs", f"FSx for OpenZFS /home {storage_gib} GiB, {throughput_mbps} MB/s"
    keys = ("FsxOpenZfsStorageGbMonth", "FsxOpenZfsThroughputMbpsMonth", "FsxOpenZfsIopsMonth", "FsxOpenZfsBackupGbMonth")
    found = [book.service(region, k) for k in keys]
    if deployment_type not in OPENZFS_PRICED:
        return _unpriced(name, key, f"the price data has FSx for OpenZFS figures for SINGLE_AZ_1 only, not {deployment_type}")
    storage, throughput, iops, backup = found
    if storage is None or throughput is None or iops is None or backup is None:
        return _unpriced(name, key, "the price data has no FSx for OpenZFS figures")
    billed_iops = max(0, (provisioned_iops or 0) - INCLUDED_IOPS_PER_GB * storage_gib)
    backup_gb = storage_gib * book.usage("OpenZfsBackupShareOfCapacity") if backup_days else 0.0
    month = storage_gib * storage.usd + throughput_mbps * throughput.usd + billed_iops * iops.usd + backup_gb * backup.usd
    iops_text = f"{billed_iops:,} IOPS above the included" if billed_iops else "IOPS included (3 per GB)"
    backups = f"backups ~{backup_gb:,.0f} GB (kept {backup_days} days)" if backup_days else "no backups"
    sources = _sources([storage, throughput, iops, backup])
    return (f"{name}; {iops_text}; {backups}", round(month / HOURS_PER_MONTH, 6), 0.0, sources, key, storage.date, ...)


def nlb_part(book: PriceBook, region: str, scheme: str) -> Part:
    """The login nodes' SSH network load balancer: per hour, and the NLCU-hours the price file assumes."""
    key, name = "slurm-login-nlb", f"SSH load balancer ({scheme})"
    hour, nlcu = book.service(region, "NlbHour"), book.service(region, "NlcuHour")
    if hour is None or nlcu is None:
        return _unpriced(name, key, "the price data has no Elastic Load Balancing figures")
    nlcus = book.usage("NlcuPerHour")
    usd = hour.usd + nlcus * nlcu.usd
    return (f"{name}; ~{nlcus:g} NLCU an hour", round(usd, 6), 0.0, _sources([hour, nlcu]), key, hour.date, ...)


def secrets_part(book: PriceBook, region: str, count: int) -> Part:
    """The stack's Secrets Manager secrets (the munge key, the login nodes' host keys): per secret-month and reads."""
    key, name = "secrets", f"Secrets Manager {count} secret(s)"
    secret, calls = book.service(region, "SecretMonth"), book.service(region, "SecretsApi10k")
    if secret is None or calls is None:
        return _unpriced(name, key, "the price data has no Secrets Manager figures")
    reads = book.usage("SecretsApiCallsPerSecretMonth")
    month = count * (secret.usd + reads / 10_000 * calls.usd)
    name += f"; ~{reads:,.0f} reads a month each"
    return (name, round(month / HOURS_PER_MONTH, 6), 0.0, _sources([secret, calls]), key, secret.date, ...)


def image_builds_part(book: PriceBook, region: str, images: int, instance_type: str) -> Part:
    """Image Builder's build and test instances (Image Builder itself is free): images × builds a month × hours."""
    key = "image-builds"
    builds, hours = book.usage("ImageBuildsPerMonth"), book.usage("ImageBuildHours")
    name = f"Image builds: {images} image(s) × {builds:g} a month × ~{hours:g} h on {instance_type}"
    quote = book.quote(instance_type, region)
    if quote.usd_per_hour is None:
        return _unpriced(name, key, f"no price for {instance_type} in the catalog")
    month = images * builds * hours * quote.usd_per_hour
    source = f"{quote.source}; Image Builder adds no charge of its own"
    return (name, round(month / HOURS_PER_MONTH, 6), 0.0, source, key, quote.date, ...)


def eks_parts(spec: ClusterSpec, catalog: Catalog, book: PriceBook) -> list[Part]:
    """EKS's control plane and its system node group."""
    kubernetes = getattr(spec, "kubernetes", None)
    if kubernetes is None:
        return []
    system = kubernetes.system_node_group
    facts = catalog.get(system.instance_type)
    nodes = system.effective_desired_size
    quote = book.quote(system.instance_type, spec.region)
    price = quote.usd_per_hour
    return [
        (
            "EKS control plane",
            EKS_CONTROL_PLANE_USD_PER_HOUR,
            0.0,
            us_east_1(spec.region, "EKS pricing, standard support"),
            "eks-control-plane",
            None,
            ...,
        ),
        (
            f"EKS system nodes {nodes} × {system.instance_type}",
            None if price is None else round(price * nodes, 3),
            round((facts.estimated_power_kw or 0.0) * nodes, 2) if facts else 0.0,
            quote.source,
            "eks-system-nodes",
            quote.date,
            ...,
        ),
    ]


def slurm_service_parts(spec: ClusterSpec, book: PriceBook) -> list[Part]:
    """A Slurm cluster's Secrets Manager secrets (the munge key; the login nodes' SSH host keys) and the builds of
    its baked images."""
    slurm = getattr(spec, "slurm", None)
    if slurm is None:
        return []
    login = slurm.login_nodes
    hybrid = getattr(spec, "hybrid", None)
    own_head = hybrid is None or hybrid.controller is None
    secrets = 1 + (1 if own_head and login is not None and login.ssh is not None else 0)
    parts = [secrets_part(book, spec.region, secrets)]
    baked = [g for g in spec.groups_for("slurm") if bakes(spec, g.name)]
    if baked:
        parts.append(image_builds_part(book, spec.region, len(baked), slurm.images.build_instance_type))
    return parts


def override_findings(spec: ClusterSpec, lines: list[str]) -> list[Finding]:
    """An ``estimate.pricePerHour`` key for a line this stack does not have prices nothing: an error naming the lines
    it has (a line comes and goes with its part of the config: ``slurm-login-nlb`` with ``loginNodes.ssh``)."""
    return [
        error(
            f"gpucluster:estimate.pricePerHour.{key}",
            f"this stack's estimate has no {key!r} line to price (its lines: {', '.join(lines) or 'none'})",
            "remove the key, or price one of the lines the stack has",
            key,
            "estimate-line-absent",
        )
        for key in spec.estimate.price_per_hour
        if key not in lines
    ]
