"""TeamNamespace under mocks: RBAC for the team, claims on the shared Lustre file system, the example."""

from __future__ import annotations

from gpucluster.components.kubernetes.team_namespace import TeamNamespace, TeamNamespaceArgs
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.kubernetes import TeamSpec
from tests.render.kubernetes.schemas import validate_object

# Hand-made, as LustreStorage hands them over.
LUSTRE = SharedStorage(
    name="fsx",
    fs_type="lustre",
    mount_point="/fsx",
    mount_options="noatime,flock",
    server="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    mount_name="a1b2c3d4",
    file_system_id="fs-0123456789abcdef0",
    capacity_gib=9600,
)
SCRATCH = SharedStorage("scratch", "nvme", "/scratch", "noatime")
TEAM = TeamSpec(name="research", groups=("research",), users=("alice",))


def build(team=TEAM, storage=(LUSTRE, SCRATCH), example=None):
    return TeamNamespace("t", TeamNamespaceArgs(team=team, shared_storage=list(storage), example_job=example))


def kinds(plan):
    return {r.type.split(":")[-1]: r.inputs for r in plan.resources if r.custom}


def test_namespace_role_and_binding(run_components):
    plan = run_components(build)
    k = kinds(plan)
    assert k["Namespace"]["metadata"]["name"] == "research"
    assert k["Namespace"]["metadata"]["labels"] == {
        "gpucluster/team": "research",
        **{f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")},
        **{f"pod-security.kubernetes.io/{mode}-version": "latest" for mode in ("enforce", "warn", "audit")},
    }
    rules = k["Role"]["rules"]
    assert {"jobsets"} in [set(r["resources"]) for r in rules]
    assert not any("secrets" in r["resources"] or "*" in r["verbs"] for r in rules), "least privilege"
    assert k["RoleBinding"]["subjects"] == [
        {"kind": "Group", "name": "research", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
    ]
    assert k["RoleBinding"]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpucluster-team"}


def test_static_fsx_volume_and_claim(run_components):
    plan = run_components(build)
    pv = plan.by_name("t-fsx-pv").inputs
    # The team's own directory, not the file system's root: the driver mounts dnsname@tcp:/mountname.
    assert pv["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0123456789abcdef0/teams/research",
        "volumeAttributes": {
            "dnsname": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            "mountname": "a1b2c3d4/teams/research",
        },
    }
    assert pv["spec"]["capacity"] == {"storage": "9600Gi"} and pv["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["mountOptions"] == ["noatime", "flock", "nosuid", "nodev"] and pv["spec"]["storageClassName"] == ""
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["claimRef"] == {"namespace": "research", "name": "fsx"}
    pvc = plan.by_name("t-fsx-pvc").inputs
    assert pvc["metadata"]["namespace"] == "research" and pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pvc["spec"]["resources"] == {"requests": {"storage": "9600Gi"}}
    assert [r.name for r in plan.resources if "scratch" in r.name] == [], "node-local scratch gets no volume"
    for r in plan.resources:
        if r.custom:
            validate_object(r.inputs)


def test_each_team_mounts_its_own_directory_nosuid_nodev(run_components):
    """No two teams' volumes share a handle or a path, and a program's own options cannot turn setuid back on:
    nosuid,nodev come last (mount(8) applies options left to right)."""
    storage = SharedStorage(**{**LUSTRE.__dict__, "mount_options": "noatime,suid,dev"})

    def program():
        for team in ("research", "applied"):
            TeamNamespace(team, TeamNamespaceArgs(team=TeamSpec(name=team), shared_storage=[storage]))

    plan = run_components(program)
    pvs = {r.name: r.inputs["spec"] for r in plan.resources if r.type == "kubernetes:core/v1:PersistentVolume"}
    assert set(pvs) == {"research-fsx-pv", "applied-fsx-pv"}
    handles = {p["csi"]["volumeHandle"] for p in pvs.values()}
    paths = {p["csi"]["volumeAttributes"]["mountname"] for p in pvs.values()}
    assert handles == {"fs-0123456789abcdef0/teams/research", "fs-0123456789abcdef0/teams/applied"}
    assert paths == {"a1b2c3d4/teams/research", "a1b2c3d4/teams/applied"}
    for spec in pvs.values():
        assert spec["mountOptions"][-2:] == ["nosuid", "nodev"]


def test_no_claims_when_the_team_does_not_mount_shared_storage(run_components):
    plan = run_components(lambda: build(TeamSpec(name="x", mount_shared_storage=False)))
    assert "PersistentVolume" not in kinds(plan) and "RoleBinding" not in kinds(plan)


def test_example_job_shipped_in_a_config_map(run_components):
    plan = run_components(lambda: build(example="apiVersion: v1\nkind: List\nitems: []\n"))
    cm = plan.by_name("t-examples")
    assert cm.inputs["metadata"]["name"] == "gpucluster-examples"
    assert plan.files["t-examples/training-job.yaml"] == "apiVersion: v1\nkind: List\nitems: []\n"
