"""DataBucket from Args: a plain dict, the stack's defaults, a bad value named by its field before any resource."""

from __future__ import annotations

import pytest

from gpucluster.components.storage.data_bucket import DataBucket, bucket_from_args
from gpucluster.config.errors import ConfigError
from gpucluster.load import load_spec
from tests.conftest import make_config


def test_standalone_defaults_are_the_stacks():
    spec = load_spec(make_config(storage={"bucket": {}}), stack="c").spec
    assert spec.storage is not None
    assert bucket_from_args({"cluster_name": "c"}) == spec.storage.bucket


def test_settings_reach_the_lifecycle(run_components):
    plan = run_components(
        lambda: DataBucket("d", {"cluster_name": "c", "name_prefix": "ml-", "noncurrent_version_days": 9, "tags": {"t": "1"}})
    )
    bucket = plan.of_type("aws:s3/bucket:Bucket")[0]
    assert bucket.inputs["bucketPrefix"] == "ml-" and bucket.inputs["tags"]["t"] == "1" and bucket.protect
    rules = plan.of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")[0].inputs["rules"]
    assert {"noncurrentDays": 9} in [r.get("noncurrentVersionExpiration") for r in rules]


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"cluster_name": "c", "noncurrent_version_days": "soon"}, "args.noncurrentVersionDays"),
        ({"cluster_name": "c", "name_prefx": "x-"}, "args.namePrefx"),
        ({}, "args.clusterName"),
    ],
)
def test_bad_value_names_the_field_before_any_resource(run_components, args, path):
    raised = []

    def program():
        with pytest.raises(ConfigError) as e:
            DataBucket("d", args)
        raised.append(e.value)

    plan = run_components(program)
    assert path in [f.path for f in raised[0].errors] and plan.resources == []
