"""Bad Slurm configs: each fails naming the field, and the program registers nothing.

Every case runs the real stack program (``__main__.py``) under the plan's mock engine, so this also
proves the error comes before the first resource.
"""

from __future__ import annotations

import pytest

from tests.conftest import assert_refused, group, make_config

CPU = {"name": "cpu", "instanceType": "g6e.xlarge", "availabilityZones": ["us-east-1a"], "minSize": 1, "maxSize": 2}


def slurm(*groups, **keys):
    section = keys.pop("section", {})
    return make_config(*(groups or (group(),)), slurm=section, **keys)


# (id, config, field path named, message fragment)
BAD_SLURM = [
    (
        "head-kms-key-id-not-arn",
        slurm(section={"headNode": {"kmsKeyId": "1234abcd-12ab-34cd-56ef-1234567890ab"}}),
        "gpucluster:slurm.headNode.kmsKeyId",
        "is not a key ARN, which EBS (head node volumes) needs",
    ),
    (
        "count-as-text",
        slurm(section={"powerSaving": {"suspendTimeSeconds": "ten minutes"}}),
        "gpucluster:slurm.powerSaving.suspendTimeSeconds",
        "whole number such as 4, not the text 'ten minutes'",
    ),
    ("misspelt-field", slurm(section={"headnode": {}}), "gpucluster:slurm.headnode", "unknown field 'headnode'"),
    (
        "unknown-mode",
        slurm(section={"nodeGroups": [{"name": "gpu", "mode": "elastic"}]}),
        "gpucluster:slurm.nodeGroups[0].mode",
        "'dynamic' or 'static'",
    ),
    (
        "entry-for-missing-group",
        slurm(section={"nodeGroups": [{"name": "h100"}]}),
        "gpucluster:slurm.nodeGroups[0].name",
        "no node group is named 'h100'",
    ),
    (
        "entry-twice",
        slurm(section={"nodeGroups": [{"name": "gpu"}, {"name": "gpu"}]}),
        "gpucluster:slurm.nodeGroups[1].name",
        "Slurm node group setting name 'gpu' is already used by entry [0]",
    ),
    (
        "dynamic-group-with-desired-nodes",
        slurm(group(minSize=2, desiredSize=2)),
        "gpucluster:nodeGroups[0].minSize",
        "is a dynamic Slurm group",
    ),
    (
        "partition-name-with-space",
        slurm(section={"nodeGroups": [{"name": "gpu", "partition": "big gpus"}]}),
        "gpucluster:slurm.nodeGroups[0].partition",
        "should match pattern",
    ),
    (
        "two-groups-one-partition",
        slurm(group(), CPU, section={"nodeGroups": [{"name": "cpu", "mode": "static", "partition": "gpu"}]}),
        "gpucluster:slurm.nodeGroups[0].partition",
        "both use partition 'gpu'",
    ),
    (
        "bad-feature",
        slurm(section={"nodeGroups": [{"name": "gpu", "features": ["fast,cheap"]}]}),
        "gpucluster:slurm.nodeGroups[0].features",
        "is not a Slurm feature name",
    ),
    (
        "head-node-type-misspelt",
        slurm(section={"headNode": {"instanceType": "m7i.xl"}}),
        "gpucluster:slurm.headNode.instanceType",
        "is not in the instance catalog",
    ),
    (
        "suspend-time-too-short",
        slurm(section={"powerSaving": {"suspendTimeSeconds": 5}}),
        "gpucluster:slurm.powerSaving.suspendTimeSeconds",
        "greater than or equal to 60",
    ),
    (
        "jammy-image-for-slurm",
        slurm(group(imageSsmParameter="/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id")),
        "gpucluster:nodeGroups[0].imageSsmParameter",
        "cannot talk to the head node's Slurm 23.11",
    ),
    (
        "tag-key-with-slash",
        slurm(tags={"cost/center": "42"}),
        "gpucluster:tags",
        "contains '/'",
    ),
    (
        "slurm-without-nat",
        slurm(network={"enableNatGateway": False}),
        "gpucluster:network.enableNatGateway",
        "install slurm-wlm and munge from the Ubuntu archive",
    ),
    (
        "group-asks-for-slurm-without-section",
        make_config(group(scheduler="slurm")),
        "gpucluster:nodeGroups[0].scheduler",
        "the cluster configures no slurm",
    ),
    (
        "repair-brake-above-100-percent",
        slurm(section={"agent": {"repairBrakePercent": 150}}),
        "gpucluster:slurm.agent.repairBrakePercent",
        "100",
    ),
    (
        "repair-brake-window-under-a-minute",
        slurm(section={"agent": {"repairBrakeWindowSeconds": 30}}),
        "gpucluster:slurm.agent.repairBrakeWindowSeconds",
        "60",
    ),
    (
        "roll-window-not-a-window",
        slurm(section={"updates": {"maintenanceWindow": "weekends"}}),
        "gpucluster:slurm.updates.maintenanceWindow",
        "'weekends' is not a maintenance window; write HH:MM-HH:MM in UTC, optionally after days",
    ),
    (
        "roll-share-above-100-percent",
        slurm(section={"updates": {"maxDrainedPercent": 101}}),
        "gpucluster:slurm.updates.maxDrainedPercent",
        "100",
    ),
    (
        "no-group-for-slurm",
        slurm(group(scheduler="none")),
        "gpucluster:slurm",
        "no node group has scheduler slurm",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), [c[1:] for c in BAD_SLURM], ids=[c[0] for c in BAD_SLURM])
def test_bad_slurm_config_fails_before_any_resource(config, path, fragment):
    assert_refused(config, path, fragment)


def test_there_are_at_least_ten():
    assert len(BAD_SLURM) >= 10
