"""DataBucket from Args: a plain dict, the stack's defaults, a bad value named by its field before any resource."""

from __future__ import annotations

from gpucluster.components.storage.data_bucket import DataBucket, from_args
from gpucluster.load import load_spec
from tests.conftest import make_config


def test_standalone_defaults_are_the_stacks():
    spec = load_spec(make_config(storage={"bucket": {}}), stack="c").spec
    assert spec.storage is not None
    assert from_args({"cluster_name": "c"}).resolved == spec.storage.bucket


def test_settings_reach_the_lifecycle(run_components):
    plan = run_components(
        lambda: DataBucket("d", {"cluster_name": "c", "name_prefix": "ml-", "noncurrent_version_days": 9, "tags": {"t": "1"}})
    )
    bucket = plan.of_type("aws:s3/bucket:Bucket")[0]
    assert bucket.inputs["bucketPrefix"] == "ml-" and bucket.inputs["tags"]["t"] == "1" and bucket.protect
    rules = plan.of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")[0].inputs["rules"]
    assert {"noncurrentDays": 9} in [r.get("noncurrentVersionExpiration") for r in rules]
