"""Checks of ``gpucluster:slurm.loginNodes`` and ``gpucluster:slurm.home``, and the hybrid rule for the people
sections (pure: spec and catalog in, findings out), each finding with its code.

Login nodes live in private subnets: what faces clients is the load balancer, open only to the listed networks.
A hybrid cluster's site owns its users, logins and homes (docs/hybrid.md, "Security").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.slurm import SLURM_VERSION, UBUNTU_RELEASE, SlurmSpec
from gpucluster.config.slurm.home import THROUGHPUTS, HomeSpec
from gpucluster.config.slurm.login import LoginNodesSpec, LoginSshSpec
from gpucluster.facts.catalog import Catalog

SLURM = "gpucluster:slurm"


def spath(field: str) -> str:
    return f"{SLURM}.{field}"


def check_people_hybrid(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """With ``hybrid.controller`` the site's slurmctld is the controller; its users, logins and homes are the
    site's."""
    if spec.hybrid is None or spec.hybrid.controller is None:
        return
    fix = "remove it; cloud nodes resolve the site's users through hybrid.enableNssSlurm"
    why = "the site's slurmctld is the controller: its users, logins and homes are the site's"
    for key, value, code in (
        ("identity", slurm.identity, "identity-hybrid"),
        ("loginNodes", slurm.login_nodes, "login-hybrid"),
        ("home", slurm.home, "home-hybrid"),
    ):
        if value is not None:
            yield error(spath(key), why, fix, None, code)


def _unusable_keys(slurm: SlurmSpec) -> Iterator[Finding]:
    """Declared SSH keys open nothing on a cluster without SSH to its login nodes: people come in through Session
    Manager, whose shells forward no agent, so a key from a laptop reaches no node. A warning naming the users."""
    login = slurm.login_nodes
    if slurm.identity is None or (login is not None and login.ssh is not None):
        return
    for j, user in enumerate(slurm.identity.users):
        if user.ssh_public_keys:
            yield warning(
                f"gpucluster:slurm.identity.users[{j}].sshPublicKeys",
                f"user {user.name!r} has SSH keys, but this cluster has no SSH to its login nodes (people come in with "
                "Session Manager), so the keys open nothing",
                "add slurm.loginNodes.ssh (a load balancer open to your networks) to use them, or remove the keys",
                len(user.ssh_public_keys),
                "ssh-keys-without-ssh",
            )


def check_login(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    login = slurm.login_nodes
    if spec.hybrid is None or spec.hybrid.controller is None:
        yield from _unusable_keys(slurm)
    if login is None or (spec.hybrid is not None and spec.hybrid.controller is not None):
        return
    if slurm.identity is None:
        yield error(spath("loginNodes"), "login nodes without slurm.identity: nobody could log in but administrators "
                    "through IAM", "add slurm.identity (declared users or a directory), or remove loginNodes", None,
                    "login-without-identity")  # fmt: skip
    facts = catalog.get(login.instance_type)
    if facts is None:
        close = catalog.suggest(login.instance_type)
        yield error(spath("loginNodes.instanceType"), f"instance type {login.instance_type!r} is not in the instance "
                    "catalog", (f"did you mean {', '.join(close)}? " if close else "") + "e.g. m7i.2xlarge",
                    login.instance_type, "unknown-instance-type")  # fmt: skip
    elif facts.accelerator_count:
        yield warning(spath("loginNodes.instanceType"), f"login nodes run editors, builds and job submission, but "
                      f"{login.instance_type} has {facts.accelerator_count} {facts.accelerator_model} accelerators "
                      "billed while idle", "use a CPU type such as m7i.2xlarge; run GPU work as jobs",
                      login.instance_type, "login-accelerated")  # fmt: skip
    if login.image_id:
        yield warning(spath("loginNodes.imageId"), f"gpucluster cannot tell which Slurm the custom image "
                      f"{login.image_id} installs; login nodes must be Ubuntu {UBUNTU_RELEASE} (Slurm "
                      f"{SLURM_VERSION}) like the head node", f"leave imageId unset for Canonical's Ubuntu "
                      f"{UBUNTU_RELEASE} image", login.image_id, "slurm-custom-image")  # fmt: skip
    yield from _login_subnets(login, spec)
    if login.ssh is not None:
        yield from _ssh(login.ssh, spec)


def _login_subnets(login: LoginNodesSpec, spec: ClusterSpec) -> Iterator[Finding]:
    net = spec.network
    fix = "use a private subnet of network.subnets; expose SSH with loginNodes.ssh"
    for k, subnet in enumerate(login.subnet_ids):
        if net.create_vpc:
            yield error(spath(f"loginNodes.subnetIds[{k}]"), "login nodes live in the new VPC's private subnets, "
                        "which gpucluster creates: a subnet id names another network", "remove loginNodes.subnetIds "
                        "(the head node's subnet is the default), or set network.vpcId and network.subnets", subnet,
                        "login-public-subnet")  # fmt: skip
        elif net.subnet_zone(subnet) is None:
            yield error(spath(f"loginNodes.subnetIds[{k}]"), f"subnet {subnet} is not one of network.subnets (the "
                        "private ones): login nodes live in private subnets; the load balancer is what faces "
                        "clients", fix, subnet, "login-public-subnet")  # fmt: skip


def _ssh(ssh: LoginSshSpec, spec: ClusterSpec) -> Iterator[Finding]:
    at = "loginNodes.ssh"
    if not ssh.allowed_cidrs:
        yield error(spath(f"{at}.allowedCidrs"), "SSH to the login nodes would be open to no one (internal) or to "
                    "the whole internet (internet-facing): no client network is listed",
                    "list the client networks, e.g. allowedCidrs: [203.0.113.0/24]", None,
                    "login-ssh-no-cidrs")  # fmt: skip
    for k, cidr in enumerate(ssh.allowed_cidrs):
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            yield error(spath(f"{at}.allowedCidrs[{k}]"), f"{cidr!r} is not a network in CIDR notation (host bits "
                        "must be zero)", "write e.g. 203.0.113.0/24 or 2001:db8::/32", cidr,
                        "login-ssh-cidr-invalid")  # fmt: skip
            continue
        if network.prefixlen == 0:
            yield error(spath(f"{at}.allowedCidrs[{k}]"), f"{cidr} is the whole internet: policy no-public-ingress "
                        "refuses SSH open to it", "name your networks, e.g. 203.0.113.0/24", cidr,
                        "login-ssh-anywhere")  # fmt: skip
    net = spec.network
    public = ssh.public_subnet_ids
    if ssh.scheme == "internet-facing" and not net.create_vpc and not public:
        yield error(spath(f"{at}.publicSubnetIds"), "an internet-facing load balancer in your own VPC needs its "
                    "public subnets (network.subnets are private)", "list a public subnet per login node zone",
                    None, "login-ssh-public-subnets")  # fmt: skip
    elif public and (ssh.scheme != "internet-facing" or net.create_vpc):
        yield error(spath(f"{at}.publicSubnetIds"), "publicSubnetIds are only used by an internet-facing load "
                    "balancer in your own VPC (network.vpcId)", "remove publicSubnetIds, or set scheme: "
                    "internet-facing with network.vpcId", None, "login-ssh-public-subnets")  # fmt: skip
    else:
        for k, subnet in enumerate(public):
            if net.subnet_zone(subnet) is not None:
                yield error(spath(f"{at}.publicSubnetIds[{k}]"), f"subnet {subnet} is listed in network.subnets, "
                            "the cluster's private subnets", "name a public subnet (a route to an internet "
                            "gateway) of each login node zone", subnet, "login-ssh-public-subnets")  # fmt: skip


def check_home(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if spec.hybrid is not None and spec.hybrid.controller is not None:
        return
    home = slurm.home if slurm.home is not None else HomeSpec()
    identity = slurm.identity
    if identity is None and slurm.home is not None and home.enabled:
        yield warning(spath("home"), "home is set but slurm.identity is not: no shared /home is made without users",
                      "add slurm.identity, or remove home", None, "home-without-identity")  # fmt: skip
    valid = THROUGHPUTS[home.deployment_type]
    if home.throughput_capacity not in valid:
        yield error(spath("home.throughputCapacity"), f"{home.throughput_capacity} MB/s is not a throughput of "
                    f"{home.deployment_type}", f"use one of {', '.join(map(str, valid))}", home.throughput_capacity,
                    "home-throughput")  # fmt: skip
    if identity is None or not home.enabled:
        return
    if identity.directory is not None and "default_user_quota_gib" in home.model_fields_set and home.default_user_quota_gib:
        yield warning(spath("home.defaultUserQuotaGib"), "FSx for OpenZFS quotas are per uid and a directory's uids "
                      "are not known at deploy: no per-user quota will apply", "leave it out, or declare the users",
                      home.default_user_quota_gib, "quota-directory")  # fmt: skip
    quotas = [("home.defaultUserQuotaGib", home.default_user_quota_gib)]
    quotas += [(f"identity.users[{j}].homeQuotaGib", u.home_quota_gib) for j, u in enumerate(identity.users)]
    for field, quota in quotas:
        if quota is not None and quota > home.storage_capacity_gib:
            yield warning(spath(field), f"a quota of {quota} GiB is more than /home's {home.storage_capacity_gib} "
                          "GiB: it never binds", "lower the quota or raise home.storageCapacityGib", quota,
                          "quota-over-capacity")  # fmt: skip
