"""Any config either plans or fails with the config error — never another exception.

Configs are generated around the valid space (real instance types, zones of the region, sizes near
the limits) with misspellings, wrong types and contradictions mixed in, and run through the real
stack program under the mock engine.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpucluster.facts.catalog import load_catalog
from gpucluster.tools.plan.run.engine import run_program
from tests.conftest import IN_CI

CATALOG = load_catalog()
TYPES = [*CATALOG, "p5.48xl", "x9.bogus"]
REGIONS = ["us-east-1", "us-west-2"]
ZONES = ["us-east-1a", "us-east-1b", "us-east-1z", "us-west-2a", "us-west-2c", "eu-west-1a", "bogus"]
RESERVATION = st.sampled_from(["cr-0123456789abcdef0", "cr-1", "bad"])

capacity = st.one_of(
    st.just({"type": "on-demand"}),
    st.fixed_dictionaries({"type": st.just("spot")}, optional={"spotMaxPrice": st.sampled_from([0.5, 40.0, -1])}),
    st.fixed_dictionaries(
        {"type": st.just("capacity-reservation")},
        optional={
            "reservationId": RESERVATION,
            "instanceCount": st.integers(-1, 64),
            "resourceGroupArn": st.just("arn:aws:resource-groups:us-east-1:123456789012:group/g"),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("capacity-block")}, optional={"reservationId": RESERVATION, "instanceCount": st.integers(0, 64)}
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["reserved", 7])}),
)
size = st.one_of(st.integers(-1, 600), st.sampled_from(["4", "x", None]))

node_group = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["a", "b", "p5", "gpu-1", "Bad_Name", "-x", ""]),
        "instanceType": st.sampled_from(TYPES),
        "availabilityZones": st.lists(st.sampled_from(ZONES), min_size=0, max_size=3),
        "maxSize": size,
    },
    optional={
        "minSize": size,
        "desiredSize": size,
        "enableEfaSupport": st.one_of(st.booleans(), st.none(), st.just("maybe")),
        "createPlacementGroup": st.one_of(st.booleans(), st.none()),
        "placementGroupName": st.just("existing-pg"),
        "efaLayout": st.sampled_from(["current", "legacy", "newest"]),
        "capacity": capacity,
        "associatePublicIpAddress": st.booleans(),
        "subnetIds": st.lists(st.sampled_from(["subnet-0aaa1111", "subnet-0bbb2222", "subnet-x"]), max_size=2),
        "rootVolumeSizeGib": st.integers(0, 20000),
        "tags": st.dictionaries(st.sampled_from(["team", "aws:x", "k" * 130]), st.sampled_from(["v", "w" * 300]), max_size=2),
        "instanceTyp": st.just("p5.48xlarge"),
        "imageId": st.sampled_from(["ami-0123456789abcdef0", "ami-bad"]),
        "nccl_env": st.just({"NCCL_DEBUG": "INFO"}),
    },
)
network = st.fixed_dictionaries(
    {},
    optional={
        "vpcId": st.sampled_from(["vpc-0abc1234", "vpc-x"]),
        "subnets": st.lists(
            st.fixed_dictionaries(
                {"id": st.sampled_from(["subnet-0aaa1111", "subnet-0bbb2222"]), "availabilityZone": st.sampled_from(ZONES)}
            ),
            max_size=2,
        ),
        "vpcCidr": st.sampled_from(["10.0.0.0/16", "10.0.0.0/24", "10.0.0.0/8", "not-a-cidr"]),
        "availabilityZones": st.lists(st.sampled_from(ZONES), max_size=2),
        "interfaceEndpoints": st.lists(st.sampled_from(["ssm", "sts", "s4"]), max_size=2),
        "enableNatGateway": st.booleans(),
        "privateSubnetPrefixLength": st.integers(14, 28),
    },
)
ACCELERATED = [t for t in CATALOG if CATALOG[t].accelerator_count]
kubernetes = st.fixed_dictionaries(
    {},
    optional={
        "version": st.sampled_from(["1.33", "1.27", "latest"]),
        "endpoint": st.fixed_dictionaries(
            {},
            optional={"publicAccess": st.booleans(), "publicAccessCidrs": st.lists(st.sampled_from(["0.0.0.0/0", "10.1.2.3/8"]))},
        ),
        "addonVersions": st.dictionaries(
            st.sampled_from(["vpc-cni", "kube-proxy", "bogus"]), st.sampled_from(["v1.18.0-eksbuild.1", "x"])
        ),
        "gpuOperator": st.fixed_dictionaries({"migStrategy": st.sampled_from(["none", "single", "sometimes"])}),
        "teams": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["a", "b", "Bad"])},
                optional={
                    "gpuQuota": st.dictionaries(st.sampled_from(["h100", "a100", "l40s"]), st.integers(-1, 64), max_size=2)
                },
            ),
            max_size=2,
        ),
        "kueue": st.fixed_dictionaries(
            {}, optional={"topologyLevels": st.lists(st.sampled_from(["kubernetes.io/hostname", "x"]))}
        ),
    },
)
slurm = st.fixed_dictionaries(
    {},
    optional={
        "headNode": st.fixed_dictionaries(
            {},
            optional={
                "instanceType": st.sampled_from(["m7i.xlarge", "m7i.xl", "g6e.xlarge"]),
                "availabilityZone": st.sampled_from(ZONES),
                "dataVolumeSizeGib": st.integers(0, 200),
            },
        ),
        "accounting": st.one_of(st.just({}), st.fixed_dictionaries({"purgeAfterMonths": st.integers(0, 13)})),
        "powerSaving": st.fixed_dictionaries(
            {}, optional={"suspendTimeSeconds": st.integers(0, 1000), "resumeTimeoutSeconds": st.integers(100, 2000)}
        ),
        "nodeGroups": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["a", "b", "g0", "zz"])},
                optional={
                    "mode": st.sampled_from(["dynamic", "static", "elastic"]),
                    "partition": st.sampled_from(["p", "DEFAULT", "bad name"]),
                    "default": st.booleans(),
                    "features": st.lists(st.sampled_from(["x", "a,b"]), max_size=2),
                },
            ),
            max_size=2,
        ),
        "protectData": st.booleans(),
    },
)


@st.composite
def sane_group(draw, name: str, region: str):
    """A group that should plan: real type, a zone of the region, consistent sizes and capacity."""
    itype = draw(st.sampled_from(ACCELERATED))
    facts = CATALOG[itype]
    maximum = draw(st.integers(0, 64))
    minimum = draw(st.integers(0, maximum))
    out = {
        "name": name,
        "instanceType": itype,
        "availabilityZones": [f"{region}a"],
        "maxSize": maximum,
        "minSize": minimum,
        "desiredSize": draw(st.integers(minimum, maximum)),
    }
    kinds = ["on-demand", "spot", "capacity-reservation"] + (
        ["capacity-block"] if "capacity-block" in facts.usage_classes else []
    )
    kind = draw(st.sampled_from(kinds))
    if kind in ("capacity-reservation", "capacity-block"):
        out["capacity"] = {"type": kind, "reservationId": "cr-0123456789abcdef0", "instanceCount": max(maximum, 1)}
    else:
        out["capacity"] = {"type": kind}
    if facts.efa_supported:
        out["enableEfaSupport"] = draw(st.sampled_from([True, False, None]))
        out["efaLayout"] = draw(st.sampled_from(["current", "legacy"]))
    if kind != "capacity-block":
        out["createPlacementGroup"] = draw(st.sampled_from([False, None]))
    return out


@st.composite
def sane_config(draw):
    region = draw(st.sampled_from(REGIONS))
    count = draw(st.integers(1, 3))
    groups = [draw(sane_group(f"g{i}", region)) for i in range(count)]
    cfg = {"aws:region": region, "gpucluster:nodeGroups": groups}
    if draw(st.booleans()):
        cfg["gpucluster:network"] = {
            "interfaceEndpoints": draw(st.lists(st.sampled_from(["ssm", "sts"]), unique=True)),
            "oneNatGatewayPerAz": draw(st.booleans()),
        }
    if draw(st.integers(0, 3)) == 0:
        # Slurm: groups with running nodes are static; dynamic ones start with none.
        entries = []
        for g in groups:
            g["maxSize"] = max(g["maxSize"], 1)
            if g["minSize"] or g["desiredSize"]:
                entries.append({"name": g["name"], "mode": "static"})
            if "capacity" in g and g["capacity"].get("instanceCount"):
                g["capacity"]["instanceCount"] = max(g["maxSize"], g["capacity"]["instanceCount"])
        cfg["gpucluster:slurm"] = {"nodeGroups": entries, "accounting": {}} if draw(st.booleans()) else {"nodeGroups": entries}
    return cfg


noisy_config = st.fixed_dictionaries(
    {"aws:region": st.sampled_from(REGIONS), "gpucluster:nodeGroups": st.lists(node_group, min_size=0, max_size=3)},
    optional={
        "gpucluster:network": network,
        "gpucluster:tags": st.dictionaries(st.sampled_from(["team", "aws:owner"]), st.just("x"), max_size=2),
        "gpucluster:name": st.sampled_from(["c", "Cluster!", "p5-training"]),
        "gpucluster:nodeGroup": st.just([]),
        "gpucluster:kubernetes": kubernetes,
        "gpucluster:slurm": slurm,
    },
)
config = st.one_of(sane_config(), noisy_config)


SETTINGS = settings(deadline=None, derandomize=IN_CI, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def plans_or_fails_with_the_config_error(cfg: dict) -> None:
    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in cfg.items()}
    plan = run_program("gpucluster", "prop", flat)  # any other exception fails the test
    event("planned" if plan.ok else "config error")
    if plan.ok:
        assert plan.resources, "a valid config must create something"
        lts = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
        system = 1 if "gpucluster:kubernetes" in cfg else 0  # EKS system nodes have a template of their own
        assert len(lts) == len(cfg["gpucluster:nodeGroups"]) + system
        for lt in lts:
            assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
        heads = plan.of_type("aws:ec2/instance:Instance")
        assert len(heads) == (1 if "gpucluster:slurm" in cfg else 0)
        for head in heads:
            assert head.inputs["metadataOptions"]["httpTokens"] == "required" and head.inputs["disableApiTermination"]
    else:
        assert plan.resources == [], "nothing may be registered for an invalid config"
        assert "is invalid" in (plan.error or "") and "nothing was created" in (plan.error or "")
        errors = [f for f in plan.findings if f["level"] == "error"]
        assert errors and all(f["path"] and f["message"] for f in errors)


@pytest.mark.slow  # 300 runs of the stack program, about 100 s of CPU: the fast tier runs the sample below
@settings(SETTINGS, max_examples=300)
@given(config)
def test_any_config_plans_or_fails_with_the_config_error(cfg):
    plans_or_fails_with_the_config_error(cfg)


@pytest.mark.slow  # plans 30 generated configs
@settings(SETTINGS, max_examples=30)
@given(config)
def test_a_sample_of_configs_plans_or_fails_with_the_config_error(cfg):
    """The same property on 30 configs, for the fast tier (``pytest -m "not slow"``); CI runs both."""
    plans_or_fails_with_the_config_error(cfg)
