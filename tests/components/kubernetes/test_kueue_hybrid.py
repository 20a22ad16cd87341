"""Kueue with an EKS Hybrid Nodes site under mocks: a flavor per site, the site's quota in its own ClusterQueue, each
team's way to it, and no queue that holds flavors of both sites (so no workload is admitted across them). Every
object is validated against the pinned Kueue CRDs and pinned in a golden file."""

from __future__ import annotations

import pytest
import yaml

from gpucluster.components.kubernetes.kueue import Kueue, KueueArgs
from gpucluster.config.errors import ConfigError
from gpucluster.render.hybrid.eks_nodes import site_flavor_name
from tests.conftest import GOLDEN, check_golden
from tests.render.hybrid.eks_fixtures import hybrid_eks_spec
from tests.render.kubernetes.schemas import validate_object

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def build(spec, hybrid=True):
    k = spec.kubernetes
    return Kueue(
        "k-kueue",
        KueueArgs(
            cohort="hybrid-eks",
            kueue=k.kueue,
            node_groups=spec.groups_for("kubernetes"),
            teams=list(k.teams),
            hybrid=spec.hybrid if hybrid else None,
        ),
    )


def by_name(plan, kind):
    return {r.inputs["metadata"]["name"] + "@" + r.inputs["metadata"].get("namespace", ""): r for r in plan.of_type(KUEUE + kind)}


def flavors_of(cq) -> set[str]:
    return {f["name"] for g in cq.inputs["spec"]["resourceGroups"] for f in g["flavors"]}


def test_site_flavor_selects_the_sites_hybrid_nodes_only(run_components):
    spec = hybrid_eks_spec()
    plan = run_components(lambda: build(spec))
    flavors = by_name(plan, "ResourceFlavor")
    assert set(flavors) == {"h100@", "onprem-h100@"}
    site = flavors["onprem-h100@"].inputs["spec"]
    assert site["nodeLabels"] == {"eks.amazonaws.com/compute-type": "hybrid", "gpucluster/site": "onprem"}
    assert site["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    # The cloud flavor selects a label the hybrid nodes never register with (see test_eks_nodes).
    assert flavors["h100@"].inputs["spec"]["nodeLabels"] == {"gpucluster/gpu": "h100"}


def test_no_queue_mixes_sites_and_the_site_quota_is_borrowed_through_the_cohort(run_components):
    spec = hybrid_eks_spec()
    plan = run_components(lambda: build(spec))
    queues = by_name(plan, "ClusterQueue")
    assert set(queues) == {"research@", "onprem@", "research-onprem@"}
    for name, cq in queues.items():
        mine = flavors_of(cq)
        assert mine in ({"h100"}, {"onprem-h100"}), f"{name} holds flavors of both sites: {mine}"
        assert cq.inputs["spec"]["cohortName"] == "hybrid-eks"
        assert "flavorFungibility" not in cq.inputs["spec"]
    lender = queues["onprem@"].inputs["spec"]
    # No namespaceSelector: nothing submits to it; it only lends the site's 64 GPUs (and their CPU and memory:
    # the p5 flavor's shares, 24 vCPU and 256 GiB per H100) to the cohort.
    assert "namespaceSelector" not in lender
    ((flavor,),) = [g["flavors"] for g in lender["resourceGroups"]]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]} == {
        "cpu": 64 * 24,
        "memory": f"{64 * 256}Gi",
        "nvidia.com/gpu": 64,
    }
    team = queues["research-onprem@"].inputs["spec"]
    assert team["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    assert {r["nominalQuota"] for r in team["resourceGroups"][0]["flavors"][0]["resources"]} == {0, "0Gi"}
    # The EFA resource is the cloud's: the site's queues do not cover it, so a podset asking for EFA never lands there.
    assert "vpc.amazonaws.com/efa" not in team["resourceGroups"][0]["coveredResources"]
    assert "vpc.amazonaws.com/efa" in queues["research@"].inputs["spec"]["resourceGroups"][0]["coveredResources"]


def test_each_team_gets_a_local_queue_to_the_site(run_components):
    spec = hybrid_eks_spec()
    plan = run_components(lambda: build(spec))
    local = by_name(plan, "LocalQueue")
    assert {n: r.inputs["spec"]["clusterQueue"] for n, r in local.items()} == {
        "research@research": "research",
        "onprem@research": "research-onprem",
    }
    urns = {r.name: r.urn for r in plan.resources}
    site_lq = local["onprem@research"]
    assert urns["k-kueue-clusterqueue-research-onprem"] in site_lq.dependencies
    assert urns["k-kueue-release"] in site_lq.dependencies


def test_every_object_validates_against_the_pinned_crds_and_is_golden(run_components, update_golden):
    spec = hybrid_eks_spec()
    plan = run_components(lambda: build(spec))
    docs = []
    for r in plan.resources:
        if r.type.startswith(KUEUE):
            doc = {
                "apiVersion": r.inputs["apiVersion"],
                "kind": r.inputs["kind"],
                "metadata": r.inputs["metadata"],
                "spec": r.inputs["spec"],
            }
            validate_object(doc)
            if "onprem" in r.name:
                docs.append(doc)
    assert len(docs) == 4
    docs.sort(key=lambda d: (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")))
    check_golden(
        GOLDEN / "hybrid" / "eks" / "kueue-site.yaml",
        "---\n".join(yaml.safe_dump(d, sort_keys=True) for d in docs),
        update_golden,
    )


def test_without_a_site_nothing_changes(run_components):
    spec = hybrid_eks_spec()
    with_site = run_components(lambda: build(spec))
    without = run_components(lambda: build(spec, hybrid=False))
    assert {r.name for r in without.resources} == {r.name for r in with_site.resources if "onprem" not in r.name}
    for r in without.resources:
        other = next(o for o in with_site.resources if o.name == r.name)
        assert r.inputs == other.inputs, r.name


def test_a_gpu_type_that_makes_no_kubernetes_name_is_refused_with_its_path():
    # At load, before any resource (the program's refusal)...
    with pytest.raises(ConfigError) as refused:
        hybrid_eks_spec(kubernetes={"gpuType": "H100 SXM;x"})
    (finding,) = refused.value.findings
    assert finding.path == "gpucluster:hybrid.kubernetes.gpuType" and "H100 SXM;x" in finding.message
    # ...and again where the name is made, for a spec built without validation.
    hybrid = hybrid_eks_spec().hybrid
    assert hybrid is not None and hybrid.kubernetes is not None
    bad = hybrid.model_copy(update={"kubernetes": hybrid.kubernetes.model_copy(update={"gpu_type": "H100 SXM;x"})})
    with pytest.raises(ConfigError) as again:
        site_flavor_name(bad)
    assert again.value.findings[0].path == "gpucluster:hybrid.kubernetes.gpuType"
    assert site_flavor_name(hybrid_eks_spec(kubernetes={"gpuType": "gb200"}).hybrid) == "onprem-gb200"
