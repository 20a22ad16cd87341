"""Pulumi mocks that stand in for the engine and the AWS/Kubernetes providers, offline.

:class:`PlanMocks` returns realistic, deterministic ids and ARNs per resource type (the tables are in
:mod:`gpucluster.tools.plan.run.fakes`) and answers every invoke the program makes from the instance
catalog — ``getInstanceType`` gets the catalog's own facts back, so the program's check against EC2
passes. :class:`~gpucluster.tools.plan.run.monitor.RecordingMonitor` records what the program registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs, Mocks

from gpucluster.facts.catalog import Catalog
from gpucluster.tools.plan.run.fakes import (
    ACCOUNT,
    AUTONAMED,
    EC2_IDS,
    REGION_ZONES,
    digest,
    eks_state,
    helm_release_status,
    hybrid_state,
    instance_type_result,
)


@dataclass
class PlanMocks(Mocks):
    """Deterministic fake provider: realistic ids/ARNs and catalog-backed invokes."""

    region: str
    catalog: Catalog
    account: str = ACCOUNT
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Extra per-type fakes and invokes: other components register theirs here.
    resource_fakes: dict[str, Callable[[MockResourceArgs, str, dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)
    invoke_fakes: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)

    # --- resources -------------------------------------------------------------------------------
    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        if args.custom is False:
            return None, state  # component resources have no id (reads of existing resources come as None)
        token = args.typ
        if token.startswith("pulumi:providers:"):
            return f"{args.name}-provider-{digest(token, args.name, length=8)}", state
        h = digest(token, args.name)
        if args.resource_id and args.custom is None:  # Resource.get(): the id of an existing resource
            h = digest(token, args.resource_id)
        if token in AUTONAMED and not state.get("name"):
            state["name"] = f"{args.name}-{h[:7]}"
        name = str(state.get("name") or args.name)
        service = token.split(":")[1].split("/")[0]
        if token in EC2_IDS:
            prefix, path = EC2_IDS[token]
            rid = f"{prefix}{h}"
            if path:
                state["arn"] = f"arn:aws:ec2:{self.region}:{self.account}:{path.format(id=rid, name=name)}"
        elif service == "iam":
            rid = name
            kind = token.split(":")[-1]
            iam_path = {"Role": "role", "InstanceProfile": "instance-profile", "Policy": "policy", "User": "user"}
            if kind in iam_path:
                state["arn"] = f"arn:aws:iam::{self.account}:{iam_path[kind]}/{name}"
                state["uniqueId"] = "AROA" + digest(token, name, length=17).upper()
            if kind == "RolePolicyAttachment":
                rid = f"{state.get('role', name)}-{h[:20]}"
        elif token == "aws:autoscaling/group:Group":
            rid = name
            uuid = "-".join((h[:8], h[8:12], h[12:16], digest(name, length=4), digest(h, length=12)))
            state["arn"] = f"arn:aws:autoscaling:{self.region}:{self.account}:autoScalingGroup:{uuid}:autoScalingGroupName/{name}"
        elif token == "aws:ec2/placementGroup:PlacementGroup":
            rid = name
            state["placementGroupId"] = f"pg-{h}"
            state["arn"] = f"arn:aws:ec2:{self.region}:{self.account}:placement-group/{name}"
        else:
            rid = name if token in AUTONAMED else f"{args.name}-{h[:8]}"
            if token.startswith("aws:"):
                state.setdefault("arn", f"arn:aws:{service}:{self.region}:{self.account}:{token.split(':')[-1].lower()}/{rid}")
        if args.resource_id and args.custom is None:
            rid = args.resource_id
        if token == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state.update(
                {
                    "arn": f"arn:aws:fsx:{self.region}:{self.account}:file-system/{rid}",
                    "dnsName": f"{rid}.fsx.{self.region}.amazonaws.com",
                    "mountName": digest(rid, "mount", length=8),
                    "ownerId": self.account,
                }
            )
        if token == "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation":
            state.update({"associationId": rid, "arn": f"arn:aws:fsx:{self.region}:{self.account}:association/{rid}"})
        if token == "aws:kms/key:Key":
            uuid = "-".join((h[:8], h[8:12], h[12:16], digest(h, "k", length=4), digest(h, "key", length=12)))
            rid = uuid
            state.update({"keyId": uuid, "arn": f"arn:aws:kms:{self.region}:{self.account}:key/{uuid}"})
        if token == "aws:cloudwatch/logGroup:LogGroup":
            state["arn"] = f"arn:aws:logs:{self.region}:{self.account}:log-group:{name}"
        if token == "aws:resourcegroups/group:Group":  # e.g. a group of capacity reservations a program makes
            state["arn"] = f"arn:aws:resource-groups:{self.region}:{self.account}:group/{name}"
        if token == "aws:kms/alias:Alias":
            state["arn"] = f"arn:aws:kms:{self.region}:{self.account}:{state.get('name', rid)}"
        if token == "aws:s3/bucket:Bucket":
            bucket = state.get("bucket") or f"{state.get('bucketPrefix', args.name + '-')}{int(h[:12], 16) % 10**26:026d}"
            rid = bucket
            state.update(
                {
                    "bucket": bucket,
                    "arn": f"arn:aws:s3:::{bucket}",
                    "bucketRegionalDomainName": f"{bucket}.s3.{self.region}.amazonaws.com",
                }
            )
        if token.startswith("aws:eks/"):
            state.update(eks_state(token, rid, h, state, self.region, self.account))
        if token == "kubernetes:helm.sh/v3:Release":
            state["status"] = helm_release_status(state)
        if token == "aws:ec2/launchTemplate:LaunchTemplate":
            state.update({"latestVersion": 1, "defaultVersion": 1})
        if token == "aws:ec2/vpc:Vpc":
            state.update(
                {
                    "defaultSecurityGroupId": f"sg-{digest(h, 'default')}",
                    "mainRouteTableId": f"rtb-{digest(h, 'main')}",
                    "ownerId": self.account,
                }
            )
        if token == "aws:ec2/eip:Eip":
            state.update({"allocationId": rid, "publicIp": f"203.0.113.{int(h[:2], 16) % 254 + 1}"})
        if token == "aws:ec2/subnet:Subnet":
            state.setdefault("ownerId", self.account)
        if token in ("aws:ec2/networkInterface:NetworkInterface", "aws:ec2/instance:Instance"):
            # A private address in the first /19 of the default VPC CIDR (10.0.0.0/16), from the hash.
            ip = f"10.0.{int(h[:2], 16) % 32}.{int(h[2:4], 16) % 250 + 4}"
            state.setdefault("privateIp", ip)
            state.setdefault("privateIps", [ip])
        if token == "aws:secretsmanager/secret:Secret":
            # Secrets Manager appends 6 random characters to the name; the ARN is the resource's id.
            rid = f"arn:aws:secretsmanager:{self.region}:{self.account}:secret:{name}-{digest(h, 'secret', length=6)}"
            state["arn"] = rid
        if token == "aws:route53/zone:Zone":
            rid = "Z" + digest(h, "zone", length=20).upper()
            state.update({"zoneId": rid, "arn": f"arn:aws:route53:::hostedzone/{rid}", "nameServers": []})
        state.update(hybrid_state(token, rid, h, state, self.region, self.account))
        rid = state.get("id", rid)
        fake = self.resource_fakes.get(token)
        if fake is not None:
            state = fake(args, rid, state)
        state.setdefault("id", rid)
        return rid, state

    # --- invokes ---------------------------------------------------------------------------------
    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token, a = args.token, dict(args.args)
        self.calls.append((token, a))
        if token in self.invoke_fakes:
            return self.invoke_fakes[token](a), []
        if token == "aws:index/getPartition:getPartition":
            return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws"}, []
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "id": self.account,
                "accountId": self.account,
                "arn": f"arn:aws:iam::{self.account}:user/gpucluster-plan",
                "userId": "AIDA" + digest("plan", length=17).upper(),
            }, []
        if token == "aws:index/getRegion:getRegion":
            return {
                "id": self.region,
                "name": self.region,
                "region": self.region,
                "endpoint": f"ec2.{self.region}.amazonaws.com",
                "description": self.region,
            }, []
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            letters = REGION_ZONES.get(self.region, "abc")
            names = [f"{self.region}{c}" for c in letters]
            return {
                "id": self.region,
                "names": names,
                "zoneIds": [f"{self.region.replace('-', '')[:3]}1-az{i + 1}" for i in range(len(names))],
                "groupNames": [self.region] * len(names),
            }, []
        if token == "aws:ec2/getInstanceType:getInstanceType":
            facts = self.catalog.get(str(a.get("instanceType")))
            if facts is None:
                return {}, [("instanceType", f"InvalidInstanceType: {a.get('instanceType')}")]
            return instance_type_result(facts), []
        if token == "aws:ssm/getParameter:getParameter":
            name = str(a.get("name"))
            value = f"ami-{digest(self.region, name)}" if "ami" in name or "image" in name else f"value-of-{name}"
            return {
                "id": name,
                "name": name,
                "value": value,
                "insecureValue": value,
                "type": "String",
                "version": 1,
                "arn": f"arn:aws:ssm:{self.region}::parameter{name}",
            }, []
        if token == "aws:ec2/getVpc:getVpc":
            vpc_id = str(a.get("id"))
            return {"id": vpc_id, "cidrBlock": "10.0.0.0/16", "arn": f"arn:aws:ec2:{self.region}:{self.account}:vpc/{vpc_id}"}, []
        raise NotImplementedError(
            f"the plan's mocks do not answer the invoke {token!r}; add it to gpucluster.tools.plan.run.mocks"
        )
