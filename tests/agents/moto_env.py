"""A local moto server and the EC2 "world" (VPC, subnets, launch templates) the agent launches into."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

REGION = "us-east-1"
AMI_ID = "ami-0a1b2c3d4e5f60718"
# One AMI instead of moto's thousands: loading those costs ~1.3 s after every reset.
AMIS = [
    {
        "ami_id": AMI_ID,
        "name": "gpucluster-test-al2023-x86_64",
        "description": "test AMI",
        "owner_id": "123456789012",
        "public": True,
        "state": "available",
        "architecture": "x86_64",
        "virtualization_type": "hvm",
        "hypervisor": "xen",
        "root_device_type": "ebs",
        "root_device_name": "/dev/xvda",
        "image_type": "machine",
        "image_location": "amazon/gpucluster-test",
        "sriov": "simple",
    }
]
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def moto_server_binary() -> str:
    here = Path(sys.executable).parent / "moto_server"
    if here.exists():
        return str(here)
    found = shutil.which("moto_server")
    if not found:
        raise RuntimeError("moto_server not found: pip install 'moto[server]'")
    return found


class MotoServer:
    """``moto_server -H 127.0.0.1 -p <port>`` as a child process."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log_path, "wb")
        amis = log_path.parent / "moto-amis.json"
        amis.write_text(json.dumps(AMIS))
        env = dict(os.environ)
        env["MOTO_AMIS_PATH"] = str(amis)
        self.proc = subprocess.Popen(
            [moto_server_binary(), "-H", "127.0.0.1", "-p", str(self.port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}; see {log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/data.json", timeout=1) as r:
                    r.read()
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto_server did not answer within 30 s") from None
                time.sleep(0.1)

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.url}/moto-api/reset", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


_CLIENTS: dict[str, Any] = {}


def ec2_client(url: str) -> Any:
    """A boto3 EC2 client for the test's own look-ups in moto (cached: creating one costs ~0.15 s)."""
    if url not in _CLIENTS:
        _CLIENTS[url] = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        ).client("ec2", endpoint_url=url)
    return _CLIENTS[url]


@dataclass
class World:
    vpc_id: str
    subnet_ids: list[str]
    launch_templates: dict[str, str]  # group name -> launch template id


def make_world(url: str, groups: dict[str, str]) -> World:
    """A VPC, two subnets and one launch template per node group (``{group: instance_type}``)."""
    ec2 = ec2_client(url)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/19", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"],
        ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.32.0/19", AvailabilityZone=f"{REGION}b")["Subnet"]["SubnetId"],
    ]
    ami = ec2.describe_images(ImageIds=[AMI_ID])["Images"][0]["ImageId"]
    lts: dict[str, str] = {}
    for name, itype in groups.items():
        lt = ec2.create_launch_template(
            LaunchTemplateName=f"gpucluster-{name}",
            LaunchTemplateData={"ImageId": ami, "InstanceType": itype},
        )
        lts[name] = lt["LaunchTemplate"]["LaunchTemplateId"]
    return World(vpc, subnets, lts)


def instances(url: str, cluster: str | None = None, states: tuple[str, ...] = ("pending", "running")) -> list[dict[str, Any]]:
    """Instances in moto (optionally of one cluster), as plain dicts with a ``tags`` mapping."""
    ec2 = ec2_client(url)
    filters = [{"Name": "instance-state-name", "Values": list(states)}]
    if cluster:
        filters.append({"Name": "tag:gpucluster:cluster", "Values": [cluster]})
    out: list[dict[str, Any]] = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for res in page["Reservations"]:
            for inst in res["Instances"]:
                inst["tags"] = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                out.append(inst)
    return out


def node_instances(url: str, cluster: str) -> dict[str, list[str]]:
    """node name -> ids of its pending/running instances ("" key: instances without a node tag)."""
    out: dict[str, list[str]] = {}
    for inst in instances(url, cluster):
        out.setdefault(inst["tags"].get("gpucluster:node-name", ""), []).append(inst["InstanceId"])
    return out


def write_config(path: Path, cfg: dict[str, Any]) -> Path:
    path.write_text(json.dumps(cfg, indent=1))
    return path


def agent_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENV)
    if extra:
        env.update(extra)
    return env
