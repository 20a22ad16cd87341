"""Hand-written bad configs: each fails naming the field, and the program registers nothing.

Every case runs the real stack program (``__main__.py``) under the plan's mock engine, so this also
proves the error comes before the first resource.
"""

from __future__ import annotations

import pytest

from tests.conftest import MINIMAL_GROUP, assert_refused, group, make_config, plan_config

KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
BYO = {"vpcId": "vpc-0abc1234", "subnets": [{"id": "subnet-0aaa1111", "availabilityZone": "us-east-1a"}]}

# (id, config, field path named, message fragment)
BAD_CONFIGS = [
    (
        "unknown-instance-type",
        make_config(group(instanceType="p5.48xl")),
        "gpucluster:nodeGroups[0].instanceType",
        "'p5.48xl' is not in the instance catalog",
    ),
    (
        "efa-on-non-efa-type",
        make_config(group(instanceType="g6e.xlarge", enableEfaSupport=True)),
        "gpucluster:nodeGroups[0].enableEfaSupport",
        "g6e.xlarge does not support EFA",
    ),
    (
        "efa-spanning-zones",
        make_config(group(availabilityZones=["us-east-1a", "us-east-1b"])),
        "gpucluster:nodeGroups[0].availabilityZones",
        "must stay in one Availability Zone",
    ),
    (
        "subnet-outside-zone",
        make_config(
            group(subnetIds=["subnet-0bbb2222"]),
            network={**BYO, "subnets": BYO["subnets"] + [{"id": "subnet-0bbb2222", "availabilityZone": "us-east-1b"}]},
        ),
        "gpucluster:nodeGroups[0].subnetIds",
        "is in us-east-1b, outside the group's zones",
    ),
    (
        "placement-group-with-capacity-block",
        make_config(
            group(createPlacementGroup=True, capacity={"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"})
        ),
        "gpucluster:nodeGroups[0].createPlacementGroup",
        "cannot be used with a capacity block",
    ),
    (
        "max-above-reservation",
        make_config(
            group(
                maxSize=20,
                capacity={"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0", "instanceCount": 16},
            )
        ),
        "gpucluster:nodeGroups[0].maxSize",
        "maxSize 20 is above the 16 instances",
    ),
    (
        "public-ip-multi-card",
        make_config(group(associatePublicIpAddress=True)),
        "gpucluster:nodeGroups[0].associatePublicIpAddress",
        "cannot auto-assign a public IP",
    ),
    (
        "min-above-max",
        make_config(group(minSize=4, maxSize=2)),
        "gpucluster:nodeGroups[0].minSize",
        "minSize 4 is greater than maxSize 2",
    ),
    (
        "desired-above-max",
        make_config(group(desiredSize=3, maxSize=2)),
        "gpucluster:nodeGroups[0].desiredSize",
        "desiredSize 3 is outside minSize 0 .. maxSize 2",
    ),
    ("negative-size", make_config(group(maxSize=-1)), "gpucluster:nodeGroups[0].maxSize", "greater than or equal to 0"),
    ("missing-max-size", make_config(group(maxSize=None)), "gpucluster:nodeGroups[0].maxSize", "is required"),
    ("missing-zones", make_config(group(availabilityZones=None)), "gpucluster:nodeGroups[0].availabilityZones", "is required"),
    (
        "misspelt-field",
        make_config({**MINIMAL_GROUP, "instanceTyp": "p5.48xlarge"}),
        "gpucluster:nodeGroups[0].instanceTyp",
        "unknown field 'instanceTyp'",
    ),
    ("misspelt-key", {**make_config(), "gpucluster:nodeGroup": "[]"}, "gpucluster:nodeGroup", "unknown config key"),
    (
        "zone-outside-region",
        make_config(group(availabilityZones=["us-west-2a"])),
        "gpucluster:nodeGroups[0].availabilityZones",
        "zone 'us-west-2a' is not in region us-east-1",
    ),
    ("no-region", {k: v for k, v in make_config().items() if k != "aws:region"}, "aws:region", "no AWS region set"),
    ("no-node-groups", {**make_config(), "gpucluster:nodeGroups": "[]"}, "gpucluster:nodeGroups", "at least 1 item"),
    (
        "duplicate-group-names",
        make_config(group(), group()),
        "gpucluster:nodeGroups[1].name",
        "node group name 'gpu' is already used by entry [0]",
    ),
    ("bad-group-name", make_config(group(name="GPU_A")), "gpucluster:nodeGroups[0].name", "'GPU_A' is not a valid name"),
    (
        "capacity-block-without-id",
        make_config(group(capacity={"type": "capacity-block"})),
        "gpucluster:nodeGroups[0].capacity",
        "capacity-block needs reservationId",
    ),
    (
        "reservation-id-malformed",
        make_config(group(capacity={"type": "capacity-reservation", "reservationId": "res-123"})),
        "gpucluster:nodeGroups[0].capacity.reservationId",
        "should match pattern",
    ),
    (
        "unknown-capacity-type",
        make_config(group(capacity={"type": "reserved"})),
        "gpucluster:nodeGroups[0].capacity.type",
        "'on-demand', 'spot', 'capacity-reservation' or 'capacity-block'",
    ),
    ("reserved-tag-prefix", make_config(tags={"aws:team": "x"}), "gpucluster:tags", "reserved 'aws:' prefix"),
    ("vpc-cidr-too-large", make_config(network={"vpcCidr": "10.0.0.0/8"}), "gpucluster:network.vpcCidr", "between /16 and /24"),
    (
        "byo-vpc-without-subnets",
        make_config(network={"vpcId": "vpc-0abc1234"}),
        "gpucluster:network",
        "needs its private subnets listed",
    ),
    (
        "subnet-ids-without-byo-vpc",
        make_config(group(subnetIds=["subnet-0aaa1111"])),
        "gpucluster:nodeGroups[0].subnetIds",
        "only used with your own VPC",
    ),
    (
        "subnet-not-declared",
        make_config(group(subnetIds=["subnet-0ccc3333"]), network=BYO),
        "gpucluster:nodeGroups[0].subnetIds",
        "subnet-0ccc3333 is not listed in network.subnets",
    ),
    (
        "legacy-layout-exhausts-subnet",
        make_config(group(efaLayout="legacy", maxSize=300)),
        "gpucluster:nodeGroups[0].maxSize",
        "more than a /19 subnet's 8187",
    ),
    (
        "spot-with-reservation-id",
        make_config(group(capacity={"type": "spot", "reservationId": "cr-0123456789abcdef0"})),
        "gpucluster:nodeGroups[0].capacity",
        "type spot does not use a reservation",
    ),
    (
        "placement-group-two-ways",
        make_config(group(createPlacementGroup=True, placementGroupName="pg-existing")),
        "gpucluster:nodeGroups[0].placementGroupName",
        "both set",
    ),
    (
        "zone-not-in-account",
        make_config(group(availabilityZones=["us-east-1z"])),
        "gpucluster:nodeGroups[0].availabilityZones",
        "not an available zone",
    ),
    (
        "flow-log-retention-cloudwatch-rejects",
        make_config(network={"flowLogs": {"retentionDays": 100}}),
        "gpucluster:network.flowLogs.retentionDays",
        "retentionDays 100 is not a retention period CloudWatch Logs accepts",
    ),
    (
        "flow-log-unknown-destination",
        make_config(network={"flowLogs": {"destination": "kinesis"}}),
        "gpucluster:network.flowLogs.destination",
        "'cloudwatch' or 's3'",
    ),
    (
        "flow-log-aggregation-interval",
        make_config(network={"flowLogs": {"maxAggregationInterval": 300}}),
        "gpucluster:network.flowLogs.maxAggregationInterval",
        "60 or 600",
    ),
    (
        "flow-log-retention-zero",
        make_config(network={"flowLogs": {"destination": "s3", "retentionDays": 0}}),
        "gpucluster:network.flowLogs.retentionDays",
        "greater than or equal to 1",
    ),
    (
        "region-that-does-not-exist",
        make_config(group(availabilityZones=["us-moon-1a"]), region="us-moon-1"),
        "aws:region",
        "region 'us-moon-1' is not an AWS region",
    ),
    (
        "tag-injection",
        make_config(group(), tags={"team": "x$(curl evil)"}),
        "gpucluster:tags",
        "which AWS services other than EC2 refuse in tags",
    ),
    (
        "group-tag-newline",
        make_config(group(tags={"a\nb": "x"})),
        "gpucluster:nodeGroups[0].tags",
        "which AWS services other than EC2 refuse in tags",
    ),
    (
        "boolean-as-count",
        make_config(group(desiredSize=True)),
        "gpucluster:nodeGroups[0].desiredSize",
        "whole number, not the boolean true",
    ),
    (
        "decimal-count",
        make_config(group(maxSize=2.5)),
        "gpucluster:nodeGroups[0].maxSize",
        "whole number, not the decimal 2.5",
    ),
    (
        "whole-decimal-count",
        make_config(group(maxSize=2.0)),
        "gpucluster:nodeGroups[0].maxSize",
        "whole number, not the decimal 2.0",
    ),
    (
        "number-as-switch",
        make_config(group(enableEfaSupport=1)),
        "gpucluster:nodeGroups[0].enableEfaSupport",
        "true or false, not 1",
    ),
    (
        "boolean-as-price",
        make_config(group(pricePerHour=True)),
        "gpucluster:nodeGroups[0].pricePerHour",
        "a number, not the boolean true",
    ),
    (
        "kms-not-a-key",
        make_config(group(kmsKeyId="arn:aws:kms:us-east-1:111122223333:key/not-a-uuid")),
        "gpucluster:nodeGroups[0].kmsKeyId",
        "is not a key ARN, key id, alias/<name> or alias ARN",
    ),
    (
        "kms-other-region",
        make_config(group(kmsKeyId=KEY.replace("us-east-1", "us-west-2"))),
        "gpucluster:nodeGroups[0].kmsKeyId",
        "is in us-west-2, but the cluster is in us-east-1",
    ),
    (
        "key-name-too-long",
        make_config(group(keyName="k" * 256)),
        "gpucluster:nodeGroups[0].keyName",
        "is not 1-255 printable ASCII characters",
    ),
    (
        "ssm-parameter-not-a-name",
        make_config(group(imageSsmParameter="aws/service/$(id)")),
        "gpucluster:nodeGroups[0].imageSsmParameter",
        "is not an SSM parameter name",
    ),
    (
        "capacity-block-time-not-iso",
        make_config(group(capacity={"type": "capacity-block", "reservationId": "cr-0123456789abcdef0", "startTime": "soon"})),
        "gpucluster:nodeGroups[0].capacity.startTime",
        "startTime 'soon' is not an ISO 8601 time",
    ),
    (
        "root-volume-too-small",
        make_config(group(rootVolumeSizeGib=8)),
        "gpucluster:nodeGroups[0].rootVolumeSizeGib",
        "greater than or equal to 30",
    ),
]

# Values that would reach a shell script, an env file, fstab or YAML as code (docs/stacks.md, "Config values that become code"), each refused
# at load with its field path. (id, config, field path named, message fragment)
INJECTION_CONFIGS = [
    (
        "nccl-env-key-shell-code",
        make_config(group(ncclEnv={"FI_X;gpucluster_canary;Y": "1"})),
        "gpucluster:nodeGroups[0].ncclEnv",
        "ncclEnv name 'FI_X;gpucluster_canary;Y' is not an environment variable name",
    ),
    (
        "nccl-env-key-starts-with-digit",
        make_config(group(ncclEnv={"1NCCL": "1"})),
        "gpucluster:nodeGroups[0].ncclEnv",
        "ncclEnv name '1NCCL' is not an environment variable name",
    ),
    (
        "nccl-env-value-newline",
        make_config(group(ncclEnv={"NCCL_DEBUG": "INFO\nA}; gpucluster_canary; : ${B=2"})),
        "gpucluster:nodeGroups[0].ncclEnv.NCCL_DEBUG",
        "contains a control character (U+000A at position 4)",
    ),
    (
        "nccl-env-key-line-separator",
        make_config(group(ncclEnv={"NCCL_\u2028X": "1"})),
        "gpucluster:nodeGroups[0].ncclEnv",
        "has a key with a control character (U+2028 at position 5)",
    ),
    (
        "tag-value-carriage-return",
        make_config(tags={"team": "ml\rplatform"}),
        "gpucluster:tags.team",
        "contains a control character (U+000D at position 2)",
    ),
    (
        "nul-in-a-nested-list",
        make_config(group(availabilityZones=["us-east-1a\x00"])),
        "gpucluster:nodeGroups[0].availabilityZones[0]",
        "contains a control character (U+0000 at position 10)",
    ),
    ("region-with-newline", make_config(region="us-east-1\n"), "aws:region", "contains a control character (U+000A"),
    (
        "label-key-with-space",
        make_config(group(labels={"work load": "training"})),
        "gpucluster:nodeGroups[0].labels",
        "label key 'work load' is not a Kubernetes label key",
    ),
    (
        "label-key-bad-prefix",
        make_config(group(labels={"Example.com/workload": "training"})),
        "gpucluster:nodeGroups[0].labels",
        "its prefix must be a DNS subdomain",
    ),
    (
        "label-value-too-long",
        make_config(group(labels={"workload": "t" * 64})),
        "gpucluster:nodeGroups[0].labels",
        "which is not a Kubernetes label value",
    ),
    (
        "label-value-shell",
        make_config(group(labels={"workload": "$(gpucluster_canary)"})),
        "gpucluster:nodeGroups[0].labels",
        "label 'workload' has value '$(gpucluster_canary)'",
    ),
]

# Names valid in grammar but code in place: ncclEnv reaches every job task and every non-root
# login shell, so loader, shell, interpreter and resolver variables are refused, and so are the fabric prefixes'
# search paths and program parameters. (id, name, message fragment)
REFUSED = "is refused: "
NOT_FABRIC = "is not a fabric variable"
DANGEROUS_NAMES = [
    ("loader-preload", "LD_PRELOAD", REFUSED + "it changes which code programs load or run"),
    ("loader-audit", "LD_AUDIT", REFUSED + "it changes which code programs load or run"),
    ("loader-library-path", "LD_LIBRARY_PATH", REFUSED + "it changes which code programs load or run"),
    ("shell-prompt-command", "PROMPT_COMMAND", REFUSED + "it changes how shells start"),
    ("shell-bash-env", "BASH_ENV", REFUSED + "it changes how shells start"),
    ("shell-env", "ENV", REFUSED + "it changes how shells start"),
    ("shell-ps1", "PS1", REFUSED + "it changes how shells start"),
    ("shell-ps4", "PS4", REFUSED + "it changes how shells start"),
    ("shell-shellopts", "SHELLOPTS", REFUSED + "it changes how shells start"),
    ("shell-ifs", "IFS", REFUSED + "it changes how shells start"),
    ("shell-path", "PATH", REFUSED + "it changes how shells start"),
    ("shell-function", "BASH_FUNC_ls", REFUSED + "it changes which code programs load or run"),
    ("python-startup", "PYTHONSTARTUP", REFUSED + "it changes which code programs load or run"),
    ("python-path", "PYTHONPATH", REFUSED + "it changes which code programs load or run"),
    ("perl-options", "PERL5OPT", REFUSED + "it changes which code programs load or run"),
    ("ruby-options", "RUBYOPT", REFUSED + "it changes which code programs load or run"),
    ("node-options", "NODE_OPTIONS", REFUSED + "it changes how shells start"),
    ("glibc-gconv", "GCONV_PATH", REFUSED + "it changes how shells start"),
    ("glibc-tunables", "GLIBC_TUNABLES", REFUSED + "it changes how shells start"),
    ("glibc-malloc", "MALLOC_CHECK_", REFUSED + "it changes which code programs load or run"),
    ("resolver-hostaliases", "HOSTALIASES", REFUSED + "it changes how shells start"),
    ("gpucluster-override", "GPUCLUSTER_NCCL_ENV", REFUSED + "it changes which code programs load or run"),
    ("slurm-variable", "SLURM_CONF", REFUSED + "it changes which code programs load or run"),
    ("fabric-provider-path", "FI_PROVIDER_PATH", REFUSED + "it is a search path for code"),
    ("cuda-injection", "CUDA_INJECTION64_PATH", REFUSED + "it is a search path for code"),
    ("ucx-module-dir", "UCX_MODULE_DIR", REFUSED + "it is a search path for code"),
    ("mpi-rsh-agent", "OMPI_MCA_plm_rsh_agent", REFUSED + "this Open MPI parameter names a program to run"),
    ("mpi-component-path", "OMPI_MCA_mca_base_component_path", REFUSED + "it is a search path for code"),
    ("nccl-conf-file", "NCCL_CONF_FILE", REFUSED + "it changes how shells start, prompt or resolve, or what a job runs on"),
    (
        "cuda-visible-devices",
        "CUDA_VISIBLE_DEVICES",
        REFUSED + "it changes how shells start, prompt or resolve, or what a job runs on",
    ),
    ("nvidia-visible-devices", "NVIDIA_VISIBLE_DEVICES", NOT_FABRIC),
    ("not-fabric", "MY_SETTING", NOT_FABRIC),
    ("lowercase-loader", "ld_preload", REFUSED + "it changes which code programs load or run"),
]
# Plugin libraries (any *_PLUGIN): a plugin name or a library in a system install tree, never a writable place.
PLUGIN_VALUES = [
    ("plugin-on-fsx", "/fsx/scratch/libnccl-net.so"),
    ("plugin-in-tmp", "/tmp/libnccl-tuner.so"),
    ("plugin-relative", "../lib/libnccl-tuner.so"),
    ("plugin-dotdot", "/opt/amazon/../../fsx/libnccl-tuner.so"),
    ("plugin-opt-elsewhere", "/opt/data/libnccl-tuner.so"),
]
FIX_TEXT = "Fix: set it in the job's own environment instead"
INJECTION_CONFIGS += [
    (f"nccl-env-{case}", make_config(group(ncclEnv={name: "/fsx/x"})), "gpucluster:nodeGroups[0].ncclEnv", f"{name!r} {text}")
    for case, name, text in DANGEROUS_NAMES
] + [
    (
        f"nccl-env-{case}",
        make_config(group(ncclEnv={"NCCL_TUNER_PLUGIN": value})),
        "gpucluster:nodeGroups[0].ncclEnv",
        f"ncclEnv NCCL_TUNER_PLUGIN = {value!r} is not a plugin name or a library under /opt/amazon/",
    )
    for case, value in PLUGIN_VALUES
]

ALL_BAD = BAD_CONFIGS + INJECTION_CONFIGS


@pytest.mark.parametrize(("config", "path", "fragment"), [c[1:] for c in ALL_BAD], ids=[c[0] for c in ALL_BAD])
def test_bad_config_fails_before_any_resource(config, path, fragment):
    assert_refused(config, path, fragment)


def test_there_are_at_least_twenty():
    assert len(BAD_CONFIGS) >= 20


@pytest.mark.parametrize(("config", "path"), [(c[1], c[2]) for c in INJECTION_CONFIGS], ids=[c[0] for c in INJECTION_CONFIGS])
def test_injection_errors_name_the_value_and_the_fix(config, path):
    plan = plan_config(config, "bad")
    finding = next(f for f in plan.findings if f["level"] == "error" and f["path"] == path)
    assert finding["fix"], "every injection error says how to fix the value"
    # The value is shown: as "(got ...)" when the finding carries it, else quoted in the message (the
    # table's fragment pins which value).
    assert repr(finding["value"]) in plan.error if finding["value"] is not None else "'" in finding["message"]


def test_one_error_lists_every_problem():
    config = make_config(
        group(instanceType="p5.48xl"), group(name="b", minSize=3, maxSize=1), group(name="c", associatePublicIpAddress=True)
    )
    plan = plan_config(config, "bad")
    paths = {f["path"] for f in plan.findings if f["level"] == "error"}
    assert {
        "gpucluster:nodeGroups[0].instanceType",
        "gpucluster:nodeGroups[1].minSize",
        "gpucluster:nodeGroups[2].associatePublicIpAddress",
    } <= paths
    assert "3 problems" in plan.error


def test_fabric_variables_aws_job_scripts_set_are_accepted():
    """What awsome-distributed-training's job scripts and images set for NCCL over EFA still plans."""
    env = {
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "FI_EFA_FORK_SAFE": "1",
        "FI_LOG_LEVEL": "warn",
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_TUNER_PLUGIN": "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-ofi-tuner.so",
        "NCCL_NET_PLUGIN": "ofi",
        "OFI_NCCL_GDR_FLUSH_DISABLE": "1",
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "GLOO_SOCKET_IFNAME": "en",
        "RDMAV_FORK_SAFE": "1",
        "OMPI_MCA_pml": "^ucx",
        "OMPI_MCA_btl": "tcp,self",
        "OMPI_MCA_btl_tcp_if_exclude": "lo,docker0",
        "NVSHMEM_LIBFABRIC_PROVIDER": "efa",
    }
    plan = plan_config(make_config(group(ncclEnv=env)), "fabric")
    assert plan.error is None, plan.error


def test_refused_names_say_how_to_fix_them():
    plan = plan_config(make_config(group(ncclEnv={"PROMPT_COMMAND": "touch /tmp/x"})), "bad")
    finding = next(f for f in plan.findings if f["path"] == "gpucluster:nodeGroups[0].ncclEnv")
    assert finding["fix"].startswith(FIX_TEXT.removeprefix("Fix: ")) and "NCCL_*" in finding["fix"], finding
