"""The plan's safety table on a hybrid site: changes that cut the site off say so, and the munge secret is
flagged as data."""

from __future__ import annotations

from gpucluster.tools.plan.diff.changes import compare
from gpucluster.tools.plan.diff.safety import TABLE, safety_of
from gpucluster.tools.plan.diff.safety.hybrid import HYBRID_TABLE, SITE_LINK
from gpucluster.tools.plan.diff.text import render
from tests.tools.plan import prcases

VPN = "aws:ec2/vpnConnection:VpnConnection"


def no_bgp(c: prcases.Config) -> None:
    del c["gpucluster:hybrid"]["connectivity"]["bgpAsn"]


def test_dropping_bgp_replaces_the_vpn_and_says_the_site_is_cut_off():
    comparison = compare(prcases.plan_json("hybrid-slurm"), prcases.plan_json("hybrid-slurm", no_bgp))
    (vpn,) = [s for s in comparison.steps if s.type == VPN]
    assert vpn.op == "replace" and "staticRoutesOnly" in vpn.replace_reasons
    assert any("on-premises site is cut off" in d for d in vpn.disruption)
    (cgw,) = [s for s in comparison.steps if s.type == "aws:ec2/customerGateway:CustomerGateway"]
    assert cgw.op == "replace" and "bgpAsn" in cgw.replace_reasons  # 65010 -> the static-route stand-in
    text = render(comparison)
    assert "cut off" in text


def test_site_link_types_are_flagged_and_the_secret_holds_data():
    for token in (
        VPN,
        "aws:ec2transitgateway/transitGateway:TransitGateway",
        "aws:ec2transitgateway/vpcAttachment:VpcAttachment",
        "aws:ec2/customerGateway:CustomerGateway",
        "aws:rolesanywhere/trustAnchor:TrustAnchor",
        "aws:rolesanywhere/profile:Profile",
        "aws:ssm/activation:Activation",
    ):
        entry = safety_of(token)
        assert entry is not None and entry.disruption == SITE_LINK, token
    secret = safety_of("aws:secretsmanager/secret:Secret")
    assert secret is not None and secret.holds_data
    assert set(HYBRID_TABLE) <= set(TABLE)  # one table: the shipped-type and provider-input checks cover them
