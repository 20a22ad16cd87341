"""The update-safety entries of a hybrid site's resources (:mod:`gpucluster.components.hybrid.hybrid_link`,
:mod:`gpucluster.components.hybrid.onprem_credentials`), merged into :data:`gpucluster.tools.plan.diff.safety.TABLE`.

``disruption="site-link"``: replacing or deleting the resource cuts the on-premises site off (a new VPN
connection has new tunnel addresses and keys the site's device must be given; a new Transit Gateway or
attachment drops every route through it; a new trust anchor, profile or activation invalidates the site
controller's credentials) until the site is reconfigured from the new ``hybrid`` outputs. Sources are the
pinned provider's force-new schema fields, as for the rest of the table.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucluster.tools.plan.diff.safety.types import TF, Safety


def _tf(path: str) -> str:
    return TF + path


SITE_LINK = "site-link"

HYBRID_TABLE: Mapping[str, Safety] = {
    # --- the link -----------------------------------------------------------------------------------
    "aws:ec2/customerGateway:CustomerGateway": Safety(
        _tf("ec2/vpnsite_customer_gateway.go"),
        replace_on=("bgpAsn", "bgpAsnExtended", "certificateArn", "deviceName", "ipAddress", "type"),
        disruption=SITE_LINK,
    ),
    "aws:ec2/vpnGateway:VpnGateway": Safety(
        _tf("ec2/vpnsite_gateway.go"), replace_on=("amazonSideAsn", "availabilityZone"), disruption=SITE_LINK
    ),
    "aws:ec2/vpnGatewayAttachment:VpnGatewayAttachment": Safety(
        _tf("ec2/vpnsite_gateway_attachment.go"), replace_on=("vpcId", "vpnGatewayId"), disruption=SITE_LINK
    ),
    "aws:ec2/vpnGatewayRoutePropagation:VpnGatewayRoutePropagation": Safety(
        _tf("ec2/vpnsite_gateway_route_propagation.go"), replace_on=("routeTableId", "vpnGatewayId")
    ),
    "aws:ec2/vpnConnection:VpnConnection": Safety(
        _tf("ec2/vpnsite_connection.go"),
        replace_on=(
            "staticRoutesOnly",
            "enableAcceleration",
            "tunnelInsideIpVersion",
            "tunnel1InsideCidr",
            "tunnel2InsideCidr",
            "tunnel1InsideIpv6Cidr",
            "tunnel2InsideIpv6Cidr",
        ),
        disruption=SITE_LINK,
    ),
    "aws:ec2/vpnConnectionRoute:VpnConnectionRoute": Safety(
        _tf("ec2/vpnsite_connection_route.go"), replace_on=("destinationCidrBlock", "vpnConnectionId")
    ),
    "aws:ec2transitgateway/transitGateway:TransitGateway": Safety(
        _tf("ec2/transitgateway_.go"), replace_on=("amazonSideAsn", "multicastSupport"), disruption=SITE_LINK
    ),
    "aws:ec2transitgateway/vpcAttachment:VpcAttachment": Safety(
        _tf("ec2/transitgateway_vpc_attachment.go"), replace_on=("transitGatewayId", "vpcId"), disruption=SITE_LINK
    ),
    "aws:ec2transitgateway/route:Route": Safety(
        _tf("ec2/transitgateway_route.go"),
        replace_on=("destinationCidrBlock", "transitGatewayRouteTableId", "transitGatewayAttachmentId", "blackhole"),
    ),
    "aws:ec2/route:Route": Safety(
        _tf("ec2/vpc_route.go"),
        replace_on=("routeTableId", "destinationCidrBlock", "destinationIpv6CidrBlock", "destinationPrefixListId"),
    ),
    # --- names across the sites ---------------------------------------------------------------------
    "aws:route53/resolverEndpoint:ResolverEndpoint": Safety(
        _tf("route53resolver/endpoint.go"), replace_on=("direction", "securityGroupIds")
    ),
    "aws:route53/resolverRule:ResolverRule": Safety(_tf("route53resolver/rule.go"), replace_on=("domainName", "ruleType")),
    "aws:route53/resolverRuleAssociation:ResolverRuleAssociation": Safety(
        _tf("route53resolver/rule_association.go"), replace_on=("resolverRuleId", "vpcId", "name")
    ),
    # --- the site's credentials ---------------------------------------------------------------------
    # Every argument of a trust anchor and a profile is updatable in place; a replacement (a renamed
    # resource, a deletion) gives new ARNs the site's credential_process profile still names.
    "aws:rolesanywhere/trustAnchor:TrustAnchor": Safety(_tf("rolesanywhere/trust_anchor.go"), disruption=SITE_LINK),
    "aws:rolesanywhere/profile:Profile": Safety(_tf("rolesanywhere/profile.go"), disruption=SITE_LINK),
    "aws:ssm/activation:Activation": Safety(
        _tf("ssm/activation.go"),
        replace_on=("name", "description", "expirationDate", "iamRole", "registrationLimit"),
        disruption=SITE_LINK,
    ),
}
