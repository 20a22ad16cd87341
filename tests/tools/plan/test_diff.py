"""``gpucluster plan diff`` on the pull-request cases (docs/plan.md): each from two real plans of a shipped
stack, the second with one config change (tests/tools/plan/prcases.py)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gpucluster.tools.plan.diff.changes import compare
from gpucluster.tools.plan.diff.json import to_json
from gpucluster.tools.plan.diff.markdown import LIMIT
from gpucluster.tools.plan.diff.markdown import render as markdown
from gpucluster.tools.plan.diff.step import Comparison
from gpucluster.tools.plan.diff.text import render
from gpucluster.tools.plan.run.stackfile import stack_names
from tests.conftest import GOLDEN, ROOT, check_golden
from tests.tools.plan import prcases
from tests.tools.plan.test_plan import gpucluster

SCHEMAS = ROOT / "gpucluster" / "tools" / "plan" / "schemas"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"


def validate(doc: dict, schema: str) -> None:
    jsonschema.validate(doc, json.loads((SCHEMAS / schema).read_text()), cls=jsonschema.Draft202012Validator)


def case(stack: str, change) -> tuple[dict, dict, Comparison]:
    old, new = prcases.plan_json(stack), prcases.plan_json(stack, change)
    comparison = compare(old, new)
    validate(old, "plan.schema.json")
    validate(new, "plan.schema.json")
    validate(to_json(comparison), "diff.schema.json")
    return old, new, comparison


def step(c: Comparison, type_: str):
    (found,) = [s for s in c.steps if s.type == type_]
    return found


def test_efa_toggle_replaces_the_file_system_and_loses_its_data():
    _, _, c = case("p5-training", prcases.efa_off)
    fs = step(c, LUSTRE)
    assert fs.op == "replace" and "efaEnabled" in fs.replace_reasons
    assert fs.data_loss and "loses every file on the Lustre file system" in fs.data_loss
    assert fs.blocked and "`pulumi up` stops" in fs.data_loss  # protected
    # The replacement is carried to what holds the file system's id or DNS name: its data repository associations
    # (replaced, and protected like it), the storage setup host (its user data replaces it) and the launch template.
    dras = [s for s in c.steps if s.type == DRA]
    assert {(s.op, tuple(s.replace_reasons), s.because()) for s in dras} == {
        ("replace", ("fileSystemId",), "fileSystemId (p5-training-lustre-fs is replaced)")
    }
    assert all(s.blocked for s in dras) and not any(s.data_loss for s in dras)  # they hold no data of their own
    setup = step(c, "aws:ec2/instance:Instance")
    assert (setup.op, setup.replace_reasons, setup.carried) == ("replace", ["userData"], {"userData": ["p5-training-lustre-fs"]})
    assert setup.disruption == [
        "replaces instance p5-training-lustre-setup (forced by userData (p5-training-lustre-fs is replaced)): "
        "a new instance boots from the new user data"
    ]
    lt = step(c, "aws:ec2/launchTemplate:LaunchTemplate")
    assert lt.op == "update" and lt.carried == {"userData": ["p5-training-lustre-fs"]}
    text = render(c)
    assert text.splitlines()[1] == "0 to create, 2 to update, 4 to replace, 0 to delete"
    assert text.index("DATA LOSS") < text.index("Replacements") < text.index("Changes")
    assert (
        "± aws:fsx:LustreFileSystem p5-training-lustre-fs: securityGroupIds, efaEnabled, storageCapacity force a new one" in text
    )
    # user data as a line diff of its decoded text, not one base64 line
    assert "-# Parts: node facts, nccl/efa environment, nvme scratch, lustre mount over EFA + GDS" in text
    assert "userData: changed (decoded line diff" in text and "H4sI" not in text


def test_zone_move_replaces_the_file_system_through_its_subnet():
    _, _, c = case("eks-p5", prcases.lustre_to_zone_b)
    fs = step(c, LUSTRE)
    assert (fs.op, fs.replace_reasons) == ("replace", ["subnetIds"])
    assert [s.name for s in c.data_loss] == ["eks-p5-lustre-fs"]
    # The storage setup host's interface follows the file system into its subnet (and holds no data); the host is
    # replaced with it, and the teams' persistent volumes, which name the file system, with the file system. Its two
    # CloudWatch alarms follow the new file system's id in place.
    assert [(s.op, s.name, s.because()) for s in c.changes if s.name != fs.name] == [
        (
            "replace",
            "eks-p5-lustre-setup",
            "networkInterfaces (eks-p5-lustre-setup-eni is replaced), userData (eks-p5-lustre-fs is replaced)",
        ),
        ("replace", "eks-p5-lustre-setup-eni", "subnetId"),
        ("update", "eks-p5-monitoring-fsx-capacity", ""),
        ("update", "eks-p5-monitoring-fsx-throughput", ""),
        ("replace", "eks-p5-k8s-team-applied-lustre-pv", "spec.csi (eks-p5-lustre-fs is replaced)"),
        ("replace", "eks-p5-k8s-team-research-lustre-pv", "spec.csi (eks-p5-lustre-fs is replaced)"),
    ]
    assert c.counts()["replace"] == 5 and not c.files


def test_zone_move_of_slurm_p5_replaces_the_head_node_with_its_interface():
    """The head node's interface follows the cluster into the new zone's subnet; the instance attaches it by id, so
    it is replaced too (not just restarted for its user data), and so is the data volume's attachment to it."""
    _, _, c = case("slurm-p5", prcases.slurm_p5_to_zone_b)
    head = next(s for s in c.steps if s.name == "slurm-p5-slurm-head")
    assert (head.op, head.replace_reasons) == ("replace", ["networkInterfaces"])
    assert head.carried["networkInterfaces[0].networkInterfaceId"] == ["slurm-p5-slurm-head-eni"]
    # the head node's files (its bundle, render/slurm/headfiles.py) carry the new zone's volume and file systems; its
    # user data points at the new bundle
    files = next(s for s in c.steps if s.name == "slurm-p5-slurm-head-files")
    assert files.carried["content"] == ["slurm-p5-lustre-fs", "slurm-p5-slurm-head-data", "slurm-p5-slurm-home-fs"]
    assert (files.op, files.replace_reasons) == ("replace", ["key"])
    assert "userDataBase64./etc/gpucluster/head-files.json" in head.changed
    assert head.disruption == [
        "replaces the head node slurm-p5-slurm-head (forced by networkInterfaces (slurm-p5-slurm-head-eni is replaced)): "
        "the Slurm controller is down until the new instance has booted, and running jobs lose their controller"
    ]
    attach = step(c, "aws:ec2/volumeAttachment:VolumeAttachment")
    assert (attach.op, attach.because()) == (
        "replace",
        "instanceId (slurm-p5-slurm-head is replaced), volumeId (slurm-p5-slurm-head-data is replaced)",
    )
    record = step(c, "aws:route53/record:Record")  # slurmctld's name follows the new interface's address
    assert record.op == "update" and list(record.carried) == ["records[0]"]
    # What loses data is still the file system and the data volume, not the instance that carries them.
    # and /home (FSx for OpenZFS in the head node's zone) moves with it: its files are lost too
    assert [s.name for s in c.data_loss] == [
        "slurm-p5-lustre-fs",
        "slurm-p5-slurm-head-data",
        "slurm-p5-slurm-home-fs",
        "slurm-p5-slurm-home-volume",
    ]
    text = render(c)
    assert (
        "  ± aws:ec2:Instance slurm-p5-slurm-head: networkInterfaces (slurm-p5-slurm-head-eni is replaced) forces a new one"
        in text.splitlines()
    )
    assert "restarts the head node" not in text
    assert (
        "    networkInterfaces[0].networkInterfaceId: 'eni-" in text
        and "comes from slurm-p5-slurm-head-eni, which is replaced" in text
    )


@pytest.mark.slow  # CLI processes that plan slurm-p5 twice and diff
def test_zone_move_of_slurm_p5_through_the_cli(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(prcases.plan_json("slurm-p5")))
    new.write_text(json.dumps(prcases.plan_json("slurm-p5", prcases.slurm_p5_to_zone_b)))
    text = gpucluster("plan", "diff", str(old), str(new))
    assert text.returncode == 0, text.stderr
    assert (
        "± aws:ec2:Instance slurm-p5-slurm-head: networkInterfaces (slurm-p5-slurm-head-eni is replaced) forces a new one"
        in text.stdout
    )
    doc = json.loads(gpucluster("plan", "diff", str(old), str(new), "--format", "json").stdout)
    validate(doc, "diff.schema.json")
    (head,) = [s for s in doc["steps"] if s["name"] == "slurm-p5-slurm-head"]
    assert head["op"] == "replace" and head["replaceReasons"] == ["networkInterfaces"]
    assert head["carried"]["networkInterfaces[0].networkInterfaceId"] == ["slurm-p5-slurm-head-eni"]
    assert head["detailedDiff"]["networkInterfaces[0].networkInterfaceId"] == {"kind": "update-replace", "inputDiff": True}
    md = gpucluster("plan", "diff", str(old), str(new), "--format", "markdown").stdout
    assert "| `slurm-p5-slurm-head` | `aws:ec2:Instance` | `networkInterfaces` (`slurm-p5-slurm-head-eni` replaced) | no |" in md


def test_repository_inserted_first_creates_only_itself():
    _, _, c = case("p5-training", prcases.models_repository_first)
    assert [(s.op, s.name) for s in c.changes] == [("create", "p5-training-lustre-dra/models")]
    dras = [s for s in c.steps if s.type == DRA]
    assert sorted((s.name, s.op) for s in dras) == [
        ("p5-training-lustre-dra/checkpoints", "same"),
        ("p5-training-lustre-dra/datasets", "same"),
        ("p5-training-lustre-dra/models", "create"),
    ]
    assert not c.data_loss


def test_access_entry_inserted_first_creates_only_itself():
    _, _, c = case("eks-p5", prcases.access_entry_first)
    assert [(s.op, s.name) for s in c.changes] == [
        ("create", "eks-p5-eks-access-123456789012:role/auditors"),
        ("create", "eks-p5-eks-access-123456789012:role/auditors-AmazonEKSViewPolicy"),
    ]


def test_node_group_shrink_is_a_disruption():
    _, _, c = case("p5-training", prcases.shrink_p5)
    asg = step(c, "aws:autoscaling/group:Group")
    assert asg.op == "update" and asg.diff_reasons == ["desiredCapacity", "minSize"]
    assert asg.disruption == ["shrinks p5 from 16 to 8 nodes: 8 running nodes terminated"]
    assert "Disruption\n  ! shrinks p5 from 16 to 8 nodes: 8 running nodes terminated" in render(c)
    assert not c.data_loss


def test_head_node_instance_type_change_restarts_it():
    _, _, c = case("slurm-p5", prcases.bigger_head_node)
    head = step(c, "aws:ec2/instance:Instance")
    assert head.op == "update" and "instanceType" in head.diff_reasons
    assert head.disruption and head.disruption[0].startswith("restarts the head node slurm-p5-slurm-head to change instanceType")
    assert "Slurm controller is down" in head.disruption[0]
    assert "    instanceType: 'm7i.xlarge' → 'm7i.2xlarge'" in render(c)


def test_new_launch_template_version_rolls_an_eks_node_group():
    _, _, c = case("eks-p5", prcases.nccl_debug_on_p5)
    templates = {s.name: s.op for s in c.steps if s.type == "aws:ec2/launchTemplate:LaunchTemplate"}
    assert templates == {"eks-p5-eks-p5-lt": "update", "eks-p5-eks-system-lt": "same"}  # versioned, never replaced
    group = next(s for s in c.steps if s.type == "aws:eks/nodeGroup:NodeGroup" and s.name.endswith("-p5-mng"))
    assert group.op == "update" and group.diff_reasons == ["launchTemplate"]
    assert group.disruption == [
        "rolls node group p5 onto the new version of launch template eks-p5-eks-p5-lt: the 8 instances are replaced, 10 % at a time"
    ]
    assert not c.data_loss and c.counts()["replace"] == 0


def test_a_new_image_shows_the_roll():
    """Locking p5's base image bakes a new image: the plan diff says what changes, and which nodes roll."""
    _, new, c = case("slurm-p5", prcases.lock_p5_image)
    recipe = next(r for r in new["resources"] if r["type"].endswith("ImageRecipe") and r["inputs"]["name"] == "slurm-p5-p5-node")
    assert recipe["inputs"]["parentImage"] == prcases.LOCKED_AMI  # the lock, not the parameter
    template = next(s for s in c.steps if s.name == "slurm-p5-slurm-p5-lt")
    before, after = template.value("old", "imageId"), template.value("new", "imageId")
    assert template.op == "update" and before != after and after.startswith("ami-")
    # the base image a person changed, not only the baked image's id; and how the agent rolls the group (slurm.updates)
    base = next(s for s in c.steps if s.name == "slurm-p5-slurm-p5-recipe").value("old", "parentImage")
    assert base != prcases.LOCKED_AMI and base.startswith("ami-")
    assert template.disruption == [
        f"p5: base image {base} → {prcases.LOCKED_AMI} (baked: {before} → {after}), its running nodes will roll (the node "
        "agent replaces them a share at a time): at most 10 % of the group drained at a time, each node once idle; at any "
        "hour (no maintenance window); first 2 nodes measured for 120 min against the last good image (the roll stops if "
        "the new one is slower)"
    ]
    assert f"p5: base image {base} → {prcases.LOCKED_AMI}" in render(c)
    assert next(s for s in c.steps if s.name == "slurm-p5-slurm-dev-lt").op == "same"  # dev's image is unchanged
    assert not c.data_loss


@pytest.mark.slow  # plans slurm-p5 three times
def test_l5_a_locked_image_changed_without_a_new_locked_at_is_flagged():
    """An AMI id alone says nothing about who built it: a lock's imageId edited by hand (lockedAt unchanged) is
    flagged in every format; the same AMI change made by `gpucluster images lock` (a new lockedAt) is not."""
    old = prcases.plan_json("slurm-p5", prcases.lock_p5_image)
    edited, relocked = (
        prcases.plan_json("slurm-p5", prcases.swap_locked_p5_image),
        prcases.plan_json("slurm-p5", prcases.relock_p5_image),
    )
    for doc in (old, edited):
        validate(doc, "plan.schema.json")
        assert doc["imageLocks"]["p5"]["lockedAt"] == "2026-11-01"
    c = compare(old, edited)
    line = (
        f"p5: imageLock.imageId {prcases.LOCKED_AMI} → {prcases.OTHER_AMI} but lockedAt is still 2026-11-01: not made "
        "by `gpucluster images lock`; check who owns the image (`gpucluster preflight`) before merging"
    )
    assert c.images == [line]
    assert f"Image locks edited by hand\n  {line}" in render(c)
    assert f"### Image locks edited by hand\n\n- ⚠️ {line}" in markdown(c, edited)
    doc = to_json(c)
    validate(doc, "diff.schema.json")
    assert doc["images"] == [line]
    assert compare(old, relocked).images == [] and "images" not in to_json(compare(old, relocked))
    assert compare(prcases.plan_json("slurm-p5"), old).images == []  # a lock made where there was none


def test_bigger_group_and_dataset_lose_nothing():
    _, _, c = case("p5-training", prcases.grow_for_bigger_dataset)
    fs = step(c, LUSTRE)
    assert fs.op == "update" and "storageCapacity" in fs.diff_reasons  # grows in place
    assert fs.value("old", "storageCapacity") < fs.value("new", "storageCapacity")
    assert step(c, "aws:autoscaling/group:Group").op == "update"
    assert not c.data_loss and c.counts()["replace"] == 0


@pytest.mark.slow  # plans every shipped stack under two names
@pytest.mark.parametrize("stack", stack_names())
def test_the_same_config_under_another_stack_name_has_no_changes(stack):
    """Matching ignores the stack and the cluster-name prefix; ids, names and addresses the mock engine
    derives from each stack's own names compare equal ("other" is also an English word, on purpose)."""
    base, other = prcases.plan_json(stack), prcases.plan_json(stack, name="other")
    assert {r["urn"] for r in other["resources"]}.isdisjoint(r["urn"] for r in base["resources"])
    same = compare(base, other)
    assert not same.changed, render(same)


def test_plans_of_two_stack_names_compare():
    base = prcases.plan_json("p5-training")
    bigger = compare(base, prcases.plan_json("p5-training", prcases.shrink_p5, name="p5-big"))
    assert [(s.op, s.name) for s in bigger.changes] == [("update", "p5-big-p5-asg")]
    assert render(bigger).startswith("gpucluster plan diff — stack p5-training → p5-big")


def test_markdown_golden_and_order(update_golden):
    _, new, c = case("p5-training", prcases.efa_off)
    text = markdown(c, new, cost_markdown="| | before | after |\n|---|---|---|", summary_markdown="16 × p5.48xlarge")
    check_golden(GOLDEN / "diff" / "p5-training-efa-off.md", text, update_golden)
    order = ["**0 to create", "[!CAUTION]", "### Replacements", "### Cost", "### Summary", "```mermaid", "<details>"]
    assert [text.index(s) for s in order] == sorted(text.index(s) for s in order)
    assert "16 × p5.48xlarge" in text and "### Cost" in text
    plain = markdown(c, new)
    assert "### Cost" not in plain and "### Summary" not in plain  # nothing shown when not given


def test_markdown_stays_under_githubs_limit():
    old, new, _ = case("p5-training", prcases.efa_off)
    new["files"]["p5-training-p5-lt/huge.txt"] = "".join(f"line {n} of a long file\n" for n in range(20_000))
    c = compare(old, new)
    text = markdown(c, new)
    assert len(text) <= LIMIT
    assert "[!CAUTION]" in text and "### Replacements" in text  # the warnings are never cut
    assert "**Cut:** the last " in text and "`gpucluster plan diff OLD NEW` prints all of them" in text
    assert text.rstrip().endswith("</details>")


# --- the CLI ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plan_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("plans")
    out = {}
    for label, stack, change in (
        ("base", "p5-training", None),
        ("efa-off", "p5-training", prcases.efa_off),
        ("shrink", "p5-training", prcases.shrink_p5),
    ):
        out[label] = folder / f"{label}.json"
        out[label].write_text(json.dumps(prcases.plan_json(stack, change)))
    return out


@pytest.mark.slow  # a CLI process per case
def test_cli_exit_codes(plan_files):
    base, lossy, shrink = str(plan_files["base"]), str(plan_files["efa-off"]), str(plan_files["shrink"])
    assert gpucluster("plan", "diff", base, lossy).returncode == 0  # no flags: always 0
    loses = gpucluster("plan", "diff", base, lossy, "--exit-code")
    assert loses.returncode == 3 and "this change loses data (p5-training-lustre-fs)" in loses.stderr
    assert gpucluster("plan", "diff", base, lossy, "--exit-code", "--allow-data-loss").returncode == 2
    assert gpucluster("plan", "diff", base, shrink, "--exit-code").returncode == 2
    assert gpucluster("plan", "diff", base, base, "--exit-code").returncode == 0
    expect = gpucluster("plan", "diff", base, shrink, "--expect-no-changes")
    assert expect.returncode == 2 and "--expect-no-changes, but the plans differ: 0 to create, 1 to update" in expect.stderr
    assert gpucluster("plan", "diff", base, base, "--expect-no-changes").returncode == 0


@pytest.mark.slow  # a CLI process per format
def test_cli_formats(plan_files):
    base, lossy = str(plan_files["base"]), str(plan_files["efa-off"])
    doc = json.loads(gpucluster("plan", "diff", base, lossy, "--format", "json").stdout)
    validate(doc, "diff.schema.json")
    assert doc["changeSummary"] == {"create": 0, "update": 2, "replace": 4, "delete": 0, "same": 66}
    (fs,) = [s for s in doc["steps"] if s["type"] == LUSTRE]
    assert fs["op"] == "replace" and "efaEnabled" in fs["replaceReasons"] and fs["dataLoss"]
    assert fs["detailedDiff"]["efaEnabled"] == {"kind": "delete-replace", "inputDiff": True}
    md = gpucluster("plan", "diff", base, lossy, "--format", "markdown")
    assert md.returncode == 0 and md.stdout.startswith("## gpucluster plan diff: `p5-training` (gpucluster)")


@pytest.mark.slow  # a CLI process per case
def test_cli_bad_inputs_are_one_line(tmp_path, plan_files):
    bad = tmp_path / "bad.json"
    bad.write_text('{"resources": [{"no": "urn"}]}')
    for args in ((str(bad), str(plan_files["base"])), (str(tmp_path / "missing.json"), str(plan_files["base"]))):
        result = gpucluster("plan", "diff", *args)
        assert result.returncode == 1 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"ok": False, "resources": [], "stack": "x"}))
    result = gpucluster("plan", "diff", str(invalid), str(plan_files["base"]))
    assert result.returncode == 1 and "does not load" in result.stderr


def _upgrade_of_an_eks_cluster(ignored: bool) -> tuple[Comparison, str]:
    """eks-p5 as it plans today, against the same plan with the cluster as an older version made it (the
    creator's bootstrap admin on; docs/kubernetes.md, "Who administers the EKS cluster"): only the bootstrap flag differs."""
    new = json.loads((GOLDEN / "plans" / "eks-p5.json").read_text())
    old = json.loads(json.dumps(new))
    (cluster,) = [r for r in old["resources"] if r["type"] == "aws:eks/cluster:Cluster"]
    cluster["inputs"]["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] = True
    cluster.pop("ignoreChanges")
    if not ignored:
        (mine,) = [r for r in new["resources"] if r["type"] == "aws:eks/cluster:Cluster"]
        mine.pop("ignoreChanges")
    validate(new, "plan.schema.json")
    c = compare(old, new)
    return c, render(c)


def test_an_ignored_change_is_no_replacement_and_says_so():
    """The EKS cluster ignores its bootstrap flag (components/kubernetes/_eks_access.py): a cluster made with the creator's
    hidden admin keeps it, and the plan diff shows the difference as ignored, not as the replacement AWS would do."""
    c, text = _upgrade_of_an_eks_cluster(ignored=True)
    (cluster,) = [s for s in c.steps if s.type == "aws:eks/cluster:Cluster"]
    assert (cluster.op, cluster.changed, cluster.replace_reasons) == ("same", [], [])
    assert cluster.ignored == ["accessConfig.bootstrapClusterCreatorAdminPermissions"]
    assert "Replacements" not in text
    # Without ignore_changes the same difference replaces the cluster and loses what etcd holds.
    c, text = _upgrade_of_an_eks_cluster(ignored=False)
    (cluster,) = [s for s in c.steps if s.type == "aws:eks/cluster:Cluster"]
    assert cluster.op == "replace" and cluster.replace_reasons == ["accessConfig.bootstrapClusterCreatorAdminPermissions"]
    assert cluster.data_loss and "Replacements" in text


def test_the_ignored_section_names_the_path_and_the_values():
    old = json.loads((GOLDEN / "plans" / "eks-p5.json").read_text())
    new = json.loads(json.dumps(old))
    (cluster,) = [r for r in old["resources"] if r["type"] == "aws:eks/cluster:Cluster"]
    cluster["inputs"]["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] = True
    alias = next(r for r in new["resources"] if r["type"] == "aws:kms/alias:Alias")
    alias["inputs"]["name"] += "-renamed"  # a real change, so the diff is not empty
    text = render(compare(old, new))
    assert "Ignored (ignore_changes: `pulumi up` keeps the existing value, nothing is replaced)" in text
    assert "= aws:eks:Cluster eks-p5-eks-eks: accessConfig.bootstrapClusterCreatorAdminPermissions: True → False" in text


def _teams_plan(change=None) -> dict:
    """A plan document holding only slurm-p5's accounts contract (rendered from its config after ``change``): the
    file the real plan carries in the head node's live bundle (tests/golden/plans/slurm-p5.json pins it there)."""
    from gpucluster.load import load_spec
    from gpucluster.render.slurm.accounts import ACCOUNTS_PATH, accounts_contract
    from gpucluster.render.slurm.names import SlurmContext

    config = prcases.stack_config("slurm-p5")
    if change:
        change(config)
    ctx = SlurmContext.of(load_spec(config, stack="slurm-p5").cluster)
    text = json.dumps(accounts_contract(ctx, "bucket"), indent=2) + "\n"
    return {
        "stack": "slurm-p5",
        "project": "gpucluster",
        "resources": [],
        "files": {f"slurm-p5-slurm-head-live{ACCOUNTS_PATH}": text},
    }


def test_team_changes_are_said_as_such():
    """slurm-p5's teams change: the diff says what happened to each team, not only that accounts.json changed."""
    from gpucluster.tools.plan.diff.teams import team_lines

    def change(c: dict) -> None:
        teams = c["gpucluster:slurm"]["teams"]
        teams[0]["gpuQuota"] = {"h100": 93}
        teams[0]["users"] = ["alice"]
        teams[1] = {"name": "ops", "users": ["carol"], "maxJobTime": "12h"}

    c = compare(_teams_plan(), _teams_plan(change))
    validate(to_json(c), "diff.schema.json")
    assert team_lines(c) == [
        "research: 85 → 93 guaranteed h100 GPUs",
        "research: fair share 85 → 93",
        "research: members -bob",
        "ops: added — 0 guaranteed h100 GPUs, fair share 1",
        "applied: removed — its accounts are kept while it has jobs",
    ]
    text = render(c)
    assert "Teams (Slurm accounts; the head node reconciles them within minutes, without a restart)\n  research: 85 → 93" in text
    assert "- applied: removed — its accounts are kept while it has jobs" in markdown(c)
    assert to_json(c)["teams"] == team_lines(c)
    assert team_lines(compare(_teams_plan(), _teams_plan())) == []
    # the plan's summary names them too (tests/golden/plans/slurm-p5.txt pins the row in place)
    from gpucluster.tools.plan.diff.teams import summary_row

    assert summary_row(_teams_plan(change)["files"]) == (
        "teams",
        "research: 93 guaranteed h100 GPUs; ops: 0 guaranteed h100 GPUs (Slurm accounts; docs/teams.md)",
    )
    assert summary_row({}) is None


def test_the_roll_is_said_with_its_window_and_without_a_rebaseline_where_none_is_set():
    from gpucluster.tools.plan.diff.disruption import _how_it_rolls, roll_policy

    agent = json.dumps({"updates": {"max_drained_percent": 25, "maintenance_window": "Sat 02:00-06:00", "baseline": None}})
    updates = roll_policy({"c-slurm-head-files/etc/gpucluster/agent.json": agent})
    assert updates is not None
    assert _how_it_rolls("p5", updates) == (
        "at most 25 % of the group drained at a time, each node once idle; inside the maintenance window Sat 02:00-06:00"
    )
    assert roll_policy({}) is None and roll_policy({"x/etc/gpucluster/agent.json": "not json"}) is None
