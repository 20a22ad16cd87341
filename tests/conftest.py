"""Fixtures shared by every test layer."""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Capacity-block start times are judged as of this instant in every test (and the CLI runs they start),
# so plans and goldens do not change with the calendar: gpucluster.config.checks.deploy.utc_now.
os.environ["GPUCLUSTER_NOW"] = "2026-11-01T00:00:00Z"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from the current output")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers it too; registered here so --strict-markers also holds with -p no:xdist
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one pytest-xdist worker (--dist loadgroup)")


# Fixtures that start a daemon, a chroot or a build: a test that uses one (directly or through another fixture) is
# marked ``slow``, like the modules whose tests start one themselves (their ``pytestmark``), so that
# ``pytest -m "not slow"`` is the fast loop (CONTRIBUTING.md).
SLOW_FIXTURES = frozenset({"moto_endpoint", "moto_server", "wheel", "editable", "trixie_root", "trixie_tmp"})


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks and before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use a SLOW_FIXTURES fixture are marked ``slow``.

    The tests of a module that uses a module- or class-scoped fixture (a plan of every stack, a policy pack
    served over gRPC) run on one pytest-xdist worker, which builds that fixture once instead of once per worker.
    Not the ``slow`` tests: real daemons waiting on Slurm's timers gain more from running side by side than from
    sharing a fixture."""
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    for item in items:
        if item.get_closest_marker("xdist_group") or item.get_closest_marker("slow"):
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in info.names_closure:
            defs = info.name2fixturedefs.get(name)
            if defs and defs[-1].scope in ("module", "class", "package"):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
                break
    _name_groups(config, items)


def _name_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker under ``--dist loadgroup``: each grouped test's id ends with ``@<group>``, which the
    scheduler groups by. pytest-xdist 3.8 writes that suffix into ``item._nodeid``, which pytest 9 no longer reads
    (a node's id is ``item._id``, whose text is cached): without this every group was spread over the workers, and
    each built the group's module fixtures again (``tests/test_tiers.py`` checks the suffix arrives)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        if not names or "@" in item.nodeid[item.nodeid.rfind("]") + 1 :]:
            continue
        grouped = f"{item.nodeid}@{'_'.join(sorted(names))}"
        ident = getattr(item, "_id", None)
        if ident is not None and hasattr(ident, "_str_cache"):
            object.__setattr__(ident, "_str_cache", grouped)
        else:
            item._nodeid = grouped  # pytest before 9


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def check_golden(path: Path, actual: str, update: bool) -> None:
    """Compare ``actual`` with the committed golden file (or rewrite it with --update-golden)."""
    if update or not path.exists():
        if not update and IN_CI:
            pytest.fail(f"golden file {path.relative_to(ROOT)} is missing; run pytest --update-golden and commit it")
        path.parent.mkdir(parents=True, exist_ok=True)
        # whole or not at all: another worker (pytest-xdist) may read it meanwhile
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
            tmp.write(actual)
        os.replace(tmp.name, path)
        return
    expected = path.read_text()
    assert actual == expected, f"{path.relative_to(ROOT)} differs; if the change is intended run pytest --update-golden"


# --- parallel runs (pytest-xdist workers, and other test runs on the same machine) ----------------------


@contextlib.contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Hold an exclusive lock (fcntl) on ``$TMPDIR/gpucluster-test-<name>.lock``: one holder at a time among
    every process of this machine, the pytest-xdist workers of this run and other test runs alike. The lock
    goes with the process, so a killed holder never leaves it taken."""
    path = Path(tempfile.gettempdir()) / f"gpucluster-test-{name}.lock"
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def path_key(path: Path) -> str:
    """A short name for ``path`` in lock and state file names (e.g. one per checkout)."""
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]


def run_shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this test run that all of its pytest-xdist workers see (the run's base temp dir, whose
    ``popen-gwN`` children are the workers' own); without xdist, this process's base temp dir. Shared one-time
    work (a wheel) goes here, under :func:`machine_lock`."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def require_tool(name: str) -> str:
    """Path of ``name``; in CI a missing tool fails the test instead of skipping it."""
    found = shutil.which(name)
    if found:
        return found
    if IN_CI:
        pytest.fail(f"{name} is not installed; .ci/run must install it")
    pytest.skip(f"{name} not installed (CI installs it)")


MINIMAL_GROUP: dict[str, Any] = {
    "name": "gpu",
    "instanceType": "p5.48xlarge",
    "availabilityZones": ["us-east-1a"],
    "maxSize": 2,
}


def make_config(*groups: dict[str, Any], **keys: Any) -> dict[str, Any]:
    """A flat Pulumi config map: ``make_config({...group}, network={...}, region="us-west-2")``."""
    config: dict[str, Any] = {"aws:region": keys.pop("region", "us-east-1")}
    config["gpucluster:nodeGroups"] = [copy.deepcopy(g) for g in groups] or [copy.deepcopy(MINIMAL_GROUP)]
    for key, value in keys.items():
        config[f"gpucluster:{key}"] = value
    return config


def group(**fields: Any) -> dict[str, Any]:
    """MINIMAL_GROUP with ``fields`` changed (``None`` removes a field)."""
    out = copy.deepcopy(MINIMAL_GROUP)
    for key, value in fields.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


# Three groups, Lustre on p5 only and NVMe scratch (ext4) on p5 and p4d, cpu with neither: what each group mounts is
# decided per group (resolution, the health config of each group's user data).
MIXED_STORAGE_GROUPS = (
    group(name="p5", maxSize=2),
    group(name="p4d", instanceType="p4d.24xlarge", maxSize=2),
    group(name="cpu", instanceType="m7i.xlarge", maxSize=2, enableEfaSupport=False),
)
MIXED_STORAGE = {
    "lustre": {"storageCapacityGib": 1200, "throughputPerUnitStorage": 250, "mountPoint": "/lustre", "nodeGroups": ["p5"]},
    "nvmeScratch": {"mountPoint": "/scratch", "filesystem": "ext4", "nodeGroups": ["p5", "p4d"]},
}


# Resolved specs with a Kubernetes section, shared by the Kubernetes tests of every layer (resolve, render, components).
TWO_ZONES = {"availabilityZones": ["us-east-1a", "us-east-1b"]}


def eks_spec(*groups, network=None, **kubernetes):
    """A resolved ClusterSpec with a Kubernetes section (default: one p5 group, two zones)."""
    from gpucluster.load import load_spec

    config = make_config(*(groups or (group(maxSize=4),)), network=network or TWO_ZONES, kubernetes=kubernetes)
    return load_spec(config, stack="k").spec


@pytest.fixture
def p5_spec():
    return eks_spec(teams=[{"name": "research", "gpuQuota": {"h100": 16}, "groups": ["research"]}])


@pytest.fixture
def catalog():
    from gpucluster.facts.catalog import load_catalog

    return load_catalog()


ConfigFactory = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def moto_endpoint():
    """A moto server on 127.0.0.1 for the session (``moto_server``, the real HTTP API); reset per use."""
    import socket
    import subprocess
    import time
    import urllib.request

    server = require_tool("moto_server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("moto_server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def aws_env(monkeypatch):
    """Fake credentials so boto3 signs requests for moto; nothing reaches AWS."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def run_components():
    """``run_components(fn)`` runs ``fn`` in a fresh mocked stack and returns the recorded plan.

    Each call installs new mocks and a new monitor, so nothing leaks between tests. Exceptions raised
    inside ``fn`` or inside an ``Output.apply`` fail the call.
    """
    from gpucluster.facts.catalog import load_catalog
    from gpucluster.tools.plan.run.engine import Plan, execute
    from gpucluster.tools.plan.run.mocks import PlanMocks

    def run(program: Callable[[], object], region: str = "us-east-1") -> Plan:
        mocks = PlanMocks(region=region, catalog=load_catalog())
        plan = execute(program, config={"aws:region": region}, mocks=mocks)
        assert plan.error is None, plan.error
        return plan

    return run


# --- configs through the real program, and findings -------------------------------------------------


def pulumi_config(config: dict[str, Any]) -> dict[str, str]:
    """A config as the Pulumi CLI hands it to a program: objects as JSON text."""
    import json

    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def plan_config(config: dict[str, Any], stack: str = "test"):
    """Run the real stack program (``__main__.py``) with ``config`` under the plan's mock engine."""
    from gpucluster.tools.plan.run.engine import run_program

    return run_program("gpucluster", stack, pulumi_config(config))


def assert_refused(config: dict[str, Any], path: str, fragment: str):
    """The program refuses ``config`` before registering anything, with an error at ``path`` saying ``fragment``."""
    plan = plan_config(config, "bad")
    assert plan.error is not None, "the program should have refused this config"
    assert plan.resources == [], f"registered {[r.name for r in plan.resources]} despite the bad config"
    matching = [f for f in plan.findings if f["level"] == "error" and f["path"] == path]
    assert matching, f"no error at {path}; got {[(f['path'], f['message']) for f in plan.findings]}"
    assert any(fragment in f["message"] for f in matching), [f["message"] for f in matching]
    assert path in plan.error  # the message the user sees names the field
    assert "Traceback" not in plan.error
    return plan


def parse_spec(config: dict[str, Any]):
    """The parsed (not validated, not resolved) ClusterSpec of a flat config map."""
    from gpucluster.config.cluster import ClusterSpec
    from gpucluster.load import config_keys

    keys = config_keys()
    raw = {keys[k]: v for k, v in config.items()}
    raw.setdefault("name", "t")
    return ClusterSpec.model_validate(raw)


def assert_finding(findings, level, path: str, expected_message: str, code: str) -> None:
    """Exactly the expected finding (level, path, message, code) is among ``findings``, with a fix."""
    match = [f for f in findings if f.code == code and f.path == path]
    assert match, f"no {code} finding at {path}; got {[(f.code, f.path, f.message) for f in findings]}"
    f = match[0]
    assert (f.level, f.message) == (level, expected_message)
    assert f.fix, "every finding says how to fix it"


# --- people on Slurm (identity, login nodes, home) ---------------------------------------------------------------
# Canonical configs for every layer's tests (resolve, render, components, stacks): the slurm-p5-like declared one
# and the Active-Directory-like one. The CA below was made once with openssl for these tests (public, key discarded);
# the SSH key is a well-formed ed25519 public key line of no real key pair.

TEST_CA_PEM = """-----BEGIN CERTIFICATE-----
MIIBkTCCATegAwIBAgIUB+ehAvArNz8gAF/bMlTRBshKkw8wCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSZ3B1Y2x1c3Rlci10ZXN0LWNhMCAXDTI2MTEyNjE3NDgxMFoY
DzIxMjYxMTAyMTc0ODEwWjAdMRswGQYDVQQDDBJncHVjbHVzdGVyLXRlc3QtY2Ew
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARWX1COZkw3ZXyHHb2i0jI0RMwqH8D6
JN8fvaU+iF2QTAoqmm8qzYt3lJzq22uIce+Uv5k5lr7Y7lLmso/OEJBEo1MwUTAd
BgNVHQ4EFgQUr+5kUZc/tY28MU1Zl24SJpXcUC4wHwYDVR0jBBgwFoAUr+5kUZc/
tY28MU1Zl24SJpXcUC4wDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBF
AiBffLACKaBIxiVT3JLqTlQQjPDCTR8my7vsmfh+Hl1N4wIhALwJDW9jrKCEH4dV
Xp0kyU0AwGDxY8l6SA6rd1TdrXJ0
-----END CERTIFICATE-----
"""
TEST_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEwm2QdMJ9ie3lknDArBS3HgcbFSOVGfdUdLLzumNIH1 carol@example"
TEST_ACCOUNT = "123456789012"
# A hostile slurm.settings (docs/teams.md, "The escape hatch"): seven keys that each name code, a user or an authentication method,
# pointing at storage researchers can write (/fsx, /home). (Epilog and Prolog are gpucluster's own keys: refused as owned,
# and their rendered values must be gpucluster's programs, tests/tools/policy/test_slurm_rules.py.) The loader refuses them; the policy rule reads them in a
# slurm.conf rendered around the check.
HOSTILE_SLURM_SETTINGS = {
    "SrunEpilog": "/fsx/shared/srun-epilog.sh",
    "PlugStackConfig": "/home/bob/plugstack.conf",
    "PrologSlurmctld": "/fsx/shared/prolog-ctld.sh",
    "TaskEpilog": "/home/bob/task-epilog.sh",
    "SlurmdUser": "bob",
    "AuthAltTypes": "auth/jwt",
    "UnkillableStepProgram": "/fsx/shared/unkillable.sh",
}

IDENTITY_DECLARED = {
    "adminGroup": "hpc-admins",
    "groups": [{"name": "hpc-admins", "gid": 5000}, {"name": "vision", "gid": 5001}, {"name": "llm", "gid": 5002}],
    "users": [
        {
            "name": "alice",
            "uid": 10001,
            "groups": ["hpc-admins", "vision"],
            "sessionPrincipal": f"arn:aws:iam::{TEST_ACCOUNT}:role/alice",
        },
        {"name": "bob", "uid": 10002, "groups": ["llm"], "homeQuotaGib": 100},
        {"name": "carol", "uid": 10003, "groups": ["llm"], "sshPublicKeys": [TEST_SSH_KEY]},
    ],
}
IDENTITY_DIRECTORY = {
    "adminGroup": "hpc-admins",
    "directory": {
        "uris": ["ldaps://ad.corp.example.com"],
        "schema": "ad",
        "searchBase": "dc=corp,dc=example,dc=com",
        "bindDn": "cn=gpucluster-ro,ou=Service,dc=corp,dc=example,dc=com",
        "bindPasswordSecret": f"arn:aws:secretsmanager:us-east-1:{TEST_ACCOUNT}:secret:gpucluster/ad-bind-AbCdEf",
        "caCertificate": TEST_CA_PEM,
        "accessFilter": "(memberOf=cn=hpc-users,ou=Groups,dc=corp,dc=example,dc=com)",
        "sshPublicKeyAttribute": "sshPublicKey",
    },
}


def identity_config(identity: dict[str, Any], **slurm: Any) -> dict[str, Any]:
    """A one-group Slurm cluster config with ``slurm.identity = identity`` and other ``slurm`` keys."""
    return make_config(group(), slurm={"identity": copy.deepcopy(identity), **copy.deepcopy(slurm)})


def identity_declared_config() -> dict[str, Any]:
    """slurm-p5-like: declared users and groups, two login nodes (sessions only), the default home."""
    return identity_config(IDENTITY_DECLARED, loginNodes={"count": 2, "instanceType": "m7i.2xlarge"})


def identity_directory_config() -> dict[str, Any]:
    """slurm-directory-like: Active Directory over ldaps, login nodes with internal SSH from 10.20.0.0/16."""
    return identity_config(IDENTITY_DIRECTORY, loginNodes={"ssh": {"allowedCidrs": ["10.20.0.0/16"], "scheme": "internal"}})


@pytest.fixture
def identity_declared_spec():
    """The declared-users cluster loaded, checked and resolved: a ``ResolvedCluster`` (``.slurm.identity`` …)."""
    from gpucluster.load import load_spec

    return load_spec(identity_declared_config(), stack="people").cluster


@pytest.fixture
def identity_directory_spec():
    """The directory cluster loaded, checked and resolved: a ``ResolvedCluster``."""
    from gpucluster.load import load_spec

    return load_spec(identity_directory_config(), stack="people-ad").cluster
