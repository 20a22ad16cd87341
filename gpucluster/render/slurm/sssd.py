"""A directory's users on every node: SSSD over LDAP or Active Directory.

``templates/slurm/sssd.conf.j2`` is rendered to ``/etc/gpucluster/sssd.conf.in`` (0600) **without** the bind password:
at boot root's ``gpucluster-identity sssd-conf`` (:mod:`gpucluster_agents.boot.identity`) reads the password from
Secrets Manager, adds ``ldap_default_authtok_type = password`` and ``ldap_default_authtok`` after
``ldap_default_bind_dn`` and writes ``/etc/sssd/sssd.conf`` 0600 root:root. ``obfuscated_password`` is never used:
sss_obfuscate(8) says it gives no real security. The directory's CA goes to ``/etc/gpucluster/directory-ca.pem``
(public). Who may log in is ``ldap_access_filter`` (``access_provider = ldap``), decided in PAM's account phase: ``id``
and ``getent`` still resolve users outside it. With ``ldap_id_mapping`` (AD) the id range is rendered explicitly, so
every node maps a SID to the same uid. ``min_id``/``max_id`` bound the ids SSSD takes from the directory (``idRange``:
by default the declared users' 1000–59999, or the id mapping's range), so a directory entry with a system account's
uid or gid (slurm's 64030, disk's 6) is not resolved. Homes are always ``/home/<user>`` (Session Manager's Run As sets that
``HOME``). Values are checked at load (config/checks/slurm/identity.py); here each one that lands on an ``key = value``
line is refused if it holds a line break (a line of its own would be a key of its own).
"""

from __future__ import annotations

from gpucluster.render.core import WriteFile, render
from gpucluster.render.slurm.names import AGENT_LIB
from gpucluster.resolve.slurm.identity import DirectoryIdentity, ResolvedIdentity

SSSD_TEMPLATE = "/etc/gpucluster/sssd.conf.in"
SSSD_CONF = "/etc/sssd/sssd.conf"
DIRECTORY_CA = "/etc/gpucluster/directory-ca.pem"
# Ubuntu 24.04: sssd-ldap (the LDAP provider, sssd-common with sss_ssh_authorizedkeys), the NSS and PAM modules.
SSSD_PACKAGES = ("sssd-ldap", "libnss-sss", "libpam-sss")


def _line(name: str, value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError(f"directory {name} holds a line break; refusing to render it into sssd.conf")
    return value


def sssd_conf(cluster: str, directory: DirectoryIdentity) -> str:
    """The sssd.conf template of ``directory`` (no password: see the module)."""
    ssh = directory.ssh_public_key_attribute is not None
    return render(
        "slurm/sssd.conf.j2",
        cluster=cluster,
        services="nss, pam, ssh" if ssh else "nss, pam",
        ssh=ssh,
        domain=_line("domain", directory.domain),
        access_filter=_line("accessFilter", directory.access_filter),
        uris=", ".join(_line("uris", u) for u in directory.uris),
        search_base=_line("searchBase", directory.search_base),
        user_search_base=_line("userSearchBase", directory.user_search_base),
        group_search_base=_line("groupSearchBase", directory.group_search_base),
        schema=directory.schema,
        bind_dn=_line("bindDn", directory.bind_dn),
        ca_file=DIRECTORY_CA,
        tls_reqcert=directory.tls_reqcert,
        start_tls="true" if directory.start_tls else "false",
        id_mapping="true" if directory.id_mapping else "false",
        idmap_range=directory.idmap_range if directory.id_mapping else None,
        id_range=directory.id_range,
        ad=directory.schema == "ad",
        ssh_attribute=_line("sshPublicKeyAttribute", directory.ssh_public_key_attribute or "") or None,
    )


def sssd_files(cluster: str, directory: DirectoryIdentity) -> tuple[WriteFile, ...]:
    """The template (0600) and the CA (0644) a node needs before ``gpucluster-identity sssd-conf`` runs."""
    return (
        WriteFile(SSSD_TEMPLATE, sssd_conf(cluster, directory), "0600"),
        WriteFile(DIRECTORY_CA, directory.ca_certificate_pem, "0644"),
    )


IDENTITY_HELPER = "/usr/local/sbin/gpucluster-identity"
HELPER_IN_PACKAGE = f"{AGENT_LIB}/gpucluster_agents/boot/identity.py"


def identity_helper_file() -> WriteFile:
    """``gpucluster-identity``: runs :mod:`gpucluster_agents.boot.identity` from the node package that
    ``gpucluster-aws install-agent`` installs (checked against its sha256) — not from the user data, whose 16 KB a
    compute node's other parts nearly fill."""
    return WriteFile(IDENTITY_HELPER, f'#!/bin/sh\nexec /usr/bin/python3 -I {HELPER_IN_PACKAGE} "$@"\n', "0755")


def directory_of(identity: ResolvedIdentity | None) -> DirectoryIdentity | None:
    if identity is None or not isinstance(identity.source, DirectoryIdentity):
        return None
    return identity.source


def directory_files(cluster: str, identity: ResolvedIdentity | None) -> tuple[WriteFile, ...]:
    """A node's SSSD files and the helper that completes them at boot (none without a directory)."""
    directory = directory_of(identity)
    if directory is None:
        return ()
    return (*sssd_files(cluster, directory), identity_helper_file())


def directory_setup(identity: ResolvedIdentity | None) -> dict[str, object]:
    """The setup scripts' values for the directory step (``parts.sssd_setup``); ``directory`` None: no step."""
    directory = directory_of(identity)
    return {
        "directory": directory is not None,
        "identity_helper": IDENTITY_HELPER,
        "bind_secret": directory.bind_password_secret_arn if directory else "",
    }
