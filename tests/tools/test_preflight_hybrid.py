"""Hybrid preflight (gpucluster.tools.preflight.hybrid) against moto's server for EC2 (Transit Gateways, VPN
gateways, customer gateways) and ACM PCA, and botocore's Stubber for IAM Roles Anywhere, which moto does not
implement: each stubbed call is checked against the real botocore model (operation name, parameters, response
shape), so a misspelt call fails here."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.tools.preflight import Clients, preflight
from gpucluster.tools.preflight.hybrid import (
    TRUST_ANCHOR_QUOTA,
    check_customer_gateways,
    check_gateways,
    check_private_ca,
    check_trust_anchors,
    check_vpc_overlap,
)
from tests.config.hybrid.test_hybrid_checks import H, stack

CATALOG = load_catalog()
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def aws(moto_endpoint, aws_env):
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    clients = Clients.create("us-east-1", moto_endpoint)
    # moto has no IAM Roles Anywhere: a client whose every call must be stubbed (Stubber refuses the rest)
    clients.rolesanywhere = boto3.client("rolesanywhere", region_name="us-east-1", endpoint_url="http://127.0.0.1:9")
    return clients


def spec_with(**hybrid: Any):
    config = copy.deepcopy(stack("hybrid-slurm"))
    config[H].update(hybrid)
    return load_spec(config, stack="hybrid-slurm", catalog=CATALOG).spec


def new_ca(aws: Clients) -> str:
    return aws.acm_pca.create_certificate_authority(
        CertificateAuthorityConfiguration={
            "KeyAlgorithm": "RSA_2048",
            "SigningAlgorithm": "SHA256WITHRSA",
            "Subject": {"CommonName": "site-ca"},
        },
        CertificateAuthorityType="ROOT",
    )["CertificateAuthorityArn"]


def anchor(n: int, pca: str | None = None, enabled: bool = True) -> dict[str, Any]:
    source: dict[str, Any] = (
        {"sourceType": "AWS_ACM_PCA", "sourceData": {"acmPcaArn": pca}}
        if pca
        else {"sourceType": "CERTIFICATE_BUNDLE", "sourceData": {"x509CertificateData": "-----BEGIN CERTIFICATE-----"}}
    )
    return {
        "trustAnchorId": f"{n:08x}-0000-4000-8000-000000000000",
        "trustAnchorArn": f"arn:aws:rolesanywhere:us-east-1:123456789012:trust-anchor/{n:08x}-0000-4000-8000-000000000000",
        "name": f"anchor-{n}",
        "source": source,
        "enabled": enabled,
        "createdAt": NOW,
        "updatedAt": NOW,
    }


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def test_private_ca_missing_pending_then_active(aws):
    missing = spec_with(credentials={"acmPcaArn": "arn:aws:acm-pca:us-east-1:123456789012:certificate-authority/"
                                                  "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"})  # fmt: skip
    [f] = list(check_private_ca(missing, CATALOG, aws))
    assert (f.code, f.path) == ("hybrid-pca-missing", f"{H}.credentials.acmPcaArn")
    assert f.message.startswith("AWS Private CA arn:aws:acm-pca:us-east-1:123456789012:certificate-authority/0f1e2d3c")
    assert "does not exist (ResourceNotFoundException)" in f.message and f.fix

    arn = new_ca(aws)
    spec = spec_with(credentials={"acmPcaArn": arn})
    [f] = list(check_private_ca(spec, CATALOG, aws))
    assert f.code == "hybrid-pca-not-active"
    assert f.message == f"AWS Private CA {arn} is PENDING_CERTIFICATE, not ACTIVE: IAM Roles Anywhere cannot anchor trust in it"

    aws.acm_pca.update_certificate_authority(CertificateAuthorityArn=arn, Status="ACTIVE")
    assert list(check_private_ca(spec, CATALOG, aws)) == []


def test_private_ca_not_asked_for_a_pem_anchor(aws):
    pem = "-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----"
    spec = spec_with(credentials={"caCertificatePem": pem})
    assert list(check_private_ca(spec, CATALOG, aws)) == []


def test_existing_transit_gateway(aws):
    spec = spec_with(connectivity={"type": "existing-tgw", "transitGatewayId": "tgw-0123456789abcdef0"})
    [f] = list(check_gateways(spec, CATALOG, aws))
    assert (f.code, f.path, f.message) == (
        "hybrid-tgw-missing",
        f"{H}.connectivity.transitGatewayId",
        "Transit Gateway tgw-0123456789abcdef0 does not exist in us-east-1",
    )
    tgw = aws.ec2.create_transit_gateway(Description="site")["TransitGateway"]["TransitGatewayId"]
    spec = spec_with(connectivity={"type": "existing-tgw", "transitGatewayId": tgw})
    assert list(check_gateways(spec, CATALOG, aws)) == []


def test_transit_gateway_being_deleted(aws):
    tgw = aws.ec2.create_transit_gateway(Description="site")["TransitGateway"]["TransitGatewayId"]
    aws.ec2.delete_transit_gateway(TransitGatewayId=tgw)
    spec = spec_with(connectivity={"type": "direct-connect", "transitGatewayId": tgw})
    found = list(check_gateways(spec, CATALOG, aws))
    assert codes(found) in (["hybrid-tgw-state"], ["hybrid-tgw-missing"])  # moto keeps it "deleted" or drops it
    if found[0].code == "hybrid-tgw-state":
        assert found[0].message == f"Transit Gateway {tgw} is deleted, not available"


def test_existing_vpn_gateway_for_direct_connect(aws):
    spec = spec_with(connectivity={"type": "direct-connect", "vpnGatewayId": "vgw-0123456789abcdef0"})
    [f] = list(check_gateways(spec, CATALOG, aws))
    assert (f.code, f.message) == (
        "hybrid-vgw-missing",
        "virtual private gateway vgw-0123456789abcdef0 does not exist in us-east-1",
    )
    vgw = aws.ec2.create_vpn_gateway(Type="ipsec.1")["VpnGateway"]["VpnGatewayId"]
    spec = spec_with(connectivity={"type": "direct-connect", "vpnGatewayId": vgw})
    assert list(check_gateways(spec, CATALOG, aws)) == []


def test_customer_gateway_collisions(aws):
    spec = spec_with()  # 203.0.113.10, ASN 65010
    assert list(check_customer_gateways(spec, CATALOG, aws)) == []

    same_ip = aws.ec2.create_customer_gateway(Type="ipsec.1", PublicIp="203.0.113.10", BgpAsn=65020)["CustomerGateway"]
    [f] = list(check_customer_gateways(spec, CATALOG, aws))
    assert (f.code, f.path) == ("hybrid-cgw-asn-clash", f"{H}.connectivity.bgpAsn")
    assert f.message == (
        f"customer gateway {same_ip['CustomerGatewayId']} already has the address 203.0.113.10 with ASN 65020: one VPN "
        "device speaks BGP with one ASN, not 65010"
    )
    assert f.fix == "use bgpAsn: 65020 (the device's), or check customerGatewayIp"
    aws.ec2.delete_customer_gateway(CustomerGatewayId=same_ip["CustomerGatewayId"])

    aws.ec2.create_customer_gateway(Type="ipsec.1", PublicIp="203.0.113.10", BgpAsn=65010)
    assert codes(check_customer_gateways(spec, CATALOG, aws)) == ["hybrid-cgw-shared"]

    other = aws.ec2.create_customer_gateway(Type="ipsec.1", PublicIp="198.51.100.7", BgpAsn=65010)["CustomerGateway"]
    found = [f for f in check_customer_gateways(spec, CATALOG, aws) if f.code == "hybrid-cgw-asn-shared"]
    assert [f.message for f in found] == [
        f"customer gateway {other['CustomerGatewayId']} (198.51.100.7) of another device uses ASN 65010 too: on one "
        "Transit Gateway, each site drops the routes of the other (BGP sees its own ASN in the path)"
    ]


def test_trust_anchor_quota_counts_every_page(aws):
    spec = spec_with()
    with Stubber(aws.rolesanywhere) as stub:
        stub.add_response("list_trust_anchors", {"trustAnchors": [anchor(n) for n in range(30)], "nextToken": "p2"}, {})
        stub.add_response("list_trust_anchors", {"trustAnchors": [anchor(n) for n in range(30, 50)]}, {"nextToken": "p2"})
        found = list(check_trust_anchors(spec, CATALOG, aws))
        stub.assert_no_pending_responses()
    assert codes(found) == ["hybrid-trust-anchor-quota"]
    assert found[0].message == (
        f"the account has 50 IAM Roles Anywhere trust anchors in us-east-1; the default quota is {TRUST_ANCHOR_QUOTA}, "
        "and creating this site's would fail unless it was raised"
    )
    assert found[0].level.value == "warning"


def test_trust_anchor_of_the_same_private_ca(aws):
    spec = spec_with()
    arn = spec.hybrid.credentials.acm_pca_arn
    with Stubber(aws.rolesanywhere) as stub:
        stub.add_response("list_trust_anchors", {"trustAnchors": [anchor(1), anchor(2, arn, enabled=False)]}, {})
        found = list(check_trust_anchors(spec, CATALOG, aws))
    assert codes(found) == ["hybrid-trust-anchor-shared"]
    assert found[0].message.startswith("trust anchor anchor-2 (disabled) already trusts this Private CA")


def test_ssm_credentials_need_no_trust_anchor(aws):
    spec = spec_with(credentials={"type": "ssm"})
    with Stubber(aws.rolesanywhere):  # any call would raise: nothing is queued
        assert list(check_trust_anchors(spec, CATALOG, aws)) == []


def test_whole_preflight_reports_a_refused_call_and_goes_on(aws):
    """Roles Anywhere answers AccessDenied: one "could not check" warning at the credentials, and the other hybrid
    checks (moto) still run and find the missing Transit Gateway."""
    spec = spec_with(connectivity={"type": "existing-tgw", "transitGatewayId": "tgw-0123456789abcdef0"})
    arn = new_ca(aws)
    aws.acm_pca.update_certificate_authority(CertificateAuthorityArn=arn, Status="ACTIVE")
    spec = spec.model_copy(update={"hybrid": spec.hybrid.model_copy(update={
        "credentials": spec.hybrid.credentials.model_copy(update={"acm_pca_arn": arn})})})  # fmt: skip
    with Stubber(aws.rolesanywhere) as stub:
        stub.add_client_error("list_trust_anchors", "AccessDeniedException", "not authorized", 403)
        findings = preflight(spec, CATALOG, aws)
    hybrid = [f for f in findings if f.path.startswith(H)]
    assert sorted(codes(hybrid)) == ["check-failed", "hybrid-tgw-missing"], [f.render() for f in hybrid]
    failed = next(f for f in hybrid if f.code == "check-failed")
    assert failed.path == f"{H}.credentials"
    assert failed.message == "could not check IAM Roles Anywhere trust anchors: AccessDeniedException: not authorized"


def test_a_cluster_without_hybrid_asks_nothing_hybrid(aws):
    config = {k: v for k, v in stack("hybrid-slurm").items() if k != H}
    spec = load_spec(config, stack="plain", catalog=CATALOG).spec
    with Stubber(aws.rolesanywhere), Stubber(aws.acm_pca):
        for check in (check_private_ca, check_gateways, check_customer_gateways, check_trust_anchors):
            assert list(check(spec, CATALOG, aws)) == []


def test_own_vpc_cidr_blocks_against_the_site(aws):
    """The loader cannot see your own VPC's CIDRs; preflight reads every associated block (moto's EC2)."""
    vpc = aws.ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        aws.ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]["SubnetId"]
        for cidr, zone in (("10.0.0.0/20", "us-east-1a"), ("10.0.16.0/20", "us-east-1b"))
    ]
    config = copy.deepcopy(stack("hybrid-slurm"))
    config["gpucluster:network"] = {
        "vpcId": vpc,
        "subnets": [{"id": s, "availabilityZone": z} for s, z in zip(subnets, ("us-east-1a", "us-east-1b"), strict=True)],
    }
    spec = load_spec(config, stack="byo", catalog=CATALOG).spec
    assert list(check_vpc_overlap(spec, CATALOG, aws)) == []

    aws.ec2.associate_vpc_cidr_block(VpcId=vpc, CidrBlock="10.20.0.0/16")
    found = list(check_vpc_overlap(spec, CATALOG, aws))
    assert [(f.code, f.path) for f in found] == [
        ("hybrid-cidr-overlaps-cloud", f"{H}.onPremCidrs[0]"),
        ("hybrid-cidr-overlaps-cloud", f"{H}.loginNodeCidrs[0]"),
    ]
    assert found[0].message == (
        f"10.20.0.0/16 overlaps 10.20.0.0/16, a CIDR block of your VPC {vpc}: traffic for it would stay in AWS instead "
        "of crossing the link"
    )
