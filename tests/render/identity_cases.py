"""Resolved identities the identity, PAM, SSSD and login render tests share (the types of
:mod:`gpucluster.resolve.slurm.identity`, built directly: what resolution decides is tested in tests/resolve)."""

from __future__ import annotations

import dataclasses

from gpucluster.resolve.slurm.identity import (
    DeclaredIdentity,
    DirectoryIdentity,
    PosixGroup,
    PosixUser,
    ResolvedIdentity,
    SessionGrant,
)

CAROL_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0b2ZmZWVkZmFjZWZlZWRmYWNlZmVlZGZhY2VmZWVk carol@laptop"
ALICE_ROLE = "arn:aws:iam::123456789012:role/alice"
# A PEM-shaped CA (public; sssctl does not open it): the e2e tests make a real one with openssl.
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
BIND_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/ldap-bind-AbCdEf"


def user(name: str, uid: int, groups: tuple[str, ...] = (), keys: tuple[str, ...] = (), admin: bool = False) -> PosixUser:
    grant = SessionGrant(ALICE_ROLE, "role", "alice", True) if name == "alice" else None
    return PosixUser(name, uid, uid, groups, "/bin/bash", f"/home/{name}", keys, admin, 50, grant)


ALICE = user("alice", 10001, ("hpc-admins", "vision"), admin=True)
BOB = user("bob", 10002, ("llm",))
CAROL = user("carol", 10003, ("llm",), (CAROL_KEY,))
GROUPS = (
    PosixGroup("hpc-admins", 5000, ("alice",)),
    PosixGroup("vision", 5001, ("alice",)),
    PosixGroup("llm", 5002, ("bob", "carol")),
    PosixGroup("alice", 10001, ()),
    PosixGroup("bob", 10002, ()),
    PosixGroup("carol", 10003, ()),
)
DECLARED = ResolvedIdentity(DeclaredIdentity((ALICE, BOB, CAROL), GROUPS), "hpc-admins")
DECLARED_NO_ADMIN = dataclasses.replace(DECLARED, admin_group=None)

LDAP = DirectoryIdentity(
    domain="directory",
    uris=("ldaps://ldap1.example.com", "ldaps://ldap2.example.com:636"),
    search_base="dc=example,dc=com",
    user_search_base="ou=People,dc=example,dc=com",
    group_search_base="ou=Groups,dc=example,dc=com",
    schema="rfc2307bis",
    bind_dn="cn=gpucluster-ro,ou=Service,dc=example,dc=com",
    bind_password_secret_arn=BIND_SECRET,
    ca_certificate_pem=CA_PEM,
    tls_reqcert="demand",
    start_tls=False,
    access_filter="(memberOf=cn=hpc-users,ou=Groups,dc=example,dc=com)",
    id_mapping=False,
    idmap_range=(200000, 2000200000, 200000),
    ssh_public_key_attribute="sshPublicKey",
    id_range=(1000, 59999),
)
AD = dataclasses.replace(
    LDAP,
    uris=("ldaps://ad.corp.example.com",),
    search_base="dc=corp,dc=example,dc=com",
    user_search_base="dc=corp,dc=example,dc=com",
    group_search_base="dc=corp,dc=example,dc=com",
    schema="ad",
    bind_dn="cn=gpucluster-ro,ou=Service,dc=corp,dc=example,dc=com",
    access_filter="(memberOf=cn=hpc-users,ou=Groups,dc=corp,dc=example,dc=com)",
    id_mapping=True,
    id_range=(200000, 2000199999),
)
DIRECTORY = ResolvedIdentity(LDAP, "hpc-admins")
DIRECTORY_AD = ResolvedIdentity(AD, "hpc-admins")
