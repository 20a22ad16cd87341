"""What AWS and Helm would answer, made up deterministically: ids and ARNs per resource type (``vpc-…``,
``lt-…``, IAM ARNs…), EKS and Helm release state, availability zones, and ``getInstanceType`` answered
from the instance catalog in the provider's schema.

Ids are derived from a hash of the resource's type and name, so two plans of the same stack are
byte-identical and a diff between plans shows only real changes. The tables live apart from
:class:`~gpucluster.tools.plan.run.mocks.PlanMocks` so a new resource type is one row here."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from gpucluster.facts.catalog import InstanceFacts

ACCOUNT = "123456789012"


def digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


# type token → (id prefix, ARN resource path with {id}/{name}); None ARN: the type has none.
EC2_IDS: dict[str, tuple[str, str | None]] = {
    "aws:ec2/vpc:Vpc": ("vpc-", "vpc/{id}"),
    "aws:ec2/subnet:Subnet": ("subnet-", "subnet/{id}"),
    "aws:ec2/internetGateway:InternetGateway": ("igw-", "internet-gateway/{id}"),
    "aws:ec2/eip:Eip": ("eipalloc-", "elastic-ip/{id}"),
    "aws:ec2/natGateway:NatGateway": ("nat-", "natgateway/{id}"),
    "aws:ec2/routeTable:RouteTable": ("rtb-", "route-table/{id}"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("rtbassoc-", None),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("vpce-", "vpc-endpoint/{id}"),
    "aws:ec2/securityGroup:SecurityGroup": ("sg-", "security-group/{id}"),
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": ("sg-", "security-group/{id}"),
    "aws:ec2/flowLog:FlowLog": ("fl-", "vpc-flow-log/{id}"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("sgr-", "security-group-rule/{id}"),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("sgr-", "security-group-rule/{id}"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("lt-", "launch-template/{id}"),
    # Resources a program of your own may create and wire into the components (whose checks want real ids).
    "aws:ec2/capacityReservation:CapacityReservation": ("cr-", "capacity-reservation/{id}"),
    "aws:ec2/instance:Instance": ("i-", "instance/{id}"),
    "aws:ebs/volume:Volume": ("vol-", "volume/{id}"),
    "aws:ec2/networkInterface:NetworkInterface": ("eni-", "network-interface/{id}"),
    "aws:ec2/keyPair:KeyPair": ("key-", "key-pair/{name}"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("fs-", None),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("dra-", None),
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem": ("fs-", None),
    "aws:fsx/openZfsVolume:OpenZfsVolume": ("fsvol-", None),
    # A hybrid site's link.
    "aws:ec2/customerGateway:CustomerGateway": ("cgw-", "customer-gateway/{id}"),
    "aws:ec2/vpnGateway:VpnGateway": ("vgw-", "vpn-gateway/{id}"),
    "aws:ec2/vpnConnection:VpnConnection": ("vpn-", "vpn-connection/{id}"),
    "aws:ec2transitgateway/transitGateway:TransitGateway": ("tgw-", "transit-gateway/{id}"),
    "aws:ec2transitgateway/vpcAttachment:VpcAttachment": ("tgw-attach-", "transit-gateway-attachment/{id}"),
}

# Resources whose physical name Pulumi generates (``<logical name>-<7 hex>``) when none is given.
AUTONAMED = {
    "aws:ec2/placementGroup:PlacementGroup",
    "aws:ec2/securityGroup:SecurityGroup",
    "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:autoscaling/group:Group",
    "aws:iam/role:Role",
    "aws:iam/instanceProfile:InstanceProfile",
    "aws:iam/policy:Policy",
    "aws:iam/rolePolicy:RolePolicy",
    "aws:s3/bucket:Bucket",
    "aws:s3/bucketV2:BucketV2",
    "aws:secretsmanager/secret:Secret",
    "aws:kms/alias:Alias",
    "aws:eks/cluster:Cluster",
    "aws:eks/nodeGroup:NodeGroup",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:ssm/parameter:Parameter",
    "aws:sqs/queue:Queue",
    "aws:cloudwatch/eventRule:EventRule",
}

REGION_ZONES = {
    "us-east-1": "abcdef",
    "us-east-2": "abc",
    "us-west-2": "abcd",
    "eu-west-1": "abc",
    "ap-northeast-1": "acd",
}


def instance_type_result(facts: InstanceFacts) -> dict[str, Any]:
    """``aws:ec2/getInstanceType`` answered from the catalog, in the provider's camelCase schema."""
    return {
        "id": facts.instance_type,
        "instanceType": facts.instance_type,
        "defaultVcpus": facts.vcpus,
        "memorySize": facts.memory_mib,
        "supportedArchitectures": list(facts.architectures),
        "networkPerformance": facts.network_performance,
        "maximumNetworkCards": len(facts.network_cards),
        "maximumNetworkInterfaces": facts.max_network_interfaces,
        "networkCards": [
            {
                "index": c.index,
                "baselineBandwidth": c.baseline_gbps,
                "peakBandwidth": c.baseline_gbps,
                "maximumInterfaces": c.max_interfaces,
                "performance": f"{c.baseline_gbps:g} Gigabit",
            }
            for c in facts.network_cards
        ],
        "efaSupported": facts.efa_supported,
        "efaMaximumInterfaces": facts.max_efa_interfaces,
        "gpuses": [
            {"count": a.count, "manufacturer": a.manufacturer, "memorySize": a.memory_mib, "name": a.model} for a in facts.gpus
        ],
        "neuronDevices": [
            {"count": a.count, "name": a.model, "memorySize": a.memory_mib, "coreCount": 0, "coreVersion": 0}
            for a in facts.accelerators
            if a.kind == "neuron"
        ],
        "instanceStorageSupported": facts.nvme_disk_count > 0,
        "instanceDisks": [{"count": facts.nvme_disk_count, "size": facts.nvme_disk_size_gb, "type": "ssd"}]
        if facts.nvme_disk_count
        else [],
        "totalInstanceStorage": facts.nvme_total_gb,
        "supportedPlacementStrategies": list(facts.placement_strategies),
        "supportedUsagesClasses": list(facts.usage_classes),
    }


def _uuid(h: str) -> str:
    return "-".join((h[:8], h[8:12], h[12:16], digest(h, "u", length=4), digest(h, "uuid", length=12)))


def eks_state(token: str, rid: str, h: str, state: dict[str, Any], region: str, account: str) -> dict[str, Any]:
    """What EKS returns for a cluster (endpoint, CA, OIDC issuer, cluster security group), a managed
    node group, an add-on, an access entry or a Pod Identity association: the ARNs and attributes the program reads back."""
    kind = token.split(":")[-1]
    arn = f"arn:aws:eks:{region}:{account}"
    cluster = state.get("clusterName") or state.get("name") or rid
    if kind == "Cluster":
        oidc = digest(h, "oidc", length=32).upper()
        return {
            "arn": f"{arn}:cluster/{cluster}",
            "endpoint": f"https://{oidc}.gr7.{region}.eks.amazonaws.com",
            "certificateAuthority": {"data": base64.b64encode(f"fake CA of {cluster}".encode()).decode()},
            "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/{oidc}"}]}],
            "vpcConfig": {**state.get("vpcConfig", {}), "clusterSecurityGroupId": f"sg-{digest(h, 'cluster-sg')}"},
            "platformVersion": "eks.1",
            "status": "ACTIVE",
        }
    if kind == "NodeGroup":
        return {"arn": f"{arn}:nodegroup/{cluster}/{state.get('nodeGroupName', rid)}/{_uuid(h)}", "status": "ACTIVE"}
    if kind == "Addon":
        return {"arn": f"{arn}:addon/{cluster}/{state.get('addonName', rid)}/{_uuid(h)}"}
    if kind == "AccessEntry":
        return {"accessEntryArn": f"{arn}:access-entry/{cluster}/{_uuid(h)}", "arn": f"{arn}:access-entry/{cluster}/{_uuid(h)}"}
    if kind == "PodIdentityAssociation":  # EKS's association ids: "a-" and 17 lowercase letters and digits
        aid = "a-" + digest(h, "pod-identity", length=17)
        return {"associationId": aid, "associationArn": f"{arn}:podidentityassociation/{cluster}/{aid}"}
    return {}


def network_state(token: str, rid: str, h: str, state: dict[str, Any], account: str) -> dict[str, Any]:
    """What EC2 fills in on a launch template (version 1), a VPC (its default security group and main route
    table), an Elastic IP, a subnet, an interface or an instance (a private address from the hash)."""
    if token == "aws:ec2/launchTemplate:LaunchTemplate":
        return {"latestVersion": 1, "defaultVersion": 1}
    if token == "aws:ec2/vpc:Vpc":
        return {
            "defaultSecurityGroupId": f"sg-{digest(h, 'default')}",
            "mainRouteTableId": f"rtb-{digest(h, 'main')}",
            "ownerId": account,
        }
    if token == "aws:ec2/eip:Eip":
        return {"allocationId": rid, "publicIp": f"203.0.113.{int(h[:2], 16) % 254 + 1}"}
    if token == "aws:ec2/subnet:Subnet":
        return {"ownerId": state.get("ownerId", account)}
    if token in ("aws:ec2/networkInterface:NetworkInterface", "aws:ec2/instance:Instance"):
        # A private address in the first /19 of the default VPC CIDR (10.0.0.0/16), from the hash.
        ip = f"10.0.{int(h[:2], 16) % 32}.{int(h[2:4], 16) % 250 + 4}"
        return {"privateIp": state.get("privateIp", ip), "privateIps": state.get("privateIps", [ip])}
    return {}


def image_builder_state(token: str, h: str, state: dict[str, Any], region: str, account: str) -> dict[str, Any]:
    """What Image Builder fills in: a component's or recipe's ARN names its name and version (as AWS's do), and an
    image's AMI follows its recipe's version, so a new recipe version is a new AMI in the plan (as after a real build),
    and the same config planned under another stack name gets the same AMI."""
    kind = token.split(":")[-1]
    arn = f"arn:aws:imagebuilder:{region}:{account}"
    if kind in ("Component", "ImageRecipe"):
        path = "component" if kind == "Component" else "image-recipe"
        return {"arn": f"{arn}:{path}/{state.get('name')}/{state.get('version')}".lower() + ("/1" if kind == "Component" else "")}
    if kind == "Image":
        recipe = str(state.get("imageRecipeArn", ""))
        ami = f"ami-{digest(recipe.rsplit('/', 1)[-1], 'ami')}"
        return {
            "arn": f"{arn}:image/{recipe.rsplit('/', 2)[-2] if '/' in recipe else h[:8]}/1.0.0/1",
            "outputResources": [{"amis": [{"image": ami}]}],
        }
    return {}


def helm_release_status(state: dict[str, Any]) -> dict[str, Any]:
    """A Helm release as deployed: revision 1 of the chart at the pinned version."""
    return {
        "name": state.get("name"),
        "namespace": state.get("namespace", "default"),
        "chart": state.get("chart"),
        "version": state.get("version"),
        "revision": 1,
        "status": "deployed",
    }


def hybrid_state(token: str, rid: str, h: str, state: dict[str, Any], region: str, account: str) -> dict[str, Any]:
    """What AWS fills in on a hybrid site's link and credentials: tunnel addresses and pre-shared keys (fake,
    so a test can see they never reach a plain output), the Transit Gateway's route table, the Resolver
    endpoints' addresses, Roles Anywhere ARNs, the activation code."""
    if token == "aws:ec2/vpnConnection:VpnConnection":
        out = {
            "tunnel1Address": f"198.51.100.{int(h[:2], 16) % 127 + 1}",
            "tunnel2Address": f"198.51.100.{int(h[:2], 16) % 127 + 128}",
            "tunnel1PresharedKey": f"fakepsk1_{digest(h, 'psk1', length=24)}",
            "tunnel2PresharedKey": f"fakepsk2_{digest(h, 'psk2', length=24)}",
        }
        if state.get("transitGatewayId"):
            out["transitGatewayAttachmentId"] = f"tgw-attach-{digest(h, 'vpn')}"
        return out
    if token == "aws:ec2transitgateway/transitGateway:TransitGateway":
        table = f"tgw-rtb-{digest(h, 'rtb')}"
        return {"associationDefaultRouteTableId": table, "propagationDefaultRouteTableId": table, "ownerId": account}
    if token == "aws:route53/resolverEndpoint:ResolverEndpoint":
        addresses = [
            {**a, "ip": a.get("ip") or f"10.0.{i * 32 + int(h[:2], 16) % 8}.{int(h[2:4], 16) % 250 + 4}"}
            for i, a in enumerate(state.get("ipAddresses") or [])
        ]
        return {"ipAddresses": addresses, "arn": f"arn:aws:route53resolver:{region}:{account}:resolver-endpoint/{rid}"}
    if token in ("aws:rolesanywhere/trustAnchor:TrustAnchor", "aws:rolesanywhere/profile:Profile"):
        uuid = "-".join((h[:8], h[8:12], h[12:16], digest(h, "r", length=4), digest(h, "ra", length=12)))
        kind = "trust-anchor" if "trustAnchor" in token else "profile"
        # The resource id is the anchor's (profile's) UUID, the ARN's last part: as with KMS keys, the plan
        # diff maps ids between stacks, so an ARN built on the id compares equal.
        return {"id": uuid, "arn": f"arn:aws:rolesanywhere:{region}:{account}:{kind}/{uuid}"}
    if token == "aws:ssm/activation:Activation":
        return {"activationCode": f"fakecode{digest(h, 'code', length=12)}"}
    return {}


def monitoring_state(
    token: str, rid: str, h: str, state: dict[str, Any], region: str, account: str
) -> tuple[str, dict[str, Any]]:
    """What AWS fills in on the monitoring resources: an SNS topic's ARN (``…:<name>``, its id), an AMP
    workspace's ``ws-`` id and endpoint, a scraper's role, a Grafana workspace's endpoint. Returns ``(id, state)``."""
    if token == "aws:sns/topic:Topic":
        arn = f"arn:aws:sns:{region}:{account}:{state.get('name') or rid}"
        return arn, {"arn": arn}
    if token == "aws:amp/workspace:Workspace":
        ws = "ws-" + "-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:32]))
        endpoint = f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{ws}/"
        return ws, {"arn": f"arn:aws:aps:{region}:{account}:workspace/{ws}", "prometheusEndpoint": endpoint}
    if token == "aws:amp/scraper:Scraper":
        sid = "s-" + "-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:32]))
        role = f"arn:aws:iam::{account}:role/aws-service-role/scraper.aps.amazonaws.com/AWSServiceRoleForAmazonPrometheusScraper_{h[:15]}"
        return sid, {"arn": f"arn:aws:aps:{region}:{account}:scraper/{sid}", "roleArn": role}
    if token == "aws:grafana/workspace:Workspace":
        gid = "g-" + h[:10]
        return gid, {
            "arn": f"arn:aws:grafana:{region}:{account}:/workspaces/{gid}",
            "endpoint": f"{gid}.grafana-workspace.{region}.amazonaws.com",
        }
    return _grafana_state(token, rid, h, state)


def _grafana_state(token: str, rid: str, h: str, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A Grafana service account's and its token's ids (the token's key is a placeholder the plan marks secret).
    Folders and dashboards keep the uid the program gives them: nothing to fill in."""
    if token == "aws:grafana/workspaceServiceAccount:WorkspaceServiceAccount":
        return rid, {"serviceAccountId": str(int(h[:6], 16))}
    if token == "aws:grafana/workspaceServiceAccountToken:WorkspaceServiceAccountToken":
        return rid, {"serviceAccountTokenId": str(int(h[:6], 16)), "key": f"glsa_offline_plan_{h[:8]}"}
    return rid, {}
