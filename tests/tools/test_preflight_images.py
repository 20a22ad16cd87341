"""Preflight's image owners, against moto's server: every AMI the config names is Amazon's, Canonical's or the
account's own; one from any other owner (a community image, one shared from another account) is an error naming its
field, the AMI, its owner and the fix; an unknown id is one too."""

from __future__ import annotations

import urllib.request
from typing import Any

import boto3
import pytest

from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.tools.preflight import Clients, preflight
from tests.conftest import group, make_config

OTHER_ACCOUNT = "111122223333"
AMAZON_AMI = "ami-03cf127a"  # moto's built-in images: owner 801119661308, alias amazon
CANONICAL_AMI = "ami-1e749f67"  # owner 099720109477 (Ubuntu)


@pytest.fixture
def endpoint(moto_endpoint, aws_env) -> str:
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    return moto_endpoint


def as_account(client: Any, account: str) -> Any:
    """``client`` acting in moto as ``account`` (moto keeps one EC2 per account and shares no image across them)."""
    client.meta.events.register("before-sign.*.*", lambda request, **_: request.headers.add_header("x-moto-account-id", account))
    return client


def lock(ami: str) -> dict[str, str]:
    return {"imageId": ami, "ssmParameter": "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id", "lockedAt": "2026-12-01"}  # fmt: skip


def image_findings(config: dict[str, Any], aws: Clients) -> list[Any]:
    spec = load_spec(config, stack="images").spec
    return [f for f in preflight(spec, load_catalog(), aws) if f.code.startswith("image-") or "images' owners" in f.message]


def test_l5_amazon_canonical_and_own_images_pass_an_unknown_one_is_named(endpoint: str):
    aws = Clients.create("us-east-1", endpoint)
    own = aws.ec2.register_image(Name="our-vetted-base")["ImageId"]
    config = make_config(
        group(name="a", imageId=AMAZON_AMI),
        group(name="b", imageLock={**lock(own), "ssmParameter": lock(own)["ssmParameter"].replace("22.04", "24.04")}),
        group(name="c", imageId="ami-0123456789abcdef0"),
        slurm={"headNode": {"imageId": CANONICAL_AMI}},
    )
    found = image_findings(config, aws)
    assert [(f.code, f.path, f.value) for f in found] == [
        ("image-missing", "gpucluster:nodeGroups[2].imageId", "ami-0123456789abcdef0")
    ]


def test_l5_an_image_of_another_owner_is_refused_with_its_field_owner_and_fix(endpoint: str):
    # The image belongs to another account; the stack's account sees it (as a shared or public image would be seen):
    # moto shows another account's images only to a client acting in that account, so EC2 is asked as that account
    # and STS (whose caller identity is "this account") as the stack's own.
    theirs = as_account(boto3.client("ec2", region_name="us-east-1", endpoint_url=endpoint), OTHER_ACCOUNT)
    hostile = theirs.register_image(Name="totally-the-dlami")["ImageId"]
    aws = Clients.create("us-east-1", endpoint)
    aws.ec2 = theirs
    found = image_findings(make_config(group(name="p5", imageLock=lock(hostile))), aws)
    assert [(f.code, f.path, f.value) for f in found] == [("image-owner", "gpucluster:nodeGroups[0].imageLock.imageId", hostile)]
    assert f"is owned by account {OTHER_ACCOUNT}" in found[0].message and "(123456789012)" in found[0].message
    assert "Canonical (099720109477)" in found[0].message and "gpucluster images lock" in found[0].fix
