"""The messages a new user meets first, whole: a region typo, a misspelt key or field, a missing field. Each is the
one error of its config (no knock-on "zone is not in region us-eas-1", no "missing" beside the misspelt field that
meant it), names the field and the value in words (no pattern, no reST), and says what to set.

Every case runs the real stack program under the plan's mock engine, like the other bad-config tables."""

from __future__ import annotations

import pytest

from tests.conftest import MINIMAL_GROUP, group, make_config, plan_config

INSTANCE_TYPE_DOC = "EC2 instance type, e.g. `p5.48xlarge`; must be in the instance catalog (text)."

# (id, config, [(path, message, fix)]: every error the config gets)
MESSAGES = [
    (
        "region-typo",
        make_config(region="us-eas-1"),
        [
            (
                "aws:region",
                "region 'us-eas-1' is not an AWS region; the nearest are us-east-1, us-west-1, us-east-2",
                "set aws:region to the one you meant, e.g. `pulumi config set aws:region us-east-1`",
            )
        ],
    ),
    (
        "region-in-capitals",
        make_config(region="US-EAST-1"),
        [("aws:region", "region 'US-EAST-1' is not written as AWS writes it", "set aws:region to us-east-1")],
    ),
    (
        "region-with-underscores",
        make_config(region="us_east_1"),
        [("aws:region", "region 'us_east_1' is not written as AWS writes it", "set aws:region to us-east-1")],
    ),
    (
        "region-is-a-zone",
        make_config(region="us-east-1a"),
        [
            (
                "aws:region",
                "region 'us-east-1a' is an Availability Zone of us-east-1, not a region",
                "set aws:region to us-east-1; zones go in each node group's availabilityZones",
            )
        ],
    ),
    (
        "region-unknown-far-from-any",
        make_config(group(availabilityZones=["mars-1a"]), region="mars-1"),
        [
            (
                "aws:region",
                "region 'mars-1' is not an AWS region (aws, aws-cn or aws-us-gov partition)",
                "set aws:region to one of: ",
            )
        ],
    ),
    (
        "misspelt-key",
        {"aws:region": "us-east-1", "gpucluster:nodeGroup": [MINIMAL_GROUP]},
        [
            (
                "gpucluster:nodeGroup",
                "unknown config key 'gpucluster:nodeGroup'; did you mean 'gpucluster:nodeGroups'?",
                "rename the key to gpucluster:nodeGroups, which is required",
            )
        ],
    ),
    (
        "misspelt-optional-key",
        {**make_config(), "gpucluster:tag": {"team": "ml"}},
        [
            (
                "gpucluster:tag",
                "unknown config key 'gpucluster:tag'; did you mean 'gpucluster:tags'?",
                "rename the key to gpucluster:tags",
            )
        ],
    ),
    (
        "misspelt-required-field",
        make_config({**group(instanceType=None), "instanceTyp": "p5.48xlarge"}),
        [
            (
                "gpucluster:nodeGroups[0].instanceTyp",
                "unknown field 'instanceTyp'; did you mean 'instanceType'?",
                f"rename instanceTyp to instanceType, which is required: {INSTANCE_TYPE_DOC}",
            )
        ],
    ),
    (
        "misspelt-optional-field",
        make_config(group(minSze=1)),
        [("gpucluster:nodeGroups[0].minSze", "unknown field 'minSze'; did you mean 'minSize'?", "rename minSze to minSize")],
    ),
    (
        "missing-field",
        make_config(group(instanceType=None)),
        [
            (
                "gpucluster:nodeGroups[0].instanceType",
                "'instanceType' is required but missing",
                f"set instanceType: {INSTANCE_TYPE_DOC}",
            )
        ],
    ),
    (
        "missing-top-level-key",
        {"aws:region": "us-east-1"},
        [
            (
                "gpucluster:nodeGroups",
                "'gpucluster:nodeGroups' is required but missing",
                "set gpucluster:nodeGroups: The accelerated node groups.",
            )
        ],
    ),
]


@pytest.mark.parametrize(("config", "expected"), [c[1:] for c in MESSAGES], ids=[c[0] for c in MESSAGES])
def test_the_first_messages_are_whole_and_alone(config, expected):
    plan = plan_config(config, "bad")
    assert plan.error is not None and plan.resources == []
    got = [(f["path"], f["message"], f["fix"]) for f in plan.findings if f["level"] == "error"]
    assert [(p, m) for p, m, _ in got] == [(p, m) for p, m, _ in expected]
    for (_, _, fix), (_, _, want) in zip(got, expected, strict=True):
        assert fix.startswith(want) if want.endswith(": ") else fix == want
    assert "``" not in plan.error and "pattern" not in plan.error and "Traceback" not in plan.error
