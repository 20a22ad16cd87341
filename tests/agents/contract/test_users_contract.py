"""The users contract parser (gpucluster_agents/contract/users.py): reads back what the renderer writes, refuses what
would give a declared user more than a person's account (a system name, a system or Slurm id, another shell or home,
a line that is not one public key), names each problem's key, and gives the users program lines it can read."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpucluster_agents.contract import ConfigError
from gpucluster_agents.contract.users import parse, records, to_json

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ0000000000000000000000000000000000000000000 carol@laptop: work"
FILE: dict[str, Any] = {
    "schema": 1,
    "groups": [{"name": "hpc-admins", "gid": 5000}, {"name": "llm", "gid": 5002}, {"name": "alice", "gid": 10001},
               {"name": "carol", "gid": 10003}],
    "users": [
        {"name": "alice", "uid": 10001, "gid": 10001, "groups": ["hpc-admins"], "shell": "/bin/bash",
         "home": "/home/alice", "ssh_public_keys": []},
        {"name": "carol", "uid": 10003, "gid": 10003, "groups": ["llm"], "shell": "/usr/bin/zsh",
         "home": "/home/carol", "ssh_public_keys": [KEY]},
    ],
}  # fmt: skip


def errors(doc: Any) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse(doc)
    return exc.value.errors


def changed(path: str, value: Any) -> dict[str, Any]:
    """FILE with one key path (``users.0.uid``) set."""
    doc = copy.deepcopy(FILE)
    *parents, last = path.split(".")
    obj: Any = doc
    for p in parents:
        obj = obj[int(p)] if p.isdigit() else obj[p]
    obj[last] = value
    return doc


def test_the_file_reads_back_whole_and_renders_the_same_bytes():
    c = parse(FILE)
    assert [g.name for g in c.groups] == ["hpc-admins", "llm", "alice", "carol"]
    carol = c.users[1]
    assert (carol.uid, carol.gid, carol.groups, carol.shell, carol.ssh_public_keys) == (
        10003,
        10003,
        ("llm",),
        "/usr/bin/zsh",
        (KEY,),
    )
    assert parse(json.loads(to_json(c))) == c


def test_the_records_keep_a_keys_colons_and_list_groups_first():
    assert records(parse(FILE)).splitlines() == [
        "group:hpc-admins:5000",
        "group:llm:5002",
        "group:alice:10001",
        "group:carol:10003",
        "user:alice:10001:10001:hpc-admins:/bin/bash:/home/alice",
        "user:carol:10003:10003:llm:/usr/bin/zsh:/home/carol",
        f"key:carol:{KEY}",
    ]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("users.0.uid", 0, "users[0].uid: uid 0 is a system account's range (below 1000)"),
        ("users.0.uid", 64030, "users[0].uid: uid 64030 is the slurm account's on Ubuntu"),
        ("groups.0.gid", 27, "groups[0].gid: gid 27 is a system account's range"),
        ("groups.0.gid", 65534, "groups[0].gid: gid 65534 is nobody/nogroup"),
        ("users.0.uid", True, "users[0].uid: must be an integer, got True"),
        ("users.0.name", "root", "users[0].name: 'root' is a system account's or group's name"),
        ("groups.0.name", "sudo", "groups[0].name: 'sudo' is a system account's or group's name"),
        ("groups.0.name", "systemd-journal", "groups[0].name: 'systemd-journal' is a system account's or group's name"),
        ("users.0.name", "al:ice", "users[0].name: 'al:ice' is not valid"),
        ("users.0.name", "alice\n", "users[0].name: 'alice\\n' is not valid"),
        ("users.0.groups", ["sudo"], "users[0].groups: 'sudo' is not a group of this file"),
        ("users.0.groups", ["llm", "llm"], "users[0].groups[1]: 'llm' is listed twice"),
        ("users.0.gid", 5000, None),  # a declared group as the primary group is fine
        ("users.0.gid", 7777, "users[0].gid: 7777 is not the gid of a group of this file"),
        ("users.0.shell", "/tmp/sh", "users[0].shell: '/tmp/sh' is not one of /bin/bash, /bin/sh, /usr/bin/zsh"),
        ("users.0.home", "/root", "users[0].home: '/root' is not /home/alice"),
        ("users.1.ssh_public_keys", ["ssh-ed25519 AAAA\ncommand=x"], "users[1].ssh_public_keys[0]: is not one OpenSSH"),
        ("users.1.ssh_public_keys", ["ssh-dss AAAA"], "users[1].ssh_public_keys[0]: is not one OpenSSH"),
        ("users.1.name", "alice", "users[1].name: 'alice' is listed twice"),
        ("users.1.uid", 10001, "users[1]: id 10001 is listed twice"),
        ("users.0.admin", True, "users[0].admin: unknown key"),
        ("schema", 2, "schema: this program reads schema 1, got 2"),
    ],
)
def test_what_the_parser_refuses(path, value, expected):
    doc = changed(path, value)
    if expected is None:
        parse(doc)
        return
    found = errors(doc)
    assert any(e.startswith(expected) for e in found), found


def test_every_problem_is_reported_at_once():
    doc = changed("users.0.uid", 0)
    doc["groups"][1]["name"] = "root"
    assert len(errors(doc)) >= 2
