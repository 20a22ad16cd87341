"""The people of a Slurm cluster in the plan: its login nodes, its users or directory, its ``/home`` and
the ``no-root-sessions`` rule's verdict — the summary's Slurm rows and the plan JSON's ``people``.

Read from the plan JSON alone (resources and rendered files), so a saved plan shows the same: the login group is
the Auto Scaling group tagged ``gpucluster:role=login`` (named ``<cluster>-login``); its SSH endpoint the network load
balancer of that name and the CIDRs admitted on port 22; the declared users the users file every node fetches
(``/etc/gpucluster/users.json``) with the admin group of ``/etc/sudoers.d/60-gpucluster-admins``; a directory
the rendered ``sssd.conf`` template; the home the FSx for OpenZFS file system and volume with their quotas.
"""

from __future__ import annotations

import configparser
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpucluster.policy.evaluate import RULES, evaluate, from_plan
from gpucluster.policy.session_rules import NO_ROOT_SESSIONS, TAG_ROLE
from gpucluster_agents.contract import users as users_contract

ASG = "aws:autoscaling/group:Group"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
NLB = "aws:lb/loadBalancer:LoadBalancer"
INGRESS = ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "aws:ec2/securityGroupRule:SecurityGroupRule")
OPENZFS = "aws:fsx/openZfsFileSystem:OpenZfsFileSystem"
OPENZFS_VOLUME = "aws:fsx/openZfsVolume:OpenZfsVolume"
USERS_FILE = users_contract.USERS_PATH
ADMINS_FILE = "/etc/sudoers.d/60-gpucluster-admins"
SSSD_TEMPLATE = "/etc/gpucluster/sssd.conf.in"
_ADMIN = re.compile(r"^%(\S+)\s", re.M)


def _of_type(doc: Mapping[str, Any], *types: str) -> list[Mapping[str, Any]]:
    return [r for r in doc.get("resources") or [] if r.get("type") in types and r.get("custom", True)]


def _inputs(r: Mapping[str, Any]) -> Mapping[str, Any]:
    value = r.get("inputs")
    return value if isinstance(value, Mapping) else {}


def _role_tagged(r: Mapping[str, Any], role: str) -> bool:
    i = _inputs(r)
    tags = [i.get("tags"), *[s.get("tags") for s in i.get("tagSpecifications") or [] if isinstance(s, Mapping)]]
    tags += [{t.get("key"): t.get("value")} for t in i.get("tags") or [] if isinstance(t, Mapping) and "key" in t]
    return any(isinstance(t, Mapping) and t.get(TAG_ROLE) == role for t in tags)


def _files(doc: Mapping[str, Any], suffix: str) -> list[str]:
    return [str(text) for path, text in (doc.get("files") or {}).items() if str(path).endswith(suffix)]


def login(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The login group: name, count, instance type, SSH (scheme and CIDRs) or None (Session Manager only)."""
    groups = [g for g in _of_type(doc, ASG) if _role_tagged(g, "login") or str(_inputs(g).get("name", "")).endswith("-login")]
    if not groups:
        return None
    g = _inputs(groups[0])
    templates = [t for t in _of_type(doc, LT) if _role_tagged(t, "login")]
    kind = _inputs(templates[0]).get("instanceType") if templates else None
    name = str(g.get("name") or groups[0].get("name"))
    nlbs = [n for n in _of_type(doc, NLB) if _inputs(n).get("name") == name or str(n.get("name", "")).endswith("-login")]
    ssh = None
    if nlbs:
        scheme = "internal" if _inputs(nlbs[0]).get("internal") in (True, "true") else "internet-facing"
        ssh = {
            "loadBalancer": _inputs(nlbs[0]).get("name") or nlbs[0].get("name"),
            "scheme": scheme,
            "allowedCidrs": _ssh_cidrs(doc),
        }
    count = g.get("desiredCapacity", g.get("minSize"))
    return {"asgName": name, "count": count, "instanceType": kind, "ssh": ssh}


def _ssh_cidrs(doc: Mapping[str, Any]) -> list[str]:
    """The CIDRs admitted to TCP 22 (only the load balancer's group admits port 22 by CIDR)."""
    out: set[str] = set()
    for r in _of_type(doc, *INGRESS):
        i = _inputs(r)
        if i.get("type", "ingress") == "ingress" and i.get("fromPort") == 22:
            out |= {str(c) for c in [i.get("cidrIpv4"), i.get("cidrIpv6"), *(i.get("cidrBlocks") or [])] if c}
    return sorted(out)


def users(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The declared users of the users file every node fetches (``/etc/gpucluster/users.json`` in the plan's
    ``users/users.json`` object), read by the users contract's own parser."""
    admins = {m for text in _files(doc, ADMINS_FILE) for m in _ADMIN.findall(text)}
    out = []
    for text in _files(doc, USERS_FILE)[:1]:
        try:
            declared = users_contract.parse(json.loads(text))
        except ValueError:
            continue
        for u in declared.users:  # by name, as the file lists them
            member = list(u.groups)
            out.append({"name": u.name, "uid": u.uid, "gid": u.gid, "groups": member, "admin": bool(admins & set(member))})
    return out


def directory(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The directory SSSD reads: uris, access filter, id mapping (from the rendered sssd.conf template)."""
    for text in _files(doc, SSSD_TEMPLATE):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        for section in parser.sections():
            if section.startswith("domain/"):
                d = parser[section]
                return {
                    "domain": section.removeprefix("domain/"),
                    "uris": [u.strip() for u in d.get("ldap_uri", "").split(",") if u.strip()],
                    "accessFilter": d.get("ldap_access_filter"),
                    "idMapping": d.get("ldap_id_mapping", "false").strip().lower() == "true",
                }
    return None


def home(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The OpenZFS home: size, deployment type, throughput and the quotas of its volume."""
    systems = _of_type(doc, OPENZFS)
    if not systems:
        return None
    fs = _inputs(systems[0])
    quotas = [
        {"uid": q.get("id"), "gib": q.get("storageCapacityQuotaGib")}
        for v in _of_type(doc, OPENZFS_VOLUME)
        for q in _inputs(v).get("userAndGroupQuotas") or []
        if isinstance(q, Mapping) and q.get("type") == "USER"
    ]
    return {
        "storageGib": fs.get("storageCapacity"),
        "deploymentType": fs.get("deploymentType"),
        "throughputMBps": fs.get("throughputCapacity"),
        "quotas": sorted(quotas, key=lambda q: (str(q["uid"]), str(q["gib"]))),
    }


def sessions_rule(doc: Mapping[str, Any]) -> list[str]:
    """The ``no-root-sessions`` violations of the plan, rendered (empty: it passes)."""
    (rule,) = [r for r in RULES if r.name == NO_ROOT_SESSIONS]
    return [v.render() for v in evaluate(from_plan(doc), [rule])]


def people(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The plan JSON's ``people`` (docs/plan-json.md); None for a plan without login nodes, users or a directory."""
    found = {"login": login(doc), "users": users(doc), "directory": directory(doc), "home": home(doc)}
    if not (found["login"] or found["users"] or found["directory"]):
        return None
    return {**found, "noRootSessions": sessions_rule(doc)}


def _login_text(lg: Mapping[str, Any]) -> str:
    ssh = lg.get("ssh")
    reach = (
        f"SSH through {ssh['scheme']} NLB {ssh['loadBalancer']} from {', '.join(ssh['allowedCidrs']) or 'no CIDR'}"
        if ssh
        else "Session Manager only"
    )
    return f"{lg['asgName']}: {lg['count']} × {lg['instanceType']} · {reach}"


def _home_text(h: Mapping[str, Any] | None) -> str:
    if not h:
        return "no shared /home"
    quotas = sorted({q["gib"] for q in h["quotas"]}, key=lambda g: (not isinstance(g, int), g if isinstance(g, int) else 0))
    limit = f"quotas {', '.join(f'{g} GiB' for g in quotas)}" if quotas else "no per-user quota"
    return f"/home on FSx for OpenZFS {h['deploymentType']} {h['storageGib']} GiB, {h['throughputMBps']} MB/s, {limit}"


def rows(p: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """The summary's rows for :func:`people` (nothing without it): the login group with the ``no-root-sessions``
    verdict, then the users or the directory with the home — two rows, so the text plan keeps to two screens."""
    if p is None:
        return
    broken = p["noRootSessions"]
    verdict = f"{NO_ROOT_SESSIONS}: " + ("pass" if not broken else f"{len(broken)} violations (see policy)")
    yield "login", (_login_text(p["login"]) if p["login"] else "no login nodes") + f" · {verdict}"
    home = _home_text(p["home"])
    d = p["directory"]
    if d:
        mapping = "ids from AD SIDs" if d["idMapping"] else "POSIX ids from the directory"
        yield "directory", f"{', '.join(d['uris'])} · who may log in: {d['accessFilter']} · {mapping} · {home}"
    else:
        people = ", ".join(f"{u['name']} ({u['uid']}{', admin' if u['admin'] else ''})" for u in p["users"])
        yield "users", f"{people or 'none'} · {home}"
