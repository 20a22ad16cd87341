"""Who reaches which node, on ``slurm-p5``'s plan (the golden plan, which tests/tools/plan/test_plan.py keeps equal to
``gpucluster plan --stack slurm-p5 --json``):

- the head node sits in a security group of its own, not in the compute nodes' all-members (EFA) group, and no rule of
  its groups admits SSH (H1: a job on a compute node had a path to the controller's sshd);
- the head node's files carry an sshd drop-in (``AllowGroups`` the admin group), ``/etc/pam.d/sshd`` with
  ``pam_access`` first in the account stack, and that access file;
- docs/slurm.md's per-role tables ("Who can reach what, per node role") agree with the plan: the ingress
  rules of every role's groups, and the listeners the plan's units and Slurm files name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from tests.conftest import ROOT

PLAN = ROOT / "tests" / "golden" / "plans" / "slurm-p5.json"
DOC = ROOT / "docs" / "slurm.md"
SECTION = "### Who can reach what, per node role"
ROLES = {"Head node": "head", "Login nodes": "login", "Compute nodes": "compute"}
SG, IN = "aws:ec2/securityGroup:SecurityGroup", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
LT, INSTANCE, ENI = (
    "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:ec2/instance:Instance",
    "aws:ec2/networkInterface:NetworkInterface",
)
SSHD_DROP_IN = "/etc/ssh/sshd_config.d/60-gpucluster.conf"

Reach = tuple[str, int, int, str]
"""(protocol, first port, last port, who): ``("-1", 0, 65535, "compute")`` is all traffic."""


def plan() -> dict[str, Any]:
    return json.loads(PLAN.read_text())


def of_type(doc: dict[str, Any], token: str) -> list[dict[str, Any]]:
    return [r for r in doc["resources"] if r["type"] == token]


def role_tag(r: dict[str, Any]) -> str | None:
    i = r["inputs"]
    for tags in [i.get("tags"), *[s.get("tags") for s in i.get("tagSpecifications") or []]]:
        if isinstance(tags, dict) and "gpucluster:role" in tags:
            return str(tags["gpucluster:role"]).replace("slurm-head", "head")
    return None


def carriers(doc: dict[str, Any]) -> dict[str, set[str]]:
    """Who carries each security group id: ``head``, ``login``, ``compute``, ``lustre``, ``home``, ``load balancer``."""
    out: dict[str, set[str]] = {}

    def add(who: str, ids: Iterable[str] | None) -> None:
        for sg in ids or ():
            out.setdefault(sg, set()).add(who)

    for lt in of_type(doc, LT):
        who = role_tag(lt)
        if who is not None:
            add(who, lt["inputs"].get("vpcSecurityGroupIds"))
            for nic in lt["inputs"].get("networkInterfaces") or []:
                add(who, nic.get("securityGroups"))
    for eni in of_type(doc, ENI):
        if role_tag(eni) == "head":
            add("head", eni["inputs"].get("securityGroups"))
    for token, who in (
        ("aws:fsx/lustreFileSystem:LustreFileSystem", "lustre"),
        ("aws:fsx/openZfsFileSystem:OpenZfsFileSystem", "home"),
    ):
        for r in of_type(doc, token):
            add(who, r["inputs"].get("securityGroupIds"))
    for r in of_type(doc, "aws:lb/loadBalancer:LoadBalancer"):
        add("load balancer", r["inputs"].get("securityGroups"))
    return out


def groups_of(doc: dict[str, Any], role: str) -> set[str]:
    return {sg for sg, who in carriers(doc).items() if role in who}


def plan_reach(doc: dict[str, Any], role: str) -> set[Reach]:
    """Every (protocol, ports, peer) the ingress rules of ``role``'s groups admit."""
    mine, who = groups_of(doc, role), carriers(doc)
    out: set[Reach] = set()
    for rule in of_type(doc, IN):
        i = rule["inputs"]
        if i["securityGroupId"] not in mine:
            continue
        assert i.get("referencedSecurityGroupId"), f"{rule['name']}: a rule on a node's group names a CIDR"
        proto = str(i["ipProtocol"])
        low, high = (0, 65535) if proto == "-1" else (int(i["fromPort"]), int(i["toPort"]))
        for peer in who.get(i["referencedSecurityGroupId"], {"nobody"}):
            out.add((proto, low, high, peer))
    return out


# --- docs/slurm.md's tables ----------------------------------------------------------------------------------------


def doc_tables() -> dict[str, list[dict[str, str]]]:
    """The section's tables, one per role: each row as ``{column: cell}``."""
    text = DOC.read_text()
    assert SECTION in text, f"docs/slurm.md has no section {SECTION!r}"
    body = re.split(r"\n#{2,3} ", text.split(SECTION, 1)[1], maxsplit=1)[0]
    tables: dict[str, list[dict[str, str]]] = {}
    for part in body.split("\n#### ")[1:]:
        title, _, rest = part.partition("\n")
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in rest.splitlines() if line.startswith("|")]
        header, data = rows[0], [r for r in rows[2:]]
        tables[ROLES[title.strip()]] = [dict(zip(header, r, strict=True)) for r in data]
    assert set(tables) == set(ROLES.values()), f"expected one table per role, got {sorted(tables)}"
    return tables


def ports_of(cell: str) -> list[tuple[str, int, int]]:
    """``TCP 988, TCP 1018-1023`` → ``[("tcp", 988, 988), ("tcp", 1018, 1023)]``; ``all`` → all traffic."""
    if cell.strip() == "all":
        return [("-1", 0, 65535)]
    out = []
    for spec in cell.split(","):
        m = re.fullmatch(r"\s*(TCP|UDP) (\d+)(?:-(\d+))?\s*", spec)
        assert m, f"port cell {cell!r}: write 'TCP 22', 'TCP 1018-1023' or 'all'"
        out.append((m.group(1).lower(), int(m.group(2)), int(m.group(3) or m.group(2))))
    return out


def peers_of(cell: str) -> list[str]:
    """``compute, login`` → both; ``— (…)`` → none (what is in parentheses is a remark)."""
    names = re.sub(r"\([^)]*\)", "", cell).strip()
    return [] if names in ("—", "") else [n.strip().lower() for n in names.split(",")]


def doc_reach(rows: list[dict[str, str]]) -> set[Reach]:
    return {(p, lo, hi, peer) for row in rows for p, lo, hi in ports_of(row["port"]) for peer in peers_of(row["reached from"])}


# --- listeners the plan's files name ---------------------------------------------------------------------------------


def role_files(doc: dict[str, Any], role: str) -> dict[str, str]:
    """``{path on the node: text}`` of every file the plan shows for ``role``'s launch templates or head instance."""
    names = {r["name"] for r in [*of_type(doc, LT), *of_type(doc, INSTANCE)] if role_tag(r) == role}
    prefixes = names | {f"{n}-files" for n in names}
    return {"/" + key.split("/", 1)[1]: text for key, text in doc["files"].items() if key.split("/", 1)[0] in prefixes}


def unit_listeners(files: dict[str, str]) -> set[tuple[int, str]]:
    """(port, bound to) of every listener an ``ExecStart=`` line of a unit or drop-in names: ``--listen A:P``,
    ``--web.listen-address=A:P``, ``--port P`` (gpucluster's programs: the node's private address unless ``--listen``
    names one), and every ``ListenStream=`` of a ``.socket`` unit."""
    out: set[tuple[int, str]] = set()
    # A .socket unit holds its port for its exporter; the setup names the node's private address in a drop-in for each
    # socket it lists to ``metrics listen-drop-ins --socket NAME=PORT`` (the unit itself says 127.0.0.1 until then).
    private = {m for text in files.values() for m in re.findall(r"--socket ([\w.@-]+\.socket)=\d+", text)}
    for path, text in files.items():
        if path.endswith(".socket"):
            for host, port in re.findall(r"^ListenStream=(\[[^\]]*\]|[\w.]+):(\d+)$", text, flags=re.M):
                named = path.rsplit("/", 1)[1] in private
                out.add((int(port), "private address" if named else "127.0.0.1" if host == "127.0.0.1" else host))
            continue
        if ".service" not in path:
            continue
        for line in text.splitlines():
            if not line.startswith("ExecStart="):
                continue
            addr = re.search(r"--[\w.-]*listen[\w.-]*[= ](\[[^\]]*\]|[\w.]+):(\d+)", line)
            port = re.search(r"--port[= ](\d+)", line)
            if addr:
                host = addr.group(1)
                out.add((int(addr.group(2)), "127.0.0.1" if host in ("127.0.0.1", "localhost") else host))
            elif port:
                out.add((int(port.group(1)), "private address"))
    return out


def conf_value(text: str, key: str, default: int) -> int:
    m = re.search(rf"^{key}=(\d+)", text, re.M | re.I)
    return int(m.group(1)) if m else default


def daemon_listeners(doc: dict[str, Any], role: str) -> set[int]:
    """Ports on every address: sshd where the node has our drop-in (port 22 unless it says), Slurm's daemons by
    the head node's slurm.conf and slurmdbd.conf (Slurm's defaults where they are silent)."""
    files, head = role_files(doc, role), role_files(doc, "head")
    out = set()
    if SSHD_DROP_IN in files:
        out.add(conf_value(files[SSHD_DROP_IN], "Port ", 22) if "\nPort " in files[SSHD_DROP_IN] else 22)
    slurm_conf = head["/etc/slurm/slurm.conf"]
    if role == "head":
        out.add(conf_value(slurm_conf, "SlurmctldPort", 6817))
        if "/etc/slurm/slurmdbd.conf" in head:
            out.add(conf_value(head["/etc/slurm/slurmdbd.conf"], "DbdPort", 6819))
    if role == "compute":
        out.add(conf_value(slurm_conf, "SlurmdPort", 6818))
    return out


# --- H1 ------------------------------------------------------------------------------------------------------------


def all_members_groups(doc: dict[str, Any]) -> set[str]:
    """Groups with an all-traffic rule from themselves (the EFA group)."""
    return {
        r["inputs"]["securityGroupId"]
        for r in of_type(doc, IN)
        if r["inputs"]["ipProtocol"] == "-1" and r["inputs"].get("referencedSecurityGroupId") == r["inputs"]["securityGroupId"]
    }


def test_h1_head_node_has_its_own_security_group_and_no_ssh_from_compute_nodes():
    doc = plan()
    head, compute = groups_of(doc, "head"), groups_of(doc, "compute")
    assert head and not head & all_members_groups(doc), "the head node is still a member of an all-traffic group"
    by_id = {r["id"]: r for r in of_type(doc, SG)}
    own = [by_id[sg] for sg in head - compute if by_id[sg]["name"].endswith("-head-sg")]
    assert [g["name"] for g in own] == ["slurm-p5-slurm-head-sg"], sorted(by_id[sg]["name"] for sg in head)
    reach = plan_reach(doc, "head")
    assert not [r for r in reach if r[0] in ("-1", "tcp") and r[1] <= 22 <= r[2]], sorted(reach)  # no SSH, from anyone
    assert not [r for r in reach if r[3] == "compute" and (r[1], r[2]) not in ((6817, 6817), (6819, 6819))], sorted(reach)
    assert {("tcp", 6817, 6817, "compute"), ("tcp", 6819, 6819, "compute")} <= reach  # slurmd and jobs still reach it
    # the compute nodes still admit the head node's slurmctld, its srun messages and its collector's scrapes
    assert {("tcp", 6818, 6818, "head"), ("tcp", 60001, 63000, "head"), ("tcp", 9400, 9400, "head")} <= plan_reach(doc, "compute")
    assert ("-1", 0, 65535, "compute") in plan_reach(doc, "compute")  # EFA between compute nodes, unchanged


def test_h1_head_files_admit_only_the_admin_group_over_ssh():
    files = role_files(plan(), "head")
    drop_in = files[SSHD_DROP_IN]
    assert re.search(r"^AllowGroups hpc-admins$", drop_in, re.M) and "PermitRootLogin no" in drop_in
    account = [line for line in files["/etc/pam.d/sshd"].splitlines() if line.startswith(("account", "@include common-account"))]
    assert account[:3] == [
        "account    required     pam_nologin.so",
        "account    requisite    pam_access.so accessfile=/etc/security/access-gpucluster-head.conf",
        "@include common-account",
    ], account
    access = files["/etc/security/access-gpucluster-head.conf"]
    assert [line for line in access.splitlines() if not line.startswith("#")] == ["+:root:ALL", "+:(hpc-admins):ALL", "-:ALL:ALL"]


# --- the table -------------------------------------------------------------------------------------------------------


def test_security_doc_reach_tables_match_the_plans_security_groups():
    doc, tables = plan(), doc_tables()
    for role, rows in tables.items():
        documented, planned = doc_reach(rows), plan_reach(doc, role)
        assert documented == planned, (
            f"{role}: docs/slurm.md lists {sorted(documented - planned)} that the plan does not admit; "
            f"the plan admits {sorted(planned - documented)} that the table does not list"
        )


def test_security_doc_reach_tables_list_every_listener_the_plan_names():
    doc, tables = plan(), doc_tables()
    for role, rows in tables.items():
        local = {
            (lo, row["bound to"])
            for row in rows
            for _, lo, hi in ports_of(row["port"])
            if row["bound to"] in ("127.0.0.1", "private address") and lo == hi
        }
        assert local == unit_listeners(role_files(doc, role)), (
            f"{role}: the table's local and private listeners differ from the plan's units"
        )
        everywhere = {
            lo for row in rows for _, lo, hi in ports_of(row["port"]) if row["bound to"] == "all addresses" and lo == hi
        }
        missing = daemon_listeners(doc, role) - everywhere
        assert not missing, f"{role}: the plan's daemons listen on {sorted(missing)}, which the table does not list"


def test_reach_table_check_can_fail():
    """The comparison sees a changed rule and a changed listener (a copy of the plan, edited)."""
    doc = plan()
    rule = next(r for r in of_type(doc, IN) if r["name"] == "slurm-p5-slurm-head-sg-in-slurmctld")
    rule["inputs"]["fromPort"] = rule["inputs"]["toPort"] = 22
    assert ("tcp", 22, 22, "compute") in plan_reach(doc, "head")
    assert doc_reach(doc_tables()["head"]) != plan_reach(doc, "head")
    key = next(k for k in doc["files"] if k.endswith("gpucluster-collector-signer.service"))
    doc["files"][key] = doc["files"][key].replace("127.0.0.1:9091", "0.0.0.0:9091")
    assert (9091, "0.0.0.0") in unit_listeners(role_files(doc, "head"))
