"""Pulumi mocks that stand in for the engine and the AWS/Kubernetes providers, offline.

* :class:`PlanMocks` returns realistic, deterministic ids and ARNs per resource type (``vpc-…``,
  ``lt-…``, IAM ARNs…) and answers every invoke the program makes from the instance catalog —
  ``getInstanceType`` gets the catalog's own facts back, so the program's check against EC2 passes.
* :class:`RecordingMonitor` records what the mock monitor does not keep: each resource's parent,
  whether it is protected or retained on delete, and every ``register_outputs`` (stack exports).

Ids are derived from a hash of the resource's type and name, so two plans of the same stack are
byte-identical and a diff between plans shows only real changes.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.sync_await import _ensure_event_loop

from gpucluster.facts.catalog import Catalog, InstanceFacts

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
    "aws:ec2/instance:Instance": ("i-", "instance/{id}"),
    "aws:ebs/volume:Volume": ("vol-", "volume/{id}"),
    "aws:ec2/networkInterface:NetworkInterface": ("eni-", "network-interface/{id}"),
    "aws:ec2/keyPair:KeyPair": ("key-", "key-pair/{name}"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("fs-", None),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("dra-", None),
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
    node group, an add-on or an access entry: the ARNs and attributes the program reads back."""
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
        raise NotImplementedError(f"the plan's mocks do not answer the invoke {token!r}; add it to gpucluster.tools.plan.mocks")


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    protect: bool
    retain_on_delete: bool
    delete_before_replace: bool
    ignore_changes: list[str]
    dependencies: list[str]
    provider: str | None
    inputs: dict[str, Any]
    id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)


def _close_thread_loop() -> None:
    """Close the event loop of the current worker thread, if it has one.

    The runtime calls the mock monitor from its executor's worker threads, and the monitor runs
    ``_sync_await`` there, which gives each worker thread an event loop of its own that nothing ever
    closes. Such a loop is only collected when its thread is gone, often at interpreter exit, where
    ``BaseEventLoop.__del__`` may find its self-pipe socket already finalized and print ``Exception
    ignored … Invalid file descriptor: -1`` after the plan succeeded. Closing it in the thread that
    made it, right after the call, leaves nothing for the collector to find.
    """
    if threading.current_thread() is threading.main_thread():
        return
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:  # this thread has no loop
        return
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)


def _closing_thread_loop(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _ensure_event_loop()  # what the monitor's own methods do first; deserializing needs one
        try:
            return method(*args, **kwargs)
        finally:
            _close_thread_loop()

    return wrapper


class RecordingMonitor(MockMonitor):
    """The mock monitor, keeping what a plan needs to show: parents, protection, outputs."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.outputs: dict[str, dict[str, Any]] = {}

    @_closing_thread_loop
    def Invoke(self, request: Any) -> Any:
        return super().Invoke(request)

    @_closing_thread_loop
    def ReadResource(self, request: Any) -> Any:
        return super().ReadResource(request)

    @_closing_thread_loop
    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        inputs = rpc.deserialize_properties(request.object) if request.type != "pulumi:pulumi:Stack" else {}
        state = self.resources.get(response.urn)
        self.registrations.append(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                delete_before_replace=bool(request.deleteBeforeReplace),
                ignore_changes=list(request.ignoreChanges),
                dependencies=list(request.dependencies),
                provider=request.provider or None,
                inputs=dict(inputs),
                id=state.id if state else None,
                state=dict(state.state) if state else {},
            )
        )
        return response

    @_closing_thread_loop
    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.outputs[request.urn] = dict(rpc.deserialize_properties(request.outputs))
        return super().RegisterResourceOutputs(request)
