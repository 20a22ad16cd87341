"""Pulumi mocks that stand in for the engine and the AWS/Kubernetes providers, offline.

:class:`PlanMocks` returns realistic, deterministic ids and ARNs per resource type (the tables are in
:mod:`gpucluster.tools.plan.run.fakes`) and answers the invokes in :mod:`gpucluster.tools.plan.run.lookups`:
those gpucluster's components make (``getInstanceType`` gets the instance catalog's own facts back, so the
program's check against EC2 passes) and the common look-ups of a Pulumi program of your own (subnets, VPCs,
security groups, AMIs, identity, region). Any other invoke stops the plan with one line naming it
(:class:`~gpucluster.tools.plan.run.lookups.UnansweredInvoke`).
:class:`~gpucluster.tools.plan.run.monitor.RecordingMonitor` records what the program registered.
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
    digest,
    eks_state,
    helm_release_status,
    hybrid_state,
    image_builder_state,
    monitoring_state,
    network_state,
)
from gpucluster.tools.plan.run.lookups import Lookups, UnansweredInvoke


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
    unanswered: list[UnansweredInvoke] = field(default_factory=list)
    """Invokes the program made that nothing answers (the plan stops on the first)."""

    def __post_init__(self) -> None:
        self.lookups = Lookups(region=self.region, catalog=self.catalog, account=self.account)

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
        rid = self._id(token, args.name, h, state)
        if args.resource_id and args.custom is None:
            rid = args.resource_id
        rid = self._state(token, rid, h, state, args.name)
        state.update(hybrid_state(token, rid, h, state, self.region, self.account))
        if token.startswith("aws:imagebuilder/"):
            state.update(image_builder_state(token, h, state, self.region, self.account))
        rid = state.get("id", rid)
        fake = self.resource_fakes.get(token)
        if fake is not None:
            state = fake(args, rid, state)
        state.setdefault("id", rid)
        return rid, state

    def _id(self, token: str, logical: str, h: str, state: dict[str, Any]) -> str:
        """The id AWS would assign a ``token`` resource (and the ARN it derives from it, into ``state``)."""
        name = str(state.get("name") or logical)
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
            rid = name if token in AUTONAMED else f"{logical}-{h[:8]}"
            if token.startswith("aws:"):
                state.setdefault("arn", f"arn:aws:{service}:{self.region}:{self.account}:{token.split(':')[-1].lower()}/{rid}")
        return rid

    def _state(self, token: str, rid: str, h: str, state: dict[str, Any], logical: str) -> str:
        """What AWS fills in on a ``token`` resource once made (into ``state``); returns the id, which some
        types take from that (a KMS key's UUID, a bucket's name, a secret's ARN, a hosted zone's id)."""
        name = str(state.get("name") or logical)
        region, account = self.region, self.account
        if token == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state.update(
                {
                    "arn": f"arn:aws:fsx:{region}:{account}:file-system/{rid}",
                    "dnsName": f"{rid}.fsx.{region}.amazonaws.com",
                    "mountName": digest(rid, "mount", length=8),
                    "ownerId": account,
                }
            )
        if token == "aws:fsx/openZfsFileSystem:OpenZfsFileSystem":
            state.update(
                {
                    "arn": f"arn:aws:fsx:{region}:{account}:file-system/{rid}",
                    "dnsName": f"{rid}.fsx.{region}.amazonaws.com",
                    "rootVolumeId": f"fsvol-{digest(rid, 'root')}",
                    "ownerId": account,
                }
            )
        if token == "aws:fsx/openZfsVolume:OpenZfsVolume":
            state["arn"] = f"arn:aws:fsx:{region}:{account}:volume/{rid}"
        if token == "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation":
            state.update({"associationId": rid, "arn": f"arn:aws:fsx:{region}:{account}:association/{rid}"})
        if token == "aws:kms/key:Key":
            uuid = "-".join((h[:8], h[8:12], h[12:16], digest(h, "k", length=4), digest(h, "key", length=12)))
            rid = uuid
            state.update({"keyId": uuid, "arn": f"arn:aws:kms:{region}:{account}:key/{uuid}"})
        if token == "aws:cloudwatch/logGroup:LogGroup":
            state["arn"] = f"arn:aws:logs:{region}:{account}:log-group:{name}"
        if token == "aws:sqs/queue:Queue":  # the queue's id is its URL
            rid = f"https://sqs.{region}.amazonaws.com/{account}/{name}"
            state.update({"url": rid, "arn": f"arn:aws:sqs:{region}:{account}:{name}"})
        if token == "aws:cloudwatch/eventRule:EventRule":
            rid, state["arn"] = name, f"arn:aws:events:{region}:{account}:rule/{name}"
        if token == "aws:resourcegroups/group:Group":  # e.g. a group of capacity reservations a program makes
            state["arn"] = f"arn:aws:resource-groups:{region}:{account}:group/{name}"
        if token == "aws:kms/alias:Alias":
            state["arn"] = f"arn:aws:kms:{region}:{account}:{state.get('name', rid)}"
        if token == "aws:s3/bucket:Bucket":
            bucket = state.get("bucket") or f"{state.get('bucketPrefix', logical + '-')}{int(h[:12], 16) % 10**26:026d}"
            rid = bucket
            state.update(
                {
                    "bucket": bucket,
                    "arn": f"arn:aws:s3:::{bucket}",
                    "bucketRegionalDomainName": f"{bucket}.s3.{region}.amazonaws.com",
                }
            )
        if token.startswith("aws:eks/"):
            state.update(eks_state(token, rid, h, state, region, account))
        if token == "kubernetes:helm.sh/v3:Release":
            state["status"] = helm_release_status(state)
        if token == "aws:secretsmanager/secret:Secret":
            # Secrets Manager appends 6 random characters to the name; the ARN is the resource's id.
            rid = f"arn:aws:secretsmanager:{region}:{account}:secret:{name}-{digest(h, 'secret', length=6)}"
            state["arn"] = rid
        if token == "aws:lb/loadBalancer:LoadBalancer":  # e.g. the login nodes' SSH endpoint (a stack output)
            kind = "net" if state.get("loadBalancerType") == "network" else "app"
            suffix = digest(h, "lb", length=16)
            rid = f"arn:aws:elasticloadbalancing:{region}:{account}:loadbalancer/{kind}/{name}/{suffix}"
            internal = "internal-" if kind == "app" and state.get("internal") else ""
            state.update(
                {
                    "arn": rid,
                    "arnSuffix": f"{kind}/{name}/{suffix}",
                    "dnsName": f"{internal}{name}-{suffix}.elb.{region}.amazonaws.com",
                }
            )
        if token == "aws:route53/zone:Zone":
            rid = "Z" + digest(h, "zone", length=20).upper()
            state.update({"zoneId": rid, "arn": f"arn:aws:route53:::hostedzone/{rid}", "nameServers": []})
        state.update(network_state(token, rid, h, state, account))
        rid, extra = monitoring_state(token, rid, h, state, region, account)
        state.update(extra)
        return rid

    # --- invokes ---------------------------------------------------------------------------------
    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token, a = args.token, dict(args.args)
        self.calls.append((token, a))
        if token in self.invoke_fakes:
            return self.invoke_fakes[token](a), []
        try:
            return self.lookups.answer(token, a)
        except UnansweredInvoke as exc:
            self.unanswered.append(exc)
            raise
