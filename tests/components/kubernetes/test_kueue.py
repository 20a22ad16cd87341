"""Kueue under mocks: flavors, TAS topology, quota per team in a cohort, LocalQueues, all-or-nothing."""

from __future__ import annotations

import yaml

from gpucluster.components.kubernetes.kueue import Kueue, KueueArgs
from gpucluster.config.kubernetes import AWS_TOPOLOGY_LEVELS, KueueSpec
from gpucluster.render.kubernetes import kueue_manager_config
from tests.conftest import GOLDEN, check_golden, eks_spec, group
from tests.render.kubernetes.schemas import kueue_config_keys, unknown_values, validate_object

CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


def build(spec, **kwargs):
    k = spec.kubernetes
    args = dict(cohort="k", kueue=k.kueue, node_groups=spec.groups_for("kubernetes"), teams=list(k.teams))
    args.update(kwargs)
    return Kueue("k-kueue", KueueArgs(**args))


def objects(plan):
    return {r.name: r for r in plan.resources if r.type.startswith("kubernetes:kueue")}


def two_flavors():
    return eks_spec(
        group(maxSize=4),
        group(name="a100", instanceType="p4d.24xlarge", maxSize=2),
        teams=[{"name": "research", "gpuQuota": {"h100": 24, "a100": 16}}, {"name": "applied", "gpuQuota": {"h100": 8}}],
    )


def test_flavors_topology_and_team_queues(run_components):
    plan = run_components(lambda: build(two_flavors()))
    objs = objects(plan)
    topo = objs["k-kueue-topology-network"].inputs
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == list(AWS_TOPOLOGY_LEVELS)
    h100 = objs["k-kueue-resourceflavor-h100"].inputs["spec"]
    assert h100 == {
        "nodeLabels": {"gpucluster/gpu": "h100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
        "topologyName": "network",
    }
    research = objs["k-kueue-clusterqueue-research"].inputs["spec"]
    assert research["cohortName"] == "k"
    assert research["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    assert research["preemption"]["reclaimWithinCohort"] == "Any"
    (rg,) = research["resourceGroups"]
    assert rg["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in rg["flavors"]}
    # p5: 192 vCPU, 2 TiB and 32 EFA interfaces for 8 GPUs; p4d: 96 vCPU, 1152 GiB, 4 EFA for 8.
    assert quotas["h100"] == {"cpu": 24 * 24, "memory": f"{24 * 256}Gi", "nvidia.com/gpu": 24, "vpc.amazonaws.com/efa": 24 * 4}
    assert quotas["a100"]["nvidia.com/gpu"] == 16 and quotas["a100"]["vpc.amazonaws.com/efa"] == 8
    applied = objs["k-kueue-clusterqueue-applied"].inputs["spec"]["resourceGroups"][0]["flavors"]
    assert {f["name"]: f["resources"][2]["nominalQuota"] for f in applied} == {"h100": 8, "a100": 0}
    lq = objs["k-kueue-localqueue-research"]
    assert lq.inputs["metadata"] == {"name": "research", "namespace": "research"}
    assert lq.inputs["spec"] == {"clusterQueue": "research"}
    urns = {r.name: r.urn for r in plan.resources}
    assert urns["k-kueue-clusterqueue-research"] in lq.dependencies and urns["k-kueue-release"] in lq.dependencies
    for name, obj in objs.items():
        assert urns["k-kueue-release"] in obj.dependencies, f"{name} must wait for Kueue's CRDs"
        validate_object(obj.inputs)


def test_releases_and_all_or_nothing_admission(run_components, update_golden):
    plan = run_components(lambda: build(two_flavors()))
    releases = {r.inputs["name"]: r.inputs for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    kueue = releases["kueue"]
    assert (kueue["chart"], kueue["version"], kueue["namespace"]) == (
        "oci://registry.k8s.io/kueue/charts/kueue",
        "0.19.2",
        "kueue-system",
    )
    assert (releases["jobset"]["chart"], releases["jobset"]["version"]) == (
        "oci://registry.k8s.io/jobset/charts/jobset",
        "0.12.0",
    )
    config = yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["waitForPodsReady"]["timeout"] == "10m" and config["waitForPodsReady"]["blockAdmission"] is True
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]
    # Nothing in a team namespace bypasses the queues (and so the quotas).
    assert config["manageJobsWithoutQueueName"] is True
    assert config["managedJobsNamespaceSelector"] == {"matchExpressions": [{"key": "gpucluster/team", "operator": "Exists"}]}
    check_golden(GOLDEN / "kubernetes" / "kueue.values.yaml", plan.files["k-kueue-release/values.yaml"], update_golden)


def test_manager_config_keys_are_upstream_ones():
    """Kueue has no schema for its Configuration: check against the pinned default and its documented examples."""
    upstream = kueue_config_keys()
    config = kueue_manager_config(True, "15m")
    assert unknown_values(config, upstream) == []
    assert set(config["integrations"]["frameworks"]) <= set(upstream["integrations"]["frameworks"])
    assert unknown_values({"waitForPodsReady": {"enable": True}}, upstream) == ["waitForPodsReady.enable"]
    assert "waitForPodsReady" not in kueue_manager_config(False, "10m")


def test_no_topology_means_no_tas(run_components):
    plan = run_components(lambda: build(two_flavors(), kueue=KueueSpec(topology_levels=("kubernetes.io/hostname",))))
    objs = objects(plan)
    assert [lv["nodeLabel"] for lv in objs["k-kueue-topology-network"].inputs["spec"]["levels"]] == ["kubernetes.io/hostname"]
