"""Hostlist expressions: the pure-Python expander/compressor, checked against the real scontrol."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster_agents.contract import hostlist
from gpucluster_agents.power.slurm import Slurm
from tests.agents.conftest import FakeSlurm, require_tool

SCONTROL = "/usr/bin/scontrol"

CASES = [
    ("p5-1", ["p5-1"]),
    ("p5-[1-4,7],g6e-2", ["p5-1", "p5-2", "p5-3", "p5-4", "p5-7", "g6e-2"]),
    ("n[01-03]", ["n01", "n02", "n03"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("a[1-2]-b[1-2]", ["a1-b1", "a1-b2", "a2-b1", "a2-b2"]),
    ("p5-1 p5-2,p5-3", ["p5-1", "p5-2", "p5-3"]),
    ("p5-[1-2],p5-2", ["p5-1", "p5-2"]),
    ("p5-od-[3,1]", ["p5-od-3", "p5-od-1"]),
]


@pytest.mark.parametrize(("expr", "names"), CASES)
def test_expand(expr: str, names: list[str]) -> None:
    assert hostlist.expand(expr) == names


@pytest.mark.parametrize("expr", ["x[3-1]", "x[1-", "x]", "x[a]", "x[1-2][", "x[]", "x[1,,2]", "x[[1]]", "a[1-2]-b", "a[1]b"])
def test_expand_rejects_malformed(expr: str) -> None:
    with pytest.raises(hostlist.HostlistError):
        hostlist.expand(expr)


@pytest.mark.parametrize(("expr", "names"), [c for c in CASES if c[0] != "p5-[1-2],p5-2"])
def test_expand_matches_real_scontrol(expr: str, names: list[str], scontrol_env: dict[str, str]) -> None:
    require_tool(SCONTROL)
    out = subprocess.run(
        [SCONTROL, "show", "hostnames", expr], capture_output=True, text=True, check=True, env=scontrol_env
    ).stdout.split()
    assert hostlist.expand(expr) == out == names


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        (["p5-1", "p5-2", "p5-3", "p5-7"], "p5-[1-3,7]"),
        (["g6e-2", "p5-1"], "g6e-2,p5-1"),
        (["n01", "n02", "n10"], "n[01-02],n10"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["login"], "login"),
        (["p5-4"], "p5-4"),
    ],
)
def test_compress(names: list[str], expr: str) -> None:
    assert hostlist.compress(names) == expr


node_names = st.builds(
    lambda prefix, n, pad: f"{prefix}{str(n).zfill(pad)}",
    st.sampled_from(["p5-", "g6e-", "n", "trn1-od-"]),
    st.integers(min_value=0, max_value=1200),
    st.sampled_from([0, 0, 3]),
)


@settings(max_examples=200, deadline=None)
@given(st.sets(node_names, min_size=1, max_size=60))
def test_compress_roundtrip(names: set[str]) -> None:
    assert set(hostlist.expand(hostlist.compress(names))) == names


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sets(node_names, min_size=1, max_size=40))
def test_compress_is_understood_by_scontrol(scontrol_env: dict[str, str], names: set[str]) -> None:
    require_tool(SCONTROL)
    expr = hostlist.compress(names)
    out = subprocess.run(
        [SCONTROL, "show", "hostnames", expr], capture_output=True, text=True, check=True, env=scontrol_env
    ).stdout.split()
    assert set(out) == names
    assert len(out) == len(names)


def test_agent_uses_scontrol_and_falls_back(tmp_path: Path) -> None:
    slurm = FakeSlurm(tmp_path, ["p5-1"])
    s = Slurm(str(slurm.bin_dir / "scontrol"))
    assert s.expand("p5-[1-2]") == ["p5-1", "p5-2"]
    assert slurm.calls() == [["show", "hostnames", "p5-[1-2]"]]
    slurm.set_flag("fail_hostnames", True)  # scontrol fails: the built-in expander answers
    assert s.expand("p5-[3-4]") == ["p5-3", "p5-4"]
    assert len(slurm.calls()) == 2
    # no scontrol at all (e.g. slurm_bin_dir wrong): still expands
    assert Slurm(str(tmp_path / "nope" / "scontrol")).expand("g6e-[1,3]") == ["g6e-1", "g6e-3"]


@pytest.mark.parametrize("expr", ["a[1-2]-b", "x[3-1]", "x[a]"])
def test_malformed_is_malformed_for_scontrol_too(expr: str, scontrol_env: dict[str, str]) -> None:
    require_tool(SCONTROL)
    proc = subprocess.run([SCONTROL, "show", "hostnames", expr], capture_output=True, text=True, env=scontrol_env)
    assert proc.returncode != 0 or not proc.stdout.split()
