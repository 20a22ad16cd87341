"""An HTTP proxy in front of moto_server that records every EC2 call and injects what moto cannot do.

The agent's ``endpoint_url`` points here, so the agent runs unmodified: no test-only branch in
its code. Injections (each test says which and why):
- throttle(action, n, skip=k): answer ``RequestLimitExceeded`` n times (botocore must retry), after
  letting the first k calls of that action through (a fault that comes later in the agent's call).
- capacity(group, fulfil=k, code=...): CreateFleet for that node group launches at most k
  instances and reports the rest in ``Errors`` (insufficient capacity inside a 200 response,
  which moto never produces).
- fail(action, code, n): answer an error n times.
- delay(action, seconds): slow an action down (widens race windows).
- crash_client(action, when): SIGKILL the calling agent process before forwarding the request
  or after moto answered it (a crash between launch and tagging).
- DescribeInstanceTopology (moto lacks it): answered from moto's DescribeInstances, with
  network nodes from ``topology_for`` (default: derived from the node-name tag), enforcing
  the API's 100-instance limit and paging ``topology_page_size`` instances per page.
- capacity-block fleets: moto launches nothing for DefaultTargetCapacityType=capacity-block,
  so the request is forwarded as on-demand (the original is what gets recorded).
- S3 (path-style REST: the node maps of ``nodemap.py``): PUT and GET are forwarded and recorded as
  ``S3.PutObject`` / ``S3.GetObject`` (params: ``path``); ``fail`` and ``delay`` apply to them too.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

import boto3

ICE = "InsufficientInstanceCapacity"


@dataclass
class Call:
    action: str
    params: dict[str, str]
    status: int = 0
    injected: str = ""
    seconds: float = 0.0  # time to answer (moto + injected delays)


@dataclass
class _Counted:
    action: str
    remaining: int
    code: str = ""
    message: str = ""
    after: bool = False  # forward to moto first (the call happens), then answer the error
    skip: int = 0  # calls of this action to let through before the rule applies


@dataclass
class Capacity:
    group: str
    fulfil: int  # instances per CreateFleet call at most
    code: str = ICE
    message: str = "We currently do not have sufficient capacity in the Availability Zone you requested."
    calls: int = -1  # how many CreateFleet calls to affect (-1: all)


@dataclass
class Crash:
    action: str
    when: str  # "before" (request not forwarded) or "after" (moto did it, reply lost)
    pid: int | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    fired: bool = False


def fleet_group(params: dict[str, str]) -> str | None:
    """The node group a CreateFleet request is for (from its instance tags)."""
    i = 1
    while f"TagSpecification.{i}.ResourceType" in params:
        j = 1
        while f"TagSpecification.{i}.Tag.{j}.Key" in params:
            if params[f"TagSpecification.{i}.Tag.{j}.Key"] == "gpucluster:node-group":
                return params.get(f"TagSpecification.{i}.Tag.{j}.Value")
            j += 1
        i += 1
    return None


def indexed(params: dict[str, str], prefix: str) -> list[str]:
    out: list[str] = []
    i = 1
    while f"{prefix}.{i}" in params:
        out.append(params[f"{prefix}.{i}"])
        i += 1
    return out


def default_topology(inst: dict[str, Any]) -> list[str]:
    """Three layers: one top node, one per node group, one bottom node per pair of node indexes."""
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    node = tags.get("gpucluster:node-name", "")
    group = tags.get("gpucluster:node-group", "x")
    idx = int(node.rsplit("-", 1)[1]) if node and node.rsplit("-", 1)[-1].isdigit() else 0
    return ["nn-top", f"nn-{group}", f"nn-{group}-{(idx + 1) // 2}"]


def s3_error_xml(code: str, message: str) -> bytes:
    return f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error>".encode()


def error_xml(code: str, message: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()


class FaultProxy:
    def __init__(self, target: str) -> None:
        self.target = urllib.parse.urlparse(target)
        self.target_url = target
        self.calls: list[Call] = []
        self.lock = threading.Lock()
        self.throttles: list[_Counted] = []
        self.failures: list[_Counted] = []
        self.delays: dict[str, float] = {}
        self.capacity_rules: list[Capacity] = []
        self.crashes: list[Crash] = []
        self.topology_for: Callable[[dict[str, Any]], list[str]] = default_topology
        self.topology_page_size = 100
        self._client: Any = None
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ configuration
    def throttle(self, action: str, n: int, code: str = "RequestLimitExceeded", skip: int = 0) -> None:
        self.throttles.append(_Counted(action, n, code, "Request limit exceeded.", skip=skip))

    def fail(self, action: str, code: str, n: int = 1, message: str = "injected failure", after: bool = False) -> None:
        """Answer ``code`` n times; with ``after``, moto still performs the call (a lost answer)."""
        self.failures.append(_Counted(action, n, code, message, after))

    def delay(self, action: str, seconds: float) -> None:
        self.delays[action] = seconds

    def capacity(self, group: str, fulfil: int, code: str = ICE, calls: int = -1) -> None:
        self.capacity_rules.append(Capacity(group, fulfil, code, calls=calls))

    def crash_client(self, action: str, when: str) -> Crash:
        """Arm a crash; the test sets ``crash.pid`` and ``crash.ready`` once the agent process runs."""
        c = Crash(action, when)
        self.crashes.append(c)
        return c

    # ------------------------------------------------------------------ inspection
    def actions(self) -> Counter[str]:
        with self.lock:
            return Counter(c.action for c in self.calls)

    def seconds(self) -> Counter[str]:
        """Total time spent answering, per action."""
        out: Counter[str] = Counter()
        with self.lock:
            for c in self.calls:
                out[c.action] += c.seconds  # pyright: ignore[reportArgumentType]
        return out

    def requests(self, action: str) -> list[dict[str, str]]:
        with self.lock:
            return [c.params for c in self.calls if c.action == action]

    def clear(self) -> None:
        with self.lock:
            self.calls.clear()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ plumbing
    def _forward(self, body: bytes, headers: dict[str, str], method: str = "POST", path: str = "/") -> tuple[int, bytes, str]:
        conn = http.client.HTTPConnection(self.target.hostname, self.target.port, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read(), resp.getheader("Content-Type", "text/xml")
        finally:
            conn.close()

    def _take(self, rules: list[_Counted], action: str, after: bool = False) -> _Counted | None:
        with self.lock:
            for r in rules:
                if r.action == action and r.remaining > 0 and r.after == after:
                    if r.skip > 0:
                        r.skip -= 1
                        continue
                    r.remaining -= 1
                    return r
        return None

    def _crash(self, action: str, when: str) -> bool:
        for c in self.crashes:
            if c.action == action and c.when == when and not c.fired:
                c.ready.wait(20)
                c.fired = True
                if c.pid:
                    os.kill(c.pid, signal.SIGKILL)
                    time.sleep(0.2)
                return True
        return False

    def handle(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:
        params = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}
        call = Call(params.get("Action", "?"), params)
        with self.lock:
            self.calls.append(call)
        started = time.monotonic()
        try:
            return self._handle(call, body, headers)
        finally:
            call.seconds = time.monotonic() - started

    def handle_s3(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:
        call = Call({"PUT": "S3.PutObject", "GET": "S3.GetObject"}.get(method, f"S3.{method}"), {"path": path})
        with self.lock:
            self.calls.append(call)
        started = time.monotonic()
        try:
            if call.action in self.delays:
                time.sleep(self.delays[call.action])
            rule = self._take(self.failures, call.action)
            if rule is not None:
                call.status, call.injected = 503 if rule.code == "SlowDown" else 403, rule.code
                return call.status, s3_error_xml(rule.code, rule.message), "application/xml"
            if self._crash(call.action, "before"):
                call.status, call.injected = 500, "crash"
                return 500, s3_error_xml("InternalError", "client crashed"), "application/xml"
            call.status, out, ctype = self._forward(body, headers, method, path)
            if self._crash(call.action, "after"):
                call.injected = "crash"
            return call.status, out, ctype
        finally:
            call.seconds = time.monotonic() - started

    def _handle(self, call: Call, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:
        params, action = call.params, call.action
        if action in self.delays:
            time.sleep(self.delays[action])
        rule = self._take(self.throttles, action) or self._take(self.failures, action)
        if rule is not None:
            call.status, call.injected = 503 if "Limit" in rule.code or "Thrott" in rule.code else 400, rule.code
            return call.status, error_xml(rule.code, rule.message), "text/xml"
        if self._crash(action, "before"):
            call.status, call.injected = 500, "crash"
            return 500, error_xml("InternalError", "client crashed"), "text/xml"
        if action == "DescribeInstanceTopology":
            status, out = self._topology(params)
            call.status = status
            return status, out, "text/xml"
        injected_errors = ""
        if action == "CreateFleet":
            body, injected_errors = self._fleet_rewrite(params, body)
        status, out, ctype = self._forward(body, headers)
        if injected_errors and status == 200:
            out = out.replace(b"</CreateFleetResponse>", injected_errors.encode() + b"</CreateFleetResponse>")
            call.injected = "capacity"
        late = self._take(self.failures, action, after=True)
        if late is not None:
            call.status, call.injected = 500, late.code
            return 500, error_xml(late.code, late.message), "text/xml"
        call.status = status
        if self._crash(action, "after"):
            call.injected = "crash"
        return status, out, ctype

    def _fleet_rewrite(self, params: dict[str, str], body: bytes) -> tuple[bytes, str]:
        changed = dict(params)
        if changed.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "capacity-block":
            changed["TargetCapacitySpecification.DefaultTargetCapacityType"] = "on-demand"
        group = fleet_group(params)
        want = int(params.get("TargetCapacitySpecification.TotalTargetCapacity", "0"))
        errors = ""
        with self.lock:
            rule = next(
                (r for r in self.capacity_rules if r.group == group and r.calls != 0 and r.fulfil < want),
                None,
            )
            if rule is not None and rule.calls > 0:
                rule.calls -= 1
        if rule is not None:
            changed["TargetCapacitySpecification.TotalTargetCapacity"] = str(rule.fulfil)
            lt = params.get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId", "")
            itype = params.get("LaunchTemplateConfigs.1.Overrides.1.InstanceType", "")
            errors = (
                "<errorSet><item><launchTemplateAndOverrides><launchTemplateSpecification>"
                f"<launchTemplateId>{escape(lt)}</launchTemplateId></launchTemplateSpecification>"
                f"<overrides><instanceType>{escape(itype)}</instanceType></overrides></launchTemplateAndOverrides>"
                f"<lifecycle>on-demand</lifecycle><errorCode>{escape(rule.code)}</errorCode>"
                f"<errorMessage>{escape(rule.message)}</errorMessage></item></errorSet>"
            )
        if changed != params:
            body = urllib.parse.urlencode(changed).encode()
        return body, errors

    def _topology(self, params: dict[str, str]) -> tuple[int, bytes]:
        ids = indexed(params, "InstanceId")
        if len(ids) > 100:
            return 400, error_xml("InvalidParameterValue", "The maximum number of instance IDs is 100.")
        if ids and "MaxResults" in params:
            return 400, error_xml("InvalidParameterCombination", "MaxResults cannot be used with InstanceIds.")
        ec2 = self._moto_client()
        found: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"InstanceIds": ids} if ids else {}
        for page in ec2.get_paginator("describe_instances").paginate(**kwargs):
            for res in page["Reservations"]:
                found.extend(res["Instances"])
        found.sort(key=lambda i: i["InstanceId"])
        start = int(params.get("NextToken") or 0)
        page_items = found[start : start + self.topology_page_size]
        nxt = start + self.topology_page_size
        items = []
        for inst in page_items:
            nodes = self.topology_for(inst) if inst["State"]["Name"] == "running" else []
            nn = "".join(f"<item>{escape(n)}</item>" for n in nodes)
            items.append(
                f"<item><instanceId>{inst['InstanceId']}</instanceId><instanceType>{inst['InstanceType']}</instanceType>"
                f"<networkNodeSet>{nn}</networkNodeSet><availabilityZone>{inst['Placement']['AvailabilityZone']}"
                f"</availabilityZone><zoneId>use1-az1</zoneId></item>"
            )
        token = f"<nextToken>{nxt}</nextToken>" if nxt < len(found) else ""
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<DescribeInstanceTopologyResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{uuid.uuid4()}</requestId><instanceSet>{''.join(items)}</instanceSet>{token}"
            "</DescribeInstanceTopologyResponse>"
        )
        return 200, xml.encode()

    def _moto_client(self) -> Any:
        with self.lock:
            if self._client is None:
                self._client = boto3.session.Session(
                    aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
                ).client("ec2", endpoint_url=self.target_url)
            return self._client

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle + delayed ACK add 40 ms a call
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _reply(self, status: int, out: bytes, ctype: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed on purpose (crash injection)

            def _s3(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("content-length",)}
                try:
                    status, out, ctype = proxy.handle_s3(self.command, self.path, body, headers)
                except Exception as exc:
                    status, out, ctype = 500, s3_error_xml("InternalError", f"proxy: {exc!r}"), "application/xml"
                self._reply(status, out, ctype)

            def do_PUT(self) -> None:
                self._s3()

            def do_GET(self) -> None:
                self._s3()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                try:
                    status, out, ctype = proxy.handle(body, headers)
                except Exception as exc:
                    status, out, ctype = 500, error_xml("InternalError", f"proxy: {exc!r}"), "text/xml"
                self._reply(status, out, ctype)

        return Handler
