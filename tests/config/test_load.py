"""Loading: Pulumi's flat config map → a resolved spec."""

from __future__ import annotations

import json

from gpucluster.facts.images import NEURON_DLAMI
from gpucluster.load import load_spec
from tests.conftest import group, make_config


def test_minimal_config_is_fully_defaulted():
    spec = load_spec(make_config(), stack="mystack").spec
    g = spec.node_groups[0]
    assert spec.name == "mystack"  # the stack name by default
    assert g.enable_efa_support is True  # the type supports EFA
    assert g.create_placement_group is True  # EFA, on-demand, one zone
    assert g.desired_size == 0 == g.min_size
    assert g.image_ssm_parameter and "base-oss-nvidia-driver-gpu" in g.image_ssm_parameter
    assert spec.network.availability_zones == ("us-east-1a",)
    assert spec.network.create_vpc
    assert g.scheduler == "none"  # no scheduler configured: a plain Auto Scaling group


def test_values_arrive_as_json_text_like_pulumi_passes_them():
    config = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in make_config(name="c1").items()}
    config["gpucluster:name"] = "c1"
    spec = load_spec(config, stack="s").spec
    assert spec.name == "c1" and spec.node_groups[0].instance_type == "p5.48xlarge"


def test_scalar_text_is_coerced():
    spec = load_spec(make_config(group(maxSize="4", enableEfaSupport="false")), stack="s").spec
    assert spec.node_groups[0].max_size == 4 and spec.node_groups[0].enable_efa_support is False


def test_auto_defaults_follow_the_instance_and_capacity():
    spec = load_spec(
        make_config(
            group(name="cpu", instanceType="g6e.xlarge"),
            group(name="blk", capacity={"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"}),
            group(name="odcr", capacity={"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"}),
            group(name="trn", instanceType="trn1.32xlarge"),
        ),
        stack="s",
    ).spec
    by = {g.name: g for g in spec.node_groups}
    assert (by["cpu"].enable_efa_support, by["cpu"].create_placement_group) == (False, False)
    assert (by["blk"].enable_efa_support, by["blk"].create_placement_group) == (True, False)
    assert by["odcr"].create_placement_group is False
    assert by["trn"].image_ssm_parameter == NEURON_DLAMI.format(release="22.04")


def test_warnings_are_returned_not_raised():
    result = load_spec(
        make_config(
            group(createPlacementGroup=True, capacity={"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"})
        ),
        stack="s",
    )
    assert [f.code for f in result.findings] == ["placement-group-capacity-reservation"]


def test_spec_is_frozen():
    spec = load_spec(make_config(), stack="s").spec
    try:
        spec.node_groups[0].max_size = 3  # type: ignore[misc]
    except Exception as exc:  # pydantic raises ValidationError for frozen models
        assert "frozen" in str(exc)
    else:
        raise AssertionError("spec should be immutable")


def test_every_field_is_documented():
    from gpucluster.config.cluster import ClusterSpec
    from gpucluster.tools.docs import _models

    for model in _models(ClusterSpec):
        assert model.__doc__, model
        for name, field in model.model_fields.items():
            assert field.description and len(field.description) > 10, f"{model.__name__}.{name} has no docstring"
