"""The hourly cost of a hybrid site's link (``gpucluster:hybrid``), as fixed items of the estimate: the
Site-to-Site VPN connection, the Transit Gateway attachments and the Route 53 Resolver endpoints AWS bills per
hour while they exist. Data processed and transferred is billed per GB on top and not estimated, nor is a Direct
Connect port (the site's own contract)."""

from __future__ import annotations

from gpucluster.config.hybrid import HybridSpec

# us-east-1 list prices (AWS pricing pages; planning figures).
VPN_CONNECTION_USD_PER_HOUR = 0.05
"""A Site-to-Site VPN connection (two tunnels) per hour, standard tunnels."""
TGW_ATTACHMENT_USD_PER_HOUR = 0.05
"""A Transit Gateway attachment (VPC or VPN) per hour."""
RESOLVER_ENI_USD_PER_HOUR = 0.125
"""A Route 53 Resolver endpoint per elastic network interface per hour."""
RESOLVER_ENDPOINT_ENIS = 2
"""ENIs per Resolver endpoint: the network component places one in each of two zones."""


def hybrid_link_parts(hybrid: HybridSpec) -> list[tuple[str, float, str, str]]:
    """``(name, usd_per_hour, what the price is, key)`` of each billed part of the link."""
    link = hybrid.connectivity
    vpn = link.type in ("vpn-vgw", "vpn-tgw")
    # A new or an existing Transit Gateway gets this VPC's attachment; a VPN on it one more.
    attachments = 2 if link.type == "vpn-tgw" else 1 if link.type == "existing-tgw" or link.transit_gateway_id else 0
    out: list[tuple[str, float, str, str]] = []
    if vpn:
        tunnels = "large tunnels are billed higher and not estimated" if link.tunnel_bandwidth == "large" else "standard tunnels"
        out.append(
            (
                "Site-to-Site VPN connection",
                VPN_CONNECTION_USD_PER_HOUR,
                f"VPN pricing, per connection-hour ({tunnels})",
                "hybrid-vpn",
            )
        )
    if attachments:
        out.append(
            (
                f"{attachments} Transit Gateway attachment(s)",
                round(attachments * TGW_ATTACHMENT_USD_PER_HOUR, 3),
                "Transit Gateway pricing, per attachment-hour (data processed is extra)",
                "hybrid-tgw-attachments",
            )
        )
    if hybrid.dns is not None:
        enis = RESOLVER_ENDPOINT_ENIS * (2 if hybrid.dns.inbound else 1)
        out.append(
            (
                f"{enis} Route 53 Resolver endpoint ENIs",
                round(enis * RESOLVER_ENI_USD_PER_HOUR, 3),
                "Route 53 pricing, per Resolver endpoint ENI-hour (queries are extra)",
                "hybrid-resolver",
            )
        )
    return out
