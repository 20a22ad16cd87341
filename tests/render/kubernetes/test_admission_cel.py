"""The team pods' admission policy, evaluated offline (Build item 1).

No Kubernetes API server runs here (FACTS.md: none is packaged for Debian 12), so admission itself is
proven only through the policy's CEL: the expressions of the policy the ``eks-p5`` plan ships, run by
cel-python against pods built the way the API server hands them over (tests/render/kubernetes/cel.py), and every
field path they name checked against the Kubernetes schemas of each supported version. The example training
job is also held to the Pod Security ``restricted`` rules (tests/render/kubernetes/pod_security.py), since the
namespaces enforce that profile and its admission plugin cannot run here either.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from gpucluster.config.kubernetes import SUPPORTED_EKS_VERSIONS, TeamSpec
from gpucluster.config.kubernetes.team_posix import TeamPosix
from gpucluster.render.kubernetes.tenancy import TEAM_POD_POLICY, TeamTenancy, team_pod_policy
from tests.plans import shipped_plan
from tests.render.kubernetes.cel import evaluate, expressions, missing_fields
from tests.render.kubernetes.pod_security import restricted_violations

RESEARCH = TeamSpec(name="research").effective_posix
APPLIED = TeamSpec(name="applied").effective_posix
CREATE = {"operation": "CREATE", "namespace": "research", "userInfo": {"username": "alice", "groups": ["research"]}}


@pytest.fixture(scope="module")
def plan():
    plan = shipped_plan("eks-p5")
    assert plan.ok, plan.error
    return plan


@pytest.fixture(scope="module")
def policy(plan) -> dict[str, Any]:
    (vap,) = [
        r
        for r in plan.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
        if r.inputs["metadata"]["name"] == TEAM_POD_POLICY
    ]
    return vap.inputs


@pytest.fixture(scope="module")
def example_pod(plan) -> dict[str, Any]:
    """The pod the example JobSet of team research makes (its pod template, in its namespace)."""
    job = yaml.safe_load(plan.files["eks-p5-k8s-team-research-examples/training-job.yaml"])
    template = job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0", "namespace": "research"}, "spec": template["spec"]}


def admit(policy, pod, namespace="research", operation="CREATE"):
    verdict = evaluate(
        policy,
        obj=pod,
        old=pod if operation == "UPDATE" else None,
        request={**CREATE, "namespace": namespace, "operation": operation},
    )
    assert verdict.matched and not verdict.errors, verdict.errors  # refused by a rule, not by an expression that broke
    return verdict


def changed(pod, change) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    change(pod["spec"])
    return pod


def test_the_binding_covers_exactly_the_team_namespaces(plan):
    (binding,) = [
        r.inputs
        for r in plan.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
        if r.inputs["metadata"]["name"] == TEAM_POD_POLICY
    ]
    assert binding["spec"]["policyName"] == TEAM_POD_POLICY and binding["spec"]["validationActions"] == ["Deny"]
    (selector,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert selector == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["applied", "research"]}


def test_the_example_job_passes_the_policy_and_pod_security_restricted(policy, example_pod):
    assert admit(policy, example_pod).allowed
    assert restricted_violations(example_pod["spec"]) == []


def test_the_restricted_rules_used_here_can_fail(example_pod):
    """The offline reading of "restricted" refuses what the profile refuses (else the test above proves nothing)."""
    root = changed(example_pod, lambda s: s["securityContext"].update(runAsUser=0, runAsNonRoot=False))
    assert "running as non-root user: pod runAsUser 0" in restricted_violations(root["spec"])
    loose = changed(example_pod, lambda s: s["containers"][0].pop("securityContext"))
    assert {v.split(":")[0] for v in restricted_violations(loose["spec"])} == {"privilege escalation", "capabilities"}
    host = changed(example_pod, lambda s: s["volumes"].append({"name": "root", "hostPath": {"path": "/"}}))
    assert restricted_violations(host["spec"]) == ["volume types: root is ['hostPath']"]


def _ctr(spec):
    return spec["containers"][0]


FORBIDDEN = {
    "privileged": (lambda s: _ctr(s)["securityContext"].update(privileged=True), "may not be privileged"),
    "privilege escalation": (
        lambda s: _ctr(s)["securityContext"].update(allowPrivilegeEscalation=True),
        "allowPrivilegeEscalation",
    ),
    "SYS_ADMIN": (lambda s: _ctr(s)["securityContext"].update(capabilities={"add": ["SYS_ADMIN"]}), "add a capability"),
    "hostNetwork": (lambda s: s.update(hostNetwork=True), "network, process or IPC namespace"),
    "hostPID": (lambda s: s.update(hostPID=True), "network, process or IPC namespace"),
    "hostIPC": (lambda s: s.update(hostIPC=True), "network, process or IPC namespace"),
    "hostPath /": (lambda s: s["volumes"].append({"name": "root", "hostPath": {"path": "/"}}), "no hostPath"),
    "inline CSI volume": (
        lambda s: s["volumes"].append({"name": "fsx", "csi": {"driver": "fsx.csi.aws.com", "volumeAttributes": {}}}),
        "no inline CSI",
    ),
    "generic ephemeral volume": (
        lambda s: s["volumes"].append(
            {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"volumeName": "applied-lustre"}}}}
        ),
        "nothing else",
    ),
    "a claim not the team's": (
        lambda s: s["volumes"].append({"name": "x", "persistentVolumeClaim": {"claimName": "applied-data"}}),
        "its team's own",
    ),
    "root": (lambda s: s["securityContext"].update(runAsUser=0), "runAsUser must be a user ID of the team"),
    "root in the container": (lambda s: _ctr(s)["securityContext"].update(runAsUser=0), "every container"),
    "another team's user": (lambda s: s["securityContext"].update(runAsUser=APPLIED.uid_first), "user ID of the team"),
    "one past the team's range": (lambda s: s["securityContext"].update(runAsUser=RESEARCH.uid_last + 1), "user ID of the team"),
    "no runAsUser (the image's USER could be 0)": (
        lambda s: s["securityContext"].pop("runAsUser"),
        "USER of the image is not trusted",
    ),
    "an init container without one": (
        lambda s: (
            s["securityContext"].pop("runAsUser"),
            _ctr(s)["securityContext"].update(runAsUser=RESEARCH.uid_first),
            s.update(
                initContainers=[
                    {"name": "i", "image": "busybox", "securityContext": dict(_ctr(s)["securityContext"], runAsUser=None)}
                ]
            ),
            s["initContainers"][0]["securityContext"].pop("runAsUser"),
        ),
        "every container",
    ),
    "another group": (lambda s: s["securityContext"].update(runAsGroup=APPLIED.gid), "group of the team as runAsGroup"),
    "group root in the container": (lambda s: _ctr(s)["securityContext"].update(runAsGroup=0), "group of the team"),
    "no runAsGroup": (lambda s: s["securityContext"].pop("runAsGroup"), "group of the team"),
    "supplementalGroups [0]": (lambda s: s["securityContext"].update(supplementalGroups=[0]), "supplementalGroups may only"),
    "fsGroup of another team": (lambda s: s["securityContext"].update(fsGroup=APPLIED.gid), "fsGroup"),
}


@pytest.mark.parametrize("case", sorted(FORBIDDEN))
def test_a_forbidden_pod_is_refused_with_the_reason(policy, example_pod, case):
    change, reason = FORBIDDEN[case]
    verdict = admit(policy, changed(example_pod, change))
    assert verdict.refused, f"{case} was admitted"
    assert any(reason in m for m in verdict.refused), verdict.refused


ALLOWED = {
    "the user in the container, not the pod": lambda s: (
        s["securityContext"].pop("runAsUser"),
        _ctr(s)["securityContext"].update(runAsUser=RESEARCH.uid_last),
    ),
    "fsGroup and supplementalGroups of the team": lambda s: s["securityContext"].update(
        fsGroup=RESEARCH.gid, supplementalGroups=[RESEARCH.gid]
    ),
    "NET_BIND_SERVICE": lambda s: _ctr(s)["securityContext"].update(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
    "configMap, secret, projected and downwardAPI volumes": lambda s: s["volumes"].extend(
        [
            {"name": "c", "configMap": {"name": "gpucluster-examples"}},
            {"name": "s", "secret": {"secretName": "hf-token"}},
            {"name": "p", "projected": {"sources": []}},
            {"name": "d", "downwardAPI": {"items": []}},
        ]
    ),
}


@pytest.mark.parametrize("case", sorted(ALLOWED))
def test_what_a_team_may_do_is_admitted(policy, example_pod, case):
    assert admit(policy, changed(example_pod, ALLOWED[case])).allowed


def test_each_namespace_is_held_to_its_own_team(policy, example_pod):
    """The same pod is refused in applied's namespace (research's user and group), and admitted there with
    applied's identity: the policy's table is looked up by the request's namespace."""
    assert not admit(policy, example_pod, namespace="applied").allowed
    theirs = changed(example_pod, lambda s: s["securityContext"].update(runAsUser=APPLIED.uid_first + 7, runAsGroup=APPLIED.gid))
    assert admit(policy, theirs, namespace="applied").allowed


def test_an_ephemeral_container_is_held_to_the_same_rules(policy, example_pod):
    """``kubectl debug`` adds an ephemeral container through pods/ephemeralcontainers (an UPDATE): as root it
    is refused, as the team's user it is admitted."""
    debug = {"name": "debug", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": False, "runAsUser": 0}}
    rooted = changed(example_pod, lambda s: s.update(ephemeralContainers=[debug]))
    assert "every container" in " ".join(admit(policy, rooted, operation="UPDATE").refused)
    fine = changed(
        example_pod, lambda s: s.update(ephemeralContainers=[{**debug, "securityContext": {"allowPrivilegeEscalation": False}}])
    )
    assert admit(policy, fine, operation="UPDATE").allowed
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {"operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"]}.items() <= rules[1].items()


def test_claims_are_per_team():
    """Each namespace admits only the claims its team has (here the teams' claims differ by name)."""
    policy = team_pod_policy(
        [
            TeamTenancy("research", TeamPosix(gid=5000, uid_first=100000, uid_count=10), ("lustre",)),
            TeamTenancy("applied", TeamPosix(gid=6000, uid_first=200000, uid_count=10), ("applied-data",)),
        ]
    )
    ctx = {"allowPrivilegeEscalation": False}

    def pod(claim, user, group):
        volumes = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
        sc = {"runAsUser": user, "runAsGroup": group}
        return {"spec": {"securityContext": sc, "containers": [{"name": "c", "securityContext": ctx}], "volumes": volumes}}

    assert admit(policy, pod("lustre", 100001, 5000)).allowed
    assert not admit(policy, pod("applied-data", 100001, 5000)).allowed
    assert admit(policy, pod("applied-data", 200001, 6000), namespace="applied").allowed
    assert not admit(policy, pod("lustre", 200001, 6000), namespace="applied").allowed


@pytest.mark.parametrize("version", SUPPORTED_EKS_VERSIONS)
def test_every_field_the_policy_names_exists_in_each_supported_kubernetes(policy, version):
    """The API server type-checks a policy's CEL against the cluster's schema; a field it lacks breaks the
    policy. Checked here against kubernetes-validate's schemas of every supported version."""
    roots = {
        "object": "io.k8s.api.core.v1.Pod",
        "c": "io.k8s.api.core.v1.Container",
        "v": "io.k8s.api.core.v1.Volume",
    }
    missing = [m for e in expressions(policy) for m in missing_fields(e, roots, version)]
    ephemeral = [
        m
        for e in expressions(policy)
        for m in missing_fields(e, {**roots, "c": "io.k8s.api.core.v1.EphemeralContainer"}, version)
    ]
    assert missing == [] and ephemeral == []


def test_the_field_check_catches_a_wrong_field():
    assert missing_fields(
        "object.spec.hostNetwrk && object.spec.containers.all(c, c.securityContext.runAsUsr > 0)",
        {"object": "io.k8s.api.core.v1.Pod", "c": "io.k8s.api.core.v1.Container"},
        "1.30",
    ) == [
        "object.spec.hostNetwrk",
        "c.securityContext.runAsUsr",
    ]
