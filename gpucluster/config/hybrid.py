"""Hybrid section of the spec: an on-premises site that bursts into this cluster's AWS node groups.

Two shapes share one section. **Slurm**: the site's own slurmctld stays the controller; the cloud node groups
named in ``burstNodeGroups`` become ``State=CLOUD`` nodes of a bundle the site includes next to its slurm.conf
(``gpucluster bundle``), launched by the gpucluster agent running on the site's controller with short-lived
credentials (IAM Roles Anywhere or an SSM hybrid activation, never an access key), and joining that controller
over the link this section describes. **Kubernetes**: the site's GPU servers join this cluster's EKS control
plane as EKS Hybrid Nodes (``kubernetes``), each site in its own Kueue flavor.

Only the shape of each value is checked here (field validators); relations between fields and with the rest
of the cluster (CIDR overlaps, version skew, partition names, node groups) are
:mod:`gpucluster.config.checks.hybrid`'s.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gpucluster.config.base import FIX_MARK, SpecModel, check_name

SLURM_VERSIONS = ("22.05", "23.02", "23.11", "24.05", "24.11", "25.05")
"""Slurm releases a site's controller may run: the ones gpucluster renders Slurm files for
(:data:`gpucluster.render.slurm.versions.SUPPORTED` is this tuple)."""

HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
DOMAIN_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$")
ABS_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+-]*$")
PARTITION_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

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


class ControllerSpec(SpecModel):
    """The site's slurmctld, which stays the controller of the cloud nodes."""

    host: str
    """The controller's host name as slurm.conf's ``SlurmctldHost`` names it, e.g. ``slurmctl01``. Required."""

    address: str
    """The controller's address, routable from the VPC over the link (no NAT between the sites): cloud nodes
    fetch their configuration from it (``slurmd --conf-server``). Required; inside ``onPremCidrs``."""

    port: int = Field(default=6817, ge=1, le=65535)
    """slurmctld's port (``SlurmctldPort``). Default 6817."""

    slurm_version: str
    """The controller's Slurm release, ``YY.MM`` (e.g. ``22.05``): every file of the bundle is rendered for it,
    and the cloud nodes' slurmd must be within its window (the same release or up to two older ones, never
    newer). Required."""

    cloud_slurm_version: str | None = None
    """The slurmd release on the cloud nodes' image when the node groups name their own ``imageId``. Default:
    none, and gpucluster picks the Ubuntu LTS whose slurm-wlm the controller accepts (22.04's 21.08 for a 22.05
    or 23.02 controller, 24.04's 23.11 for 23.11 to 24.11); 25.05 needs your own image."""

    slurmdbd_port: int | None = Field(default=None, ge=1, le=65535)
    """The site's slurmdbd port (usually 6819) when cloud jobs run ``sacct``/``sreport`` against it: opens that
    port from the cloud nodes to the controller. Default: none (no path to slurmdbd)."""

    partitions: tuple[str, ...] = ()
    """The site's own partition names. The cloud partitions must be named differently. Default: none listed."""

    conf_dir: str = "/etc/slurm"
    """Directory of the site's slurm.conf; the bundle's ``cloud.conf`` goes next to it (configless ships an
    ``Include``d file only when it sits beside slurm.conf). Default ``/etc/slurm``."""

    install_dir: str = "/opt/gpucluster"
    """Where the bundle installs the agent (its own virtual environment) on the controller. Default
    ``/opt/gpucluster``."""

    slurm_user: str = "slurm"
    """``SlurmUser`` of the site: the agent runs as it. Default ``slurm``."""

    slurm_uid: int = Field(default=64030, ge=1, le=4294967294)
    """UID of ``SlurmUser`` at the site; cloud nodes create the user with the same UID. Default 64030 (Debian's)."""

    slurm_gid: int = Field(default=64030, ge=1, le=4294967294)
    """GID of ``SlurmUser``'s group at the site. Default 64030."""

    munge_uid: int = Field(default=64031, ge=1, le=4294967294)
    """UID of ``munge`` at the site. Default 64031."""

    munge_gid: int = Field(default=64031, ge=1, le=4294967294)
    """GID of ``munge`` at the site. Default 64031."""

    resume_program: str | None = None
    """The site's current ``ResumeProgram`` when it already powers its own nodes up and down: the agent
    becomes ``ResumeProgram`` and hands it every hostlist that is not a cloud node. Default: none."""

    suspend_program: str | None = None
    """The site's current ``SuspendProgram``, handed the non-cloud hostlists like ``resumeProgram``. Default:
    none."""

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not HOSTNAME_RE.match(value) or len(value) > 253:
            raise ValueError(
                f"controller host {value!r} is not a host name.{FIX_MARK}use the name slurm.conf's SlurmctldHost has, "
                "e.g. slurmctl01"
            )
        return value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        return check_ipv4(value, "controller address")

    @field_validator("slurm_version", "cloud_slurm_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is None:
            return None
        short = ".".join(value.strip().split(".")[:2])
        if short not in SLURM_VERSIONS:
            raise ValueError(
                f"Slurm {value!r} is not a release gpucluster renders for.{FIX_MARK}use one of {', '.join(SLURM_VERSIONS)} "
                "(YY.MM; a maintenance release such as 23.11.4 counts as 23.11)"
            )
        return short

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not PARTITION_NAME_RE.match(name):
                raise ValueError(f"partition {name!r} is not a Slurm partition name.{FIX_MARK}use letters, digits, _ . -")
        return value

    @field_validator("conf_dir", "install_dir", "resume_program", "suspend_program")
    @classmethod
    def _paths(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_abs_path(value, str(info.field_name))

    @field_validator("slurm_user")
    @classmethod
    def _user(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
            raise ValueError(f"slurmUser {value!r} is not a user name.{FIX_MARK}use lowercase letters, digits, _ and -")
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
    """The common name of the controller's certificate: the role trusts only sessions from it. Default
    ``slurmctld``."""

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
        if not (text.startswith("-----BEGIN CERTIFICATE-----") and text.endswith("-----END CERTIFICATE-----")):
            raise ValueError(
                f"caCertificatePem is not a PEM certificate.{FIX_MARK}paste the CA certificate from "
                "-----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----"
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


class HybridNodesSpec(SpecModel):
    """EKS Hybrid Nodes: the site's GPU servers join this cluster's EKS control plane."""

    remote_node_cidrs: tuple[str, ...] = Field(min_length=1)
    """The site's node networks (RFC 1918 or 100.64.0.0/10, inside ``onPremCidrs``). Required."""

    remote_pod_cidrs: tuple[str, ...] = ()
    """The pod networks the site's CNI hands out (needed for webhooks on hybrid nodes). Default: none."""

    cni: Literal["cilium", "calico"] = "cilium"
    """The CNI on the hybrid nodes (the VPC CNI does not run there). Default ``cilium``."""

    gpu_type: str = "h100"
    """The site's GPU model as Kueue's resource flavor names it. Default ``h100``."""

    gpus: int = Field(default=0, ge=0, le=100000)
    """GPUs the site contributes to Kueue's on-prem flavor (its quota). Default 0."""

    node_os: Literal["ubuntu24", "ubuntu22", "rhel9", "al2023"] = "ubuntu24"
    """The hybrid nodes' OS, for the rendered ``nodeadm`` steps. Default ``ubuntu24``."""

    @field_validator("remote_node_cidrs", "remote_pod_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return tuple(check_cidr(v, str(info.field_name)) for v in value)


class HybridSpec(SpecModel):
    """An on-premises site bursting into this cluster (Slurm) or joining its EKS control plane (Kubernetes)."""

    site: str = "onprem"
    """The site's short name: the on-prem Kueue flavor, the topology switch tree and tags carry it. Default
    ``onprem``."""

    on_prem_cidrs: tuple[str, ...] = Field(min_length=1)
    """The site's networks that talk to the cluster (controller, login nodes, DNS, hybrid nodes). Required;
    must not overlap the VPC or each other."""

    controller: ControllerSpec | None = None
    """The site's slurmctld (Slurm bursting). Default: none (no Slurm bursting)."""

    connectivity: ConnectivitySpec
    """The link between the site and the VPC. Required."""

    dns: DnsSpec | None = None
    """Route 53 Resolver endpoints for names across the sites. Default: none (addresses only)."""

    credentials: CredentialsSpec
    """Short-lived AWS credentials for the site's controller (and hybrid nodes). Required."""

    login_node_cidrs: tuple[str, ...] = ()
    """The site's login nodes, where users run ``srun``: cloud nodes open connections back to them on
    ``srunPortRange``. Default: none."""

    srun_port_range: str = "60001-63000"
    """``SrunPortRange`` of the site (``low-high``), which the cloud nodes' security group opens towards
    ``loginNodeCidrs``. Default ``60001-63000``."""

    burst_node_groups: tuple[str, ...] = ()
    """The node groups (``scheduler: slurm``) the site bursts into. Default: every Slurm node group."""

    fabric: Literal["roce", "infiniband"] = "roce"
    """The site's GPU fabric; its nodes get the matching NCCL environment and cloud nodes EFA's. A job never
    spans the two. Default ``roce``."""

    enable_nss_slurm: bool = True
    """Resolve job users on cloud nodes through slurmstepd (``LaunchParameters=enable_nss_slurm``) instead of
    a directory service reached over the link. Default true."""

    kubernetes: HybridNodesSpec | None = None
    """EKS Hybrid Nodes for the site's Kubernetes GPU servers. Default: none."""

    @field_validator("site")
    @classmethod
    def _site(cls, value: str) -> str:
        return check_name(value, "site name")

    @field_validator("on_prem_cidrs", "login_node_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return tuple(check_cidr(v, str(info.field_name)) for v in value)

    @field_validator("srun_port_range")
    @classmethod
    def _ports(cls, value: str) -> str:
        m = re.fullmatch(r"(\d{4,5})-(\d{4,5})", value)
        if not m or not (1024 <= int(m[1]) < int(m[2]) <= 65535):
            raise ValueError(
                f"srunPortRange {value!r} is not a port range.{FIX_MARK}write low-high with 1024 ≤ low < high ≤ 65535, "
                "e.g. 60001-63000"
            )
        return value

    @property
    def srun_ports(self) -> tuple[int, int]:
        low, high = self.srun_port_range.split("-")
        return int(low), int(high)

    @model_validator(mode="after")
    def _something(self) -> HybridSpec:
        if self.controller is None and self.kubernetes is None:
            raise ValueError(
                f"the hybrid section names neither a controller (Slurm) nor kubernetes (EKS Hybrid Nodes).{FIX_MARK}"
                "add controller: for a Slurm site, kubernetes: for a Kubernetes site"
            )
        return self
