"""``gpucluster-login-drain`` (gpucluster_agents/boot/login_drain.py): a login node that Auto Scaling
terminates warns its users, refuses new SSH logins and completes the lifecycle action once no user process is left
or the grace is over — never earlier, and never on a metadata service it cannot read.

The metadata service is a fake IMDSv2 on 127.0.0.1 (token PUT, the target lifecycle state, the instance id). Auto
Scaling is a real boto3 client whose CompleteLifecycleAction is answered by a botocore ``before-call`` handler:
moto (5.2) does not implement CompleteLifecycleAction, and the handler still sees the call after botocore checked its
parameters against the service model. /proc, ``wall``, ``/run/nologin`` and the clocks are the program's seams.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from gpucluster_agents.boot import login_drain as drain
from gpucluster_agents.boot.login_drain import Node
from gpucluster_agents.contract.login_drain import DrainConfig, parse_config
from tests.agents.boot.test_boot import THIRD_PARTY, _imported_modules

SOURCE = Path(drain.__file__)
INSTANCE = "i-0123456789abcdef0"
CFG = DrainConfig("us-east-1", "demo-login", "demo-login-grace", 600, 5)


class FakeImds:
    """IMDSv2 on a free port: the token PUT, ``meta-data/autoscaling/target-lifecycle-state`` (``state``; None:
    404) and ``meta-data/instance-id``; ``broken`` answers every GET with 500."""

    def __init__(self, state: str | None) -> None:
        self.state, self.broken, self.gets = state, False, 0
        imds = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: str) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def do_PUT(self) -> None:
                ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                self._send(200 if ok else 400, "tok" if ok else "")

            def do_GET(self) -> None:
                imds.gets += 1
                answers = {f"/latest/{drain.STATE_ITEM}": imds.state, "/latest/meta-data/instance-id": INSTANCE}
                if self.headers.get("X-aws-ec2-metadata-token") != "tok":
                    return self._send(401, "")
                if imds.broken:
                    return self._send(500, "")
                value = answers.get(self.path)
                self._send(404, "") if value is None else self._send(200, value)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class AutoScaling:
    """A boto3 Auto Scaling client whose CompleteLifecycleAction calls are recorded (with the fake clock's time)
    and answered by ``errors`` in turn (an error code, or None for success), then success."""

    def __init__(self, clock: Clock, errors: list[str | None] | None = None) -> None:
        self.calls: list[tuple[float, dict[str, Any]]] = []
        self.errors = list(errors or [])
        self.clock = clock

    def __call__(self, region: str) -> Any:
        client = boto3.client("autoscaling", region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing")
        client.meta.events.register("before-call.auto-scaling.CompleteLifecycleAction", self._answer)
        return client

    def _answer(self, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls.append((self.clock.now, dict(params["body"])))
        code = self.errors.pop(0) if self.errors else None
        if code is None:
            return AWSResponse("https://autoscaling", 200, {}, None), {"ResponseMetadata": {"HTTPStatusCode": 200}}  # type: ignore[arg-type]
        error = {"Error": {"Code": code, "Message": f"fake {code}"}, "ResponseMetadata": {"HTTPStatusCode": 400}}
        return AWSResponse("https://autoscaling", 400, {}, None), error  # type: ignore[arg-type]


class Clock:
    """A monotonic clock the fake sleep advances; ``at`` runs callbacks once the clock reaches their time."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, 0
        self.at: list[tuple[float, Any]] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        for when, action in [a for a in self.at if a[0] <= self.now]:
            self.at.remove((when, action))
            action()


def proc_tree(root: Path, uids: dict[int, int]) -> Path:
    """A /proc with ``<pid>/status`` per process (real, effective, saved, fs uids all ``uid``) and a non-pid entry."""
    (root / "self").mkdir(parents=True)
    for pid, uid in uids.items():
        (root / str(pid)).mkdir()
        (root / str(pid) / "status").write_text(f"Name:\tproc{pid}\nUmask:\t0022\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    return root


DRAIN_PID = 4242
SYSTEM = {1: 0, 300: 0, 301: 64030, 302: 65534, 303: 105, DRAIN_PID: 0}  # init, root, slurm (sackd), nobody, munge


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    imds = FakeImds("InService")
    clock = Clock()
    walls: list[str] = []
    logs: list[str] = []
    asg = AutoScaling(clock)
    node = Node(
        imds=imds.url,
        proc=str(proc_tree(tmp_path / "proc", SYSTEM)),
        nologin=str(tmp_path / "nologin"),
        wall=walls.append,
        clock=lambda: clock.now,
        sleep=clock.sleep,
        autoscaling=asg,
        log=logs.append,
        pid=DRAIN_PID,
    )
    try:
        yield {"imds": imds, "clock": clock, "walls": walls, "logs": logs, "asg": asg, "node": node, "tmp": tmp_path}
    finally:
        imds.stop()


def add_process(world: dict[str, Any], pid: int, uid: int) -> None:
    proc = Path(world["node"].proc)
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "status").write_text(f"Name:\tbash\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")


EXPECTED_CALL = {  # the query body botocore serialised from the call
    "Action": "CompleteLifecycleAction",
    "Version": "2011-01-01",
    "LifecycleHookName": "demo-login-grace",
    "AutoScalingGroupName": "demo-login",
    "LifecycleActionResult": "CONTINUE",
    "InstanceId": INSTANCE,
}


def test_in_service_does_nothing(world: dict[str, Any]):
    assert drain.watch(world["node"], CFG, polls=4) is None
    assert world["asg"].calls == [] and world["walls"] == []
    assert not (world["tmp"] / "nologin").exists()
    assert world["clock"].sleeps == 4 and world["imds"].gets == 4  # polled every time, state only


def test_terminated_with_a_user_process_waits_and_completes_at_the_grace_end(world: dict[str, Any]):
    add_process(world, 5001, 10001)  # alice's shell
    world["imds"].state = "Terminated"
    assert drain.watch(world["node"], CFG, polls=10) == 0
    [(when, params)] = world["asg"].calls
    assert params == EXPECTED_CALL
    assert when == CFG.grace_seconds  # not one poll earlier: the user had the whole grace
    [message] = world["walls"]
    assert "demo-login" in message and "Save your work" in message and "Jobs keep running" in message and "/home stays" in message
    assert "stops in 10 minutes" in message
    assert (world["tmp"] / "nologin").read_text().startswith("Shutting down: log in again")
    assert any("Session Manager sessions (no PAM) still open" in line for line in world["logs"])
    assert any("uids [10001]" in line for line in world["logs"])


def test_terminated_without_a_user_process_completes_at_once(world: dict[str, Any]):
    """Only system accounts are left (root, slurm 64030, nobody 65534, munge) and the drain itself."""
    world["imds"].state = "Terminated"
    assert drain.watch(world["node"], CFG, polls=1) == 0
    [(when, params)] = world["asg"].calls
    assert params == EXPECTED_CALL and when == 0.0
    assert world["clock"].sleeps == 0 and len(world["walls"]) == 1


def test_the_drain_ends_at_the_poll_after_the_last_user_logs_out(world: dict[str, Any]):
    add_process(world, 5001, 10001)
    add_process(world, 5002, 250001)  # a directory user's id-mapped uid counts as a person too
    world["imds"].state = "Terminated"
    clock: Clock = world["clock"]
    proc = Path(world["node"].proc)
    clock.at += [(60, lambda: (proc / "5001" / "status").unlink()), (121, lambda: (proc / "5002" / "status").unlink())]
    assert drain.watch(world["node"], CFG, polls=1) == 0
    [(when, _)] = world["asg"].calls
    assert when == 125  # the first poll (every 5 s) after both had gone, long before the 600 s grace


def test_metadata_service_down_keeps_polling_and_never_completes(world: dict[str, Any]):
    add_process(world, 5001, 10001)
    with socket.socket() as s:  # a port nobody listens on: connection refused, as with the service disabled
        s.bind(("127.0.0.1", 0))
        world["node"].imds = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert drain.watch(world["node"], CFG, polls=5) is None
    assert world["asg"].calls == [] and world["walls"] == [] and world["clock"].sleeps == 5
    assert sum("IMDS not readable" in line for line in world["logs"]) == 5


def test_metadata_errors_are_not_taken_for_terminated(world: dict[str, Any]):
    world["imds"].state, world["imds"].broken = "Terminated", True  # the state is there, the answers are 500s
    assert drain.watch(world["node"], CFG, polls=3) is None and world["asg"].calls == []
    world["imds"].broken = False
    assert drain.watch(world["node"], CFG, polls=1) == 0 and len(world["asg"].calls) == 1


def test_a_failed_completion_is_tried_again_and_an_ended_action_is_the_end(world: dict[str, Any]):
    world["imds"].state = "Terminated"
    world["asg"].errors = ["Throttling", "ValidationError"]  # then the hook's own timeout had ended the action
    assert drain.watch(world["node"], CFG, polls=1) == 0
    assert [when for when, _ in world["asg"].calls] == [0.0, 5.0]
    assert any("already ended" in line for line in world["logs"])


def test_a_failing_wall_does_not_stop_the_drain(world: dict[str, Any]):
    def broken_wall(message: str) -> None:
        raise subprocess.CalledProcessError(1, ["wall"])

    world["node"].wall = broken_wall
    world["imds"].state = "Terminated"
    assert drain.watch(world["node"], CFG, polls=1) == 0 and len(world["asg"].calls) == 1
    assert (world["tmp"] / "nologin").exists()


@pytest.mark.parametrize(
    ("uid", "person"),
    [(0, False), (999, False), (1000, True), (10001, True), (59999, True), (60000, False), (64030, False),
     (65534, False), (65535, False), (65536, True), (200000, True), (4294967295, False)],
)  # fmt: skip
def test_who_counts_as_a_person(uid: int, person: bool):
    assert drain.is_person(uid) is person


def doc(**changes: object) -> dict[str, object]:
    d: dict[str, object] = {
        "region": "us-east-1",
        "asg_name": "demo-login",
        "hook_name": "demo-login-grace",
        "grace_seconds": 600,
        "poll_seconds": 5,
    }
    d.update(changes)
    return {k: v for k, v in d.items() if v is not ...}


def test_the_config_parses():
    assert parse_config(doc()) == CFG


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (doc(hook_name=...), "hook_name: required key is missing"),
        (doc(extra=1), "extra: unknown key"),
        (doc(region=""), "region: must be a non-empty string"),
        (doc(grace_seconds=20), "grace_seconds: must be seconds from 30 to 7200, got 20"),
        (doc(grace_seconds="600"), "grace_seconds: must be seconds"),
        (doc(poll_seconds=True), "poll_seconds: must be seconds from 1 to 300, got True"),
        (doc(poll_seconds=0), "poll_seconds: must be seconds"),
    ],
)
def test_a_bad_config_is_refused_with_the_key_named(bad: dict[str, object], message: str):
    with pytest.raises(ValueError) as exc:
        parse_config(bad)
    assert message in str(exc.value)


def test_every_config_problem_is_reported_at_once():
    with pytest.raises(ValueError) as exc:
        parse_config(doc(region=..., poll_seconds=-1, x=1))
    text = str(exc.value)
    assert "region: required" in text and "poll_seconds: must be" in text and "x: unknown key" in text


def test_the_program_runs_from_the_package_with_help_and_stops_on_a_bad_config(tmp_path: Path):
    """As its unit starts it: ``-E -s -m`` from the package's root (tests/render/slurm/test_login_drain_shipped.py
    runs it from the shipped zip)."""
    program = [sys.executable, "-E", "-s", "-m", "gpucluster_agents.boot.login_drain"]
    root = SOURCE.parents[2]
    helped = subprocess.run([*program, "--help"], cwd=root, capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "config" in helped.stdout and "Drain a login node on scale-in" in helped.stdout
    config = tmp_path / "login-drain.json"
    config.write_text(json.dumps(doc(grace_seconds=...)))
    run = [*program, str(config), "--log", str(tmp_path / "log")]
    bad = subprocess.run(run, cwd=root, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 1 and f"bad config {config}" in bad.stderr and "grace_seconds: required" in bad.stderr


def test_the_file_log_appends_timestamped_lines(tmp_path: Path):
    log = drain.file_log(str(tmp_path / "var/log/gpucluster/login-drain.log"))
    log("one")
    log("two")
    lines = (tmp_path / "var/log/gpucluster/login-drain.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["gpucluster-login-drain: one", "gpucluster-login-drain: two"]


def test_the_program_imports_only_the_standard_library_boto3_and_the_contract():
    """It runs from the installed node package: of the package, only its config's schema (the contract)."""
    imported = _imported_modules(SOURCE.read_text())
    relative = {name for name in imported if name.startswith(".")}
    assert relative == {"..contract.login_drain"}, relative
    imported -= relative
    tops = {name.split(".")[0] for name in imported}
    assert "gpucluster_agents" not in tops and "gpucluster" not in tops
    assert tops - THIRD_PARTY <= set(sys.stdlib_module_names), tops - THIRD_PARTY - set(sys.stdlib_module_names)
    assert "boto3" in tops


def test_the_program_parses_as_python_3_9():
    source = SOURCE.read_text()
    import ast

    ast.parse(source, feature_version=(3, 9))
    assert "from __future__ import annotations" in source
