"""How an on-premises site reaches the cluster: the link (VPN, Transit Gateway, Direct Connect), names across
the sites (Route 53 Resolver) and the site's short-lived AWS credentials; with the value checks the hybrid
section shares. Part of the ``hybrid`` section (:mod:`gpucluster.config.hybrid`)."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gpucluster.config.base import FIX_MARK, SpecModel
from gpucluster_agents.contract.grammar import PARTITION_NAME_RE as PARTITION_NAME_RE

HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
DOMAIN_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$")
ABS_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+-]*$")
PEM_LINE_RE = re.compile(r"[A-Za-z0-9+/=]{1,76}|-----END CERTIFICATE-----|-----BEGIN CERTIFICATE-----")
"""A line inside a PEM bundle: base64 (RFC 7468 lines are at most 64 characters; 76 tolerates MIME wrapping) or a
marker between two certificates."""

NOT_PUBLIC = tuple(
    ipaddress.IPv4Network(n)
    for n in ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16")
)
"""Addresses a customer gateway can never have: private (RFC 1918), shared (RFC 6598), loopback, link-local and
"this network". The documentation ranges (RFC 5737) pass, so examples can use them."""


def check_cidr(value: str, field: str) -> str:
    """An IPv4 network in CIDR form with no host bits set (``10.20.0.0/16``), returned normalized."""
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(
            f"{field} {value!r} is not an IPv4 network: {exc}.{FIX_MARK}write it as address/prefix with no host bits, "
            "e.g. 10.20.0.0/16"
        ) from None
    return str(net)


def check_ipv4(value: str, field: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise ValueError(f"{field} {value!r} is not an IPv4 address.{FIX_MARK}write a dotted quad, e.g. 10.20.0.10") from None


def check_abs_path(value: str, field: str) -> str:
    """Paths land in slurm.conf, systemd units and an AWS config file: absolute, no blanks or shell characters."""
    if not ABS_PATH_RE.match(value) or "//" in value or "/../" in value + "/":
        raise ValueError(
            f"{field} {value!r} is not a plain absolute path.{FIX_MARK}use letters, digits and . _ - + / only, starting with /"
        )
    return value


ConnectivityType = Literal["vpn-vgw", "vpn-tgw", "existing-tgw", "direct-connect"]


class ConnectivitySpec(SpecModel):
    """How the site reaches the VPC: a Site-to-Site VPN (on a virtual private gateway or a new Transit Gateway),
    a Transit Gateway you already have, or a Direct Connect path you already have."""

    type: ConnectivityType = "vpn-tgw"
    """``vpn-vgw``: a VPN on a virtual private gateway attached to the VPC (simplest; up to 1.25 Gbit/s per
    tunnel). ``vpn-tgw``: a new Transit Gateway with a VPN attachment (ECMP across tunnels with BGP, ``large``
    tunnels). ``existing-tgw``: attach the VPC to ``transitGatewayId`` and route the site's CIDRs to it.
    ``direct-connect``: the site's CIDRs are already routed to ``transitGatewayId`` or ``vpnGatewayId`` over
    Direct Connect; only routes and security groups are created. Default ``vpn-tgw``."""

    customer_gateway_ip: str | None = None
    """The site's VPN device's public IPv4 address. Required for the VPN types."""

    bgp_asn: int | None = Field(default=None, ge=1, le=4294967294)
    """The site's BGP ASN: routes are exchanged by BGP. Default: none, and the VPN uses static routes to
    ``onPremCidrs`` (no ECMP)."""

    amazon_side_asn: int = Field(default=64512, ge=64512, le=4294967294)
    """The ASN of the AWS side (virtual private gateway or new Transit Gateway): 64512–65534 or
    4200000000–4294967294. Default 64512."""

    tunnel_bandwidth: Literal["standard", "large"] = "standard"
    """``standard`` (up to 1.25 Gbit/s per tunnel) or ``large`` (up to 5 Gbit/s; Transit Gateway only).
    Default ``standard``."""

    transit_gateway_id: str | None = Field(default=None, pattern=r"^tgw-[0-9a-f]{8,17}$")
    """The existing Transit Gateway (``existing-tgw``, or ``direct-connect`` over a transit VIF)."""

    vpn_gateway_id: str | None = Field(default=None, pattern=r"^vgw-[0-9a-f]{8,17}$")
    """The existing virtual private gateway (``direct-connect`` over a private VIF)."""

    @field_validator("customer_gateway_ip")
    @classmethod
    def _cgw(cls, value: str | None) -> str | None:
        if value is None:
            return None
        address = ipaddress.IPv4Address(check_ipv4(value, "customerGatewayIp"))
        if any(address in net for net in NOT_PUBLIC) or address.is_multicast or address.is_reserved:
            raise ValueError(
                f"customerGatewayIp {value!r} is not a public address.{FIX_MARK}give the VPN device's public IPv4 "
                "address (the one the internet sees; behind NAT, the NAT's)"
            )
        return str(address)

    @model_validator(mode="after")
    def _needs(self) -> ConnectivitySpec:
        if self.type in ("vpn-vgw", "vpn-tgw") and self.customer_gateway_ip is None:
            raise ValueError(
                f"connectivity type {self.type} needs customerGatewayIp.{FIX_MARK}set customerGatewayIp to the site "
                "VPN device's public IPv4 address"
            )
        if self.type == "existing-tgw" and self.transit_gateway_id is None:
            raise ValueError(f"connectivity type existing-tgw needs transitGatewayId.{FIX_MARK}set transitGatewayId: tgw-…")
        if self.type == "direct-connect" and (self.transit_gateway_id is None) == (self.vpn_gateway_id is None):
            raise ValueError(
                f"connectivity type direct-connect needs exactly one of transitGatewayId and vpnGatewayId.{FIX_MARK}"
                "name the gateway your Direct Connect gateway is associated with"
            )
        return self


class DnsSpec(SpecModel):
    """Names across the sites: Route 53 Resolver endpoints so the VPC resolves the site's domain and the site
    resolves the cluster's private names."""

    on_prem_domain: str
    """The site's DNS domain, e.g. ``hpc.example.internal``: queries for it are forwarded to ``onPremResolvers``.
    Required."""

    on_prem_resolvers: tuple[str, ...] = Field(min_length=1, max_length=6)
    """The site's DNS servers (IPv4, inside ``onPremCidrs``). Required: at least one."""

    inbound: bool = True
    """Also create an inbound endpoint the site's DNS servers forward the cluster's names to. Default true."""

    @field_validator("on_prem_domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        value = value.rstrip(".").lower()
        if not DOMAIN_RE.match(value) or len(value) > 253:
            raise ValueError(f"onPremDomain {value!r} is not a DNS domain.{FIX_MARK}write it like hpc.example.internal")
        return value

    @field_validator("on_prem_resolvers")
    @classmethod
    def _resolvers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_ipv4(v, "onPremResolvers") for v in value)


class CredentialsSpec(SpecModel):
    """How software at the site gets AWS credentials: short-lived ones only, never an access key."""

    type: Literal["rolesanywhere", "ssm"] = "rolesanywhere"
    """``rolesanywhere``: IAM Roles Anywhere; the site's certificate authority is the trust anchor and
    ``aws_signing_helper`` turns the controller's certificate into a session. ``ssm``: an SSM hybrid activation
    registers the controller as a managed instance. Default ``rolesanywhere``."""

    ca_certificate_pem: str | None = None
    """The site CA's certificate (PEM, at most 8,000 characters) for the trust anchor. One of this and
    ``acmPcaArn`` is required with ``rolesanywhere``. Public CAs cannot be trust anchors."""

    acm_pca_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:acm-pca:[a-z0-9-]+:\d{12}:certificate-authority/[0-9a-f-]{36}$"
    )
    """An AWS Private CA that issues the site's certificates, as the trust anchor instead of a PEM."""

    certificate_cn: str = "slurmctld"
    """The common name of the controller's certificate: the role trusts only sessions from it. For EKS Hybrid Nodes
    (``kubernetes``), the prefix of the nodes' certificates: each is named ``<certificateCn>-<node name>`` and the
    hybrid node role trusts no other. Default ``slurmctld``."""

    duration_seconds: int = Field(default=3600, ge=900, le=43200)
    """Session length (900–43200). Default 3600; the SDK renews before expiry."""

    signing_helper_path: str = "/usr/local/bin/aws_signing_helper"
    """Absolute path of ``aws_signing_helper`` on the controller (slurmctld runs programs with no PATH).
    Default ``/usr/local/bin/aws_signing_helper``."""

    certificate_path: str = "/etc/gpucluster/pki/slurmctld.crt"
    """The controller's certificate, readable by ``SlurmUser`` only. Default ``/etc/gpucluster/pki/slurmctld.crt``."""

    private_key_path: str = "/etc/gpucluster/pki/slurmctld.key"
    """Its private key, readable by ``SlurmUser`` only. Default ``/etc/gpucluster/pki/slurmctld.key``."""

    @field_validator("ca_certificate_pem")
    @classmethod
    def _pem(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        lines = text.split("\n")
        if not (
            lines[0] == "-----BEGIN CERTIFICATE-----"
            and lines[-1] == "-----END CERTIFICATE-----"
            and len(lines) > 2
            and all(PEM_LINE_RE.fullmatch(line) for line in lines[1:-1])
        ):
            raise ValueError(
                f"caCertificatePem is not a PEM certificate: it must be base64 lines between the BEGIN and END "
                f"lines.{FIX_MARK}paste the CA certificate from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----"
            )
        if len(text) > 8000:
            raise ValueError(
                f"caCertificatePem is {len(text)} characters; a trust anchor takes at most 8000.{FIX_MARK}use the issuing CA alone"
            )
        return text + "\n"

    @field_validator("certificate_cn")
    @classmethod
    def _cn(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
            raise ValueError(f"certificateCn {value!r} is not a plain common name.{FIX_MARK}use letters, digits, . _ -")
        return value

    @field_validator("signing_helper_path", "certificate_path", "private_key_path")
    @classmethod
    def _paths(cls, value: str, info: ValidationInfo) -> str:
        return check_abs_path(value, str(info.field_name))

    @model_validator(mode="after")
    def _anchor(self) -> CredentialsSpec:
        if self.type == "rolesanywhere" and (self.ca_certificate_pem is None) == (self.acm_pca_arn is None):
            raise ValueError(
                f"credentials type rolesanywhere needs exactly one of caCertificatePem and acmPcaArn.{FIX_MARK}"
                "paste the site CA's certificate in caCertificatePem, or name an AWS Private CA in acmPcaArn"
            )
        return self
