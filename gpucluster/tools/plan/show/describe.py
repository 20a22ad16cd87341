"""One or a few lines per resource type for the plan's text tree: what a reviewer checks on that resource
(encryption, IMDS, EFA interfaces, IAM statements, sizes), read from the inputs the program registered.

Kept apart from the tree that prints them so adding a resource type touches only this table."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

Describer = Callable[[dict[str, Any]], list[str]]


def _ranges(numbers: Iterable[int]) -> str:
    nums = sorted(numbers)
    out: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start}" if start == prev else f"{start}–{prev}")
        if n is not None:
            start = prev = n
    return ",".join(out)


def describe_interfaces(nics: list[dict[str, Any]]) -> str:
    groups: dict[tuple[int, str], list[int]] = {}
    for nic in nics:
        key = (int(nic.get("deviceIndex", 0)), str(nic.get("interfaceType") or "interface"))
        groups.setdefault(key, []).append(int(nic.get("networkCardIndex", 0)))
    parts = []
    for (device, kind), cards in sorted(groups.items(), key=lambda kv: (min(kv[1]), kv[0][0])):
        noun = "card" if len(cards) == 1 else "cards"
        parts.append(f"{noun} {_ranges(cards)} dev {device} {kind}")
    efa = sum(1 for n in nics if str(n.get("interfaceType", "")).startswith("efa"))
    noun = "network interface" if len(nics) == 1 else "network interfaces"
    return f"{len(nics)} {noun} ({efa} EFA): " + "; ".join(parts)


def _text_size(text: Any) -> str:
    """An object's text content as its size (the files bundle's files are in the plan's files)."""
    return f"{len(str(text or '').encode()):,} bytes"


def _launch_template(i: dict[str, Any]) -> list[str]:
    image = i.get("imageId") or "chosen by the EKS node group's AMI type"
    lines = [f"instance type {i.get('instanceType')} · image {image}"]
    nics = i.get("networkInterfaces") or []
    if nics:
        lines.append(describe_interfaces(nics))
    lines.append(_imds(i.get("metadataOptions") or {}))
    for bdm in i.get("blockDeviceMappings") or []:
        ebs = bdm.get("ebs") or {}
        enc = "encrypted" if str(ebs.get("encrypted")) == "true" else "NOT encrypted (!)"
        lines.append(f"root {bdm.get('deviceName')} {ebs.get('volumeType')} {ebs.get('volumeSize')} GiB{_performance(ebs)} {enc}")
    placement = (i.get("placement") or {}).get("groupName")
    if placement:
        lines.append(f"placement group {placement}")
    target = (i.get("capacityReservationSpecification") or {}).get("capacityReservationTarget") or {}
    market = (i.get("instanceMarketOptions") or {}).get("marketType")
    if market == "capacity-block":
        lines.append(f"capacity block {target.get('capacityReservationId')} targeted")
    elif target:
        lines.append(
            f"capacity reservation {target.get('capacityReservationId') or target.get('capacityReservationResourceGroupArn')} targeted"
        )
    elif market == "spot":
        lines.append("spot instances")
    return lines


def _imds(md: dict[str, Any]) -> str:
    imds = "IMDSv2 required" if md.get("httpTokens") == "required" else "IMDSv1 allowed (!)"
    tags = " · instance tags in metadata" if md.get("instanceMetadataTags") == "enabled" else ""
    return f"{imds} (hop limit {md.get('httpPutResponseHopLimit')}){tags}"


def _instance(i: dict[str, Any]) -> list[str]:
    nics = ", ".join(str(n.get("networkInterfaceId")) for n in i.get("networkInterfaces") or []) or str(i.get("subnetId"))
    root = i.get("rootBlockDevice") or {}
    enc = "encrypted" if root.get("encrypted") else "NOT encrypted (!)"
    return [
        f"instance type {i.get('instanceType')} · image {i.get('ami')} · interface {nics} · profile {i.get('iamInstanceProfile')}",
        _imds(i.get("metadataOptions") or {}),
        f"root {root.get('volumeType')} {root.get('volumeSize')} GiB {enc}"
        + (" · termination protection on" if i.get("disableApiTermination") else " · termination protection OFF"),
    ]


def _performance(volume: dict[str, Any]) -> str:
    """`` 3000 IOPS 125 MB/s`` where the volume sets them; the type's baseline (said as such) where it does not."""
    iops, throughput = volume.get("iops"), volume.get("throughput")
    if iops is None and throughput is None:
        return " (its type's baseline IOPS and throughput)"
    return (f" {iops} IOPS" if iops is not None else "") + (f" {throughput} MB/s" if throughput is not None else "")


def _volume(i: dict[str, Any]) -> list[str]:
    enc = "encrypted" if i.get("encrypted") else "NOT encrypted (!)"
    snap = " · snapshot when deleted" if i.get("finalSnapshot") else ""
    return [f"{i.get('availabilityZone')} {i.get('type')} {i.get('size')} GiB{_performance(i)} {enc}{snap}"]


def _condition(cond: dict[str, Any]) -> str:
    parts = []
    for op, keys in cond.items():
        for key, value in keys.items():
            values = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            parts.append(f"{op} {key} = {values}")
    return " and ".join(parts)


def _policy(i: dict[str, Any]) -> list[str]:
    """An inline IAM policy, one line per statement: effect, actions, resources, conditions."""
    try:
        doc = json.loads(str(i.get("policy")))
    except json.JSONDecodeError:
        return ["policy (not yet known)"]
    lines = []
    for st in doc.get("Statement", []):
        actions = st.get("Action")
        actions = ", ".join(actions) if isinstance(actions, list) else actions
        resources = st.get("Resource")
        resources = ", ".join(resources) if isinstance(resources, list) else resources
        line = f"{st.get('Sid', '-')}: {st.get('Effect')} {actions} on {resources}"
        if st.get("Condition"):
            line += f" when {_condition(st['Condition'])}"
        lines.append(line)
    return lines


def _trust(i: dict[str, Any]) -> list[str]:
    try:
        doc = json.loads(str(i.get("assumeRolePolicy")))
    except json.JSONDecodeError:
        return []
    principals = [str(p) for st in doc.get("Statement", []) for p in (st.get("Principal") or {}).values()]
    conditions = [_condition(st["Condition"]) for st in doc.get("Statement", []) if st.get("Condition")]
    return [f"assumed by {', '.join(principals)}" + (f" when {' and '.join(conditions)}" if conditions else "")]


def _flow_log(i: dict[str, Any]) -> list[str]:
    return [
        f"{i.get('vpcId')} · traffic {i.get('trafficType')} · to {i.get('logDestinationType')} {i.get('logDestination')} · "
        f"aggregated over {i.get('maxAggregationInterval')} s"
    ]


def _default_sg(i: dict[str, Any]) -> list[str]:
    rules = len(i.get("ingress") or []) + len(i.get("egress") or [])
    return [f"{i.get('vpcId')} default group · " + ("no rules (closed)" if rules == 0 else f"{rules} rules (!)")]


def _lifecycle(i: dict[str, Any]) -> list[str]:
    lines = []
    for rule in i.get("rules") or []:
        parts = [f"{rule.get('id')}"]
        if (rule.get("expiration") or {}).get("days"):
            parts.append(f"expire after {rule['expiration']['days']} days")
        if (rule.get("abortIncompleteMultipartUpload") or {}).get("daysAfterInitiation"):
            parts.append(f"abort uploads after {rule['abortIncompleteMultipartUpload']['daysAfterInitiation']} days")
        if (rule.get("noncurrentVersionExpiration") or {}).get("noncurrentDays"):
            parts.append(f"old versions after {rule['noncurrentVersionExpiration']['noncurrentDays']} days")
        lines.append(": ".join([parts[0], ", ".join(parts[1:])]) if len(parts) > 1 else parts[0])
    return lines


def _asg(i: dict[str, Any]) -> list[str]:
    return [
        f"min {i.get('minSize')} · max {i.get('maxSize')} · desired {i.get('desiredCapacity')} · "
        f"subnets {', '.join(map(str, i.get('vpcZoneIdentifiers') or []))}"
    ]


def _rule(i: dict[str, Any]) -> list[str]:
    proto = "all traffic" if i.get("ipProtocol") == "-1" else f"{i.get('ipProtocol')} {i.get('fromPort')}-{i.get('toPort')}"
    peer = i.get("referencedSecurityGroupId") or i.get("cidrIpv4") or i.get("prefixListId")
    self_ref = " (itself)" if peer and peer == i.get("securityGroupId") else ""
    return [f"{proto} · {peer}{self_ref}"]


def _lustre(i: dict[str, Any]) -> list[str]:
    meta = i.get("metadataConfiguration") or {}
    lines = [
        f"{i.get('deploymentType')} {i.get('storageCapacity'):,} GiB · {i.get('perUnitStorageThroughput', '-')} MB/s/TiB · "
        f"{i.get('dataCompressionType')} · Lustre {i.get('fileSystemTypeVersion')}",
        f"EFA {'enabled' if i.get('efaEnabled') else 'off'} · metadata {meta.get('mode', 'none')}"
        + (f" {meta['iops']} IOPS" if meta.get("iops") else "")
        + f" · backups {i.get('automaticBackupRetentionDays', 0)} days · encrypted with {i.get('kmsKeyId', 'the AWS-managed key')}",
    ]
    return lines


def _dra(i: dict[str, Any]) -> list[str]:
    s3 = i.get("s3") or {}
    imp = ",".join((s3.get("autoImportPolicy") or {}).get("events", [])) or "none"
    exp = ",".join((s3.get("autoExportPolicy") or {}).get("events", [])) or "none"
    return [f"{i.get('fileSystemPath')} ⇄ {i.get('dataRepositoryPath')} · import {imp} · export {exp}"]


def _eks_cluster(i: dict[str, Any]) -> list[str]:
    vpc = i.get("vpcConfig") or {}
    access = ["private" if vpc.get("endpointPrivateAccess") else None]
    if vpc.get("endpointPublicAccess"):
        access.append(f"public from {', '.join(vpc.get('publicAccessCidrs') or ['0.0.0.0/0 (!)'])}")
    enc = (i.get("encryptionConfig") or {}).get("provider", {}).get("keyArn")
    auth = (i.get("accessConfig") or {}).get("authenticationMode")
    return [
        f"Kubernetes {i.get('version')} · endpoint {' + '.join(a for a in access if a) or 'unreachable (!)'} · authentication {auth}",
        f"Secrets encrypted with {enc}" if enc else "Secrets NOT envelope-encrypted (!)",
        f"control-plane logs {', '.join(i.get('enabledClusterLogTypes') or []) or 'off'}",
    ]


def _eks_node_group(i: dict[str, Any]) -> list[str]:
    sc = i.get("scalingConfig") or {}
    lt = i.get("launchTemplate") or {}
    lines = [
        f"{i.get('amiType')} · {i.get('capacityType')} · min {sc.get('minSize')} · max {sc.get('maxSize')} · desired {sc.get('desiredSize')}"
        + (f" · launch template {lt.get('id')} v{lt.get('version')}" if lt else "")
    ]
    taints = [f"{t.get('key')}={t.get('value')}:{t.get('effect')}" for t in i.get("taints") or []]
    if taints:
        lines.append(f"taints {', '.join(taints)}")
    labels = i.get("labels") or {}
    if labels:
        lines.append("labels " + ", ".join(f"{k}={v}" for k, v in sorted(labels.items())))
    return lines


def _eks_addon(i: dict[str, Any]) -> list[str]:
    line = f"{i.get('addonName')} {i.get('addonVersion') or '(EKS default for the cluster version)'}"
    for assoc in i.get("podIdentityAssociations") or []:
        line += f" · Pod Identity {assoc.get('serviceAccount')} → {assoc.get('roleArn')}"
    return [line]


def _helm_release(i: dict[str, Any]) -> list[str]:
    repo = (i.get("repositoryOpts") or {}).get("repo")
    chart = f"{repo}/{i.get('chart')}" if repo else i.get("chart")
    return [f"chart {chart} {i.get('version')} · release {i.get('name')} in namespace {i.get('namespace', 'default')}"]


def _cluster_queue(i: dict[str, Any]) -> list[str]:
    spec = i.get("spec") or {}
    lines = [f"cohort {spec.get('cohortName')} · namespaces {((spec.get('namespaceSelector') or {}).get('matchLabels') or {})}"]
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            quota = ", ".join(f"{r.get('nominalQuota')} {r.get('name')}" for r in flavor.get("resources") or [])
            lines.append(f"flavor {flavor.get('name')}: {quota}")
    return lines


def _resource_flavor(i: dict[str, Any]) -> list[str]:
    spec = i.get("spec") or {}
    labels = ", ".join(f"{k}={v}" for k, v in (spec.get("nodeLabels") or {}).items())
    tolerates = ", ".join(str(t.get("key")) for t in spec.get("tolerations") or [])
    return [f"nodes {labels} · topology {spec.get('topologyName', 'none')} · tolerates {tolerates or 'nothing'}"]


def _k8s_meta(i: dict[str, Any]) -> str:
    meta = i.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def _namespace(i: dict[str, Any]) -> list[str]:
    """The name, and the Pod Security level the namespace enforces (``none``: Kubernetes admits anything)."""
    level = ((i.get("metadata") or {}).get("labels") or {}).get("pod-security.kubernetes.io/enforce")
    return [f"{_k8s_meta(i)} · Pod Security {level or 'none'}"]


def _pv(i: dict[str, Any]) -> list[str]:
    spec = i.get("spec") or {}
    csi = spec.get("csi") or {}
    attrs = csi.get("volumeAttributes") or {}
    return [
        f"{(spec.get('capacity') or {}).get('storage')} {','.join(spec.get('accessModes') or [])} · {csi.get('driver')} "
        f"{csi.get('volumeHandle')} ({attrs.get('dnsname')}@{attrs.get('mountname')}) · for {spec.get('claimRef', {}).get('namespace')}/"
        f"{spec.get('claimRef', {}).get('name')}"
    ]


def _dashboard(i: dict[str, Any]) -> list[str]:
    board = json.loads(i.get("configJson") or "{}")
    panels = len(board.get("panels") or [])
    return [f"{board.get('title')} (/d/{board.get('uid')}) · {panels} panel{'s' * (panels != 1)} · folder {i.get('folder')}"]


DESCRIBERS: dict[str, Describer] = {
    "aws:grafana/workspaceServiceAccount:WorkspaceServiceAccount": lambda i: [
        f"{i.get('name')} · Grafana role {i.get('grafanaRole')}"
    ],
    "aws:grafana/workspaceServiceAccountToken:WorkspaceServiceAccountToken": lambda i: [
        f"{i.get('name')} · lives {int(i.get('secondsToLive') or 0) // 86400} days · its key a secret of the stack's state"
    ],
    "grafana:oss/dashboard:Dashboard": _dashboard,
    "grafana:oss/folder:Folder": lambda i: [f"{i.get('title')} (uid {i.get('uid')})"],
    "grafana:oss/dataSource:DataSource": lambda i: [f"{i.get('type')} {i.get('name')} (uid {i.get('uid')}) → {i.get('url')}"],
    "aws:eks/cluster:Cluster": _eks_cluster,
    "aws:eks/nodeGroup:NodeGroup": _eks_node_group,
    "aws:eks/addon:Addon": _eks_addon,
    "aws:eks/accessEntry:AccessEntry": lambda i: [
        f"{i.get('principalArn')} · groups {', '.join(i.get('kubernetesGroups') or []) or 'none'}"
    ],
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": lambda i: [
        f"{str(i.get('policyArn')).rsplit('/', 1)[-1]} for {i.get('principalArn')} · {(i.get('accessScope') or {}).get('type')} scope"
    ],
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": lambda i: [
        f"service account {i.get('namespace')}/{i.get('serviceAccount')} → {i.get('roleArn')}"
    ],
    "kubernetes:helm.sh/v3:Release": _helm_release,
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": _cluster_queue,
    "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor": _resource_flavor,
    "kubernetes:kueue.x-k8s.io/v1beta2:Topology": lambda i: [
        "levels " + " → ".join(str(lv.get("nodeLabel")) for lv in (i.get("spec") or {}).get("levels") or [])
    ],
    "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue": lambda i: [
        f"{_k8s_meta(i)} → ClusterQueue {(i.get('spec') or {}).get('clusterQueue')}"
    ],
    "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy": lambda i: [
        "RDMA shared device plugin · " + ", ".join(sorted((i.get("spec") or {}).keys()))
    ],
    "kubernetes:core/v1:Namespace": _namespace,
    "kubernetes:core/v1:PersistentVolume": _pv,
    "kubernetes:core/v1:PersistentVolumeClaim": lambda i: [f"{_k8s_meta(i)} → volume {(i.get('spec') or {}).get('volumeName')}"],
    "kubernetes:core/v1:ConfigMap": lambda i: [f"{_k8s_meta(i)}: {', '.join(sorted((i.get('data') or {}).keys()))}"],
    "kubernetes:rbac.authorization.k8s.io/v1:Role": lambda i: [f"{_k8s_meta(i)} · {len(i.get('rules') or [])} rules"],
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": lambda i: [
        f"{_k8s_meta(i)} → {(i.get('roleRef') or {}).get('name')} for "
        + ", ".join(f"{s.get('kind')} {s.get('name')}" for s in i.get("subjects") or [])
    ],
    "aws:fsx/lustreFileSystem:LustreFileSystem": _lustre,
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": _dra,
    "aws:s3/bucket:Bucket": lambda i: [
        f"prefix {i.get('bucketPrefix') or i.get('bucket')} · forceDestroy {i.get('forceDestroy', False)}"
    ],
    "aws:s3/bucketVersioning:BucketVersioning": lambda i: [
        f"versioning {(i.get('versioningConfiguration') or {}).get('status')}"
    ],
    "aws:kms/key:Key": lambda i: [
        f"rotation {'on' if i.get('enableKeyRotation') else 'OFF (!)'} · deletion window {i.get('deletionWindowInDays')} days"
    ],
    "aws:ec2/vpc:Vpc": lambda i: [f"cidr {i.get('cidrBlock')}"],
    "aws:ec2/flowLog:FlowLog": _flow_log,
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": _default_sg,
    "aws:cloudwatch/logGroup:LogGroup": lambda i: [f"{i.get('name')} · kept {i.get('retentionInDays')} days"],
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": _lifecycle,
    "aws:ec2/subnet:Subnet": lambda i: [f"{i.get('availabilityZone')} {i.get('cidrBlock')}"],
    "aws:ec2/vpcEndpoint:VpcEndpoint": lambda i: [f"{i.get('vpcEndpointType')} {i.get('serviceName')}"],
    "aws:ec2/placementGroup:PlacementGroup": lambda i: [f"strategy {i.get('strategy')}"],
    "aws:ec2/launchTemplate:LaunchTemplate": _launch_template,
    "aws:autoscaling/group:Group": _asg,
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _rule,
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": _rule,
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": lambda i: [str(i.get("policyArn"))],
    "aws:iam/rolePolicy:RolePolicy": _policy,
    "aws:imagebuilder/component:Component": lambda i: [str(i.get("description", "")).partition(": ")[2]],
    "aws:iam/role:Role": _trust,
    "aws:ec2/instance:Instance": _instance,
    "aws:ebs/volume:Volume": _volume,
    "aws:ec2/networkInterface:NetworkInterface": lambda i: [
        f"subnet {i.get('subnetId')} · security groups {', '.join(i.get('securityGroups') or [])}"
    ],
    "aws:ec2/volumeAttachment:VolumeAttachment": lambda i: [
        f"{i.get('volumeId')} → {i.get('instanceId')} at {i.get('deviceName')}"
    ],
    "aws:secretsmanager/secret:Secret": lambda i: [
        f"{i.get('name')} · no value from this program ("
        + ("the on-premises site writes its key" if i.get("kmsKeyId") else "the head node makes the key at first boot")
        + f") · recovery window {i.get('recoveryWindowInDays')} days"
    ],
    "aws:route53/zone:Zone": lambda i: [
        f"private zone {i.get('name')} for {', '.join(str(v.get('vpcId')) for v in i.get('vpcs') or [])}"
    ],
    "aws:route53/record:Record": lambda i: [
        f"{i.get('type')} {i.get('name')} → {', '.join(map(str, i.get('records') or []))} (ttl {i.get('ttl')})"
    ],
    "aws:s3/bucketObjectv2:BucketObjectv2": lambda i: [
        f"{i.get('key')} · {i.get('contentType')} · {i.get('contentBase64') or _text_size(i.get('content'))}"
    ],
}
