"""GPU node group section of the spec."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpucluster.config.base import SpecModel, check_env_names, check_labels, check_name
from gpucluster.config.compute.fabric_env import check_fabric_env
from gpucluster.config.images import ImageLockSpec

CapacityType = Literal["on-demand", "spot", "capacity-reservation", "capacity-block"]
RESERVATION_ID = r"^cr-[0-9a-f]{8,17}$"
RESOURCE_GROUP_ARN = r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]+$"


class CapacitySpec(SpecModel):
    """How a node group's instances are bought."""

    type: CapacityType = "on-demand"
    """``on-demand`` (default), ``spot``, ``capacity-reservation`` (an On-Demand Capacity Reservation,
    targeted) or ``capacity-block`` (EC2 Capacity Blocks for ML: a reserved window)."""

    reservation_id: str | None = Field(default=None, pattern=RESERVATION_ID)
    """The ``cr-…`` id to target. Required for ``capacity-block``; for ``capacity-reservation`` give
    this or ``resourceGroupArn``. Default: none."""

    resource_group_arn: str | None = Field(default=None, pattern=RESOURCE_GROUP_ARN)
    """Target every reservation in this resource group instead of one id (``capacity-reservation``
    only). Default: none."""

    instance_count: int | None = Field(default=None, ge=1)
    """How many instances the reservation or block holds. Optional; when given, the plan checks
    ``maxSize`` against it (``gpucluster preflight`` reads the real count from EC2)."""

    spot_max_price: float | None = Field(default=None, gt=0)
    """``spot`` only: the most to pay per instance-hour, USD. Default: none (cap at On-Demand)."""

    start_time: str | None = None
    """``capacity-block`` only, informative: the block's start (ISO 8601), shown in the plan."""

    end_time: str | None = None
    """``capacity-block`` only, informative: the block's end (ISO 8601), shown in the plan."""

    @model_validator(mode="after")
    def _fields_match_type(self) -> CapacitySpec:
        t = self.type
        if t == "capacity-block" and not self.reservation_id:
            raise ValueError("type capacity-block needs reservationId: the cr-… id of the Capacity Block you bought")
        if t == "capacity-block" and self.resource_group_arn:
            raise ValueError("a capacity-block is targeted by reservationId only; remove resourceGroupArn")
        if t == "capacity-reservation" and not (self.reservation_id or self.resource_group_arn):
            raise ValueError("type capacity-reservation needs reservationId (cr-…) or resourceGroupArn")
        if self.reservation_id and self.resource_group_arn:
            raise ValueError("give reservationId or resourceGroupArn, not both")
        if t in ("on-demand", "spot") and (self.reservation_id or self.resource_group_arn):
            raise ValueError(
                f"type {t} does not use a reservation; set type capacity-reservation or capacity-block, "
                "or remove reservationId/resourceGroupArn"
            )
        if self.spot_max_price is not None and t != "spot":
            raise ValueError("spotMaxPrice is only for type spot")
        return self

    @property
    def reserved(self) -> bool:
        return self.type in ("capacity-reservation", "capacity-block")


class NodeGroupSpec(SpecModel):
    """A group of identical accelerated instances. Any number per cluster, each its own type."""

    name: str
    """Short name, unique in the cluster (``p5``, ``train-a``); used in resource names, Slurm
    partition and node names and Kubernetes labels. Required."""

    instance_type: str
    """EC2 instance type, e.g. ``p5.48xlarge``; must be in the instance catalog. Required."""

    availability_zones: tuple[str, ...] = Field(min_length=1)
    """Availability Zones to launch in, e.g. ``[us-east-1a]``. Required. A group with EFA must use
    exactly one zone: EFA traffic does not cross zones."""

    subnet_ids: tuple[str, ...] = ()
    """With your own VPC: the subnets (from ``network.subnets``) to launch in. Default: every
    private subnet in the group's zones."""

    min_size: int = Field(default=0, ge=0)
    """Fewest instances. Default 0."""

    max_size: int = Field(ge=0)
    """Most instances. Required."""

    desired_size: int | None = Field(default=None, ge=0)
    """Instances to run now. Default: ``minSize``."""

    enable_efa_support: bool | None = None
    """Attach an EFA interface to every EFA-capable network card. Default: on when the instance type
    supports EFA."""

    efa_layout: Literal["current", "legacy"] = "current"
    """``current``: primary ENA interface on card 0 and ``efa-only`` interfaces (no IP address) on
    every EFA card — what AWS now recommends. ``legacy``: a full ``efa`` interface per card, as older
    terraform-aws-eks / pulumi-eks did. Default ``current``."""

    create_placement_group: bool | None = None
    """Create a cluster placement group for the group. Default: on for EFA groups bought on-demand or
    spot; off for capacity reservations (a reservation made outside the group cannot fill it) and
    capacity blocks (not allowed)."""

    placement_group_name: str | None = None
    """Launch into this existing placement group instead (e.g. the one a reservation was made in).
    Default: none."""

    capacity: CapacitySpec = CapacitySpec()
    """How instances are bought. Default: on-demand."""

    scheduler: Literal["slurm", "kubernetes", "none"] | None = None
    """Who runs this group's nodes: ``slurm`` (Slurm compute nodes), ``kubernetes`` (an EKS managed node
    group) or ``none`` (a plain Auto Scaling group). Default: the cluster's scheduler when it has
    exactly one (``gpucluster:slurm`` or ``gpucluster:kubernetes``), else ``none``."""

    associate_public_ip_address: bool = False
    """Give nodes public IPs. Default false: nodes live in private subnets. Not possible with
    several network cards."""

    image_id: str | None = Field(default=None, pattern=r"^ami-[0-9a-f]{8,17}$")
    """AMI to boot. Default: the latest AWS Deep Learning Base AMI for the accelerator (read from its
    public SSM parameter at deploy time)."""

    image_ssm_parameter: str | None = None
    """SSM parameter naming the AMI, used when ``imageId`` is not set. Default: chosen by accelerator
    (NVIDIA: Deep Learning Base OSS Nvidia Driver GPU AMI, Ubuntu 22.04; Neuron: Neuron DLAMI)."""

    image_lock: ImageLockSpec | None = None
    """The base image resolved once from the SSM parameter and recorded by ``gpucluster images lock``: used instead of
    re-reading the parameter at every deploy (which would change the image, and the driver, under running training).
    Default: none (the plan warns that the image is unpinned)."""

    root_volume_size_gib: int = Field(default=200, ge=30, le=16384)
    """Root EBS volume size. Default 200 GiB (container images for training are large)."""

    root_volume_iops: int = Field(default=3000, ge=3000, le=16000)
    """gp3 IOPS of the root volume. Default 3000 (the gp3 baseline)."""

    root_volume_throughput: int = Field(default=250, ge=125, le=1000)
    """gp3 throughput of the root volume, MB/s. Default 250."""

    kms_key_id: str | None = None
    """KMS key for the root volume: key ARN, key id, ``alias/<name>`` or alias ARN, in the cluster's
    region. Default: the account's ``aws/ebs`` key. The volume is always encrypted."""

    key_name: str | None = None
    """EC2 key pair for SSH. Default: none — reach nodes with SSM Session Manager."""

    labels: dict[str, str] = Field(default_factory=dict)
    """Labels for schedulers: Kubernetes node labels, Slurm node features. Default: none. Keys are
    Kubernetes label keys (``[prefix/]name``, e.g. ``example.com/workload``), values at most 63 letters,
    digits, ``-``, ``_`` or ``.`` (or empty), so EKS accepts them."""

    tags: dict[str, str] = Field(default_factory=dict)
    """Tags for this group's resources, on top of the cluster's. Default: none."""

    nccl_env: dict[str, str] = Field(default_factory=dict)
    """Extra or overriding NCCL / libfabric environment for jobs on these nodes (every job task, and login
    shells of users other than root). Default: none. Names are fabric variables (``NCCL_``, ``FI_``,
    ``OFI_NCCL_``, ``CUDA_``, ``TORCH_NCCL_``, ``TORCH_DISTRIBUTED_``, ``GLOO_SOCKET_``, ``NVSHMEM_``, ``UCX_``,
    ``RDMAV_``, ``MLX5_``, ``OMPI_MCA_``), never one that loads or runs code (``LD_*``, ``PATH`` and other search
    paths, ``PROMPT_COMMAND``, ``BASH_ENV``, ``PYTHON*`` …); a ``*_PLUGIN`` value is a plugin name or a library
    under ``/opt/amazon/``, ``/opt/aws-ofi-nccl/`` or the system library directories."""

    price_per_hour: float | None = Field(default=None, gt=0)
    """USD per instance-hour for the plan's cost estimate. Default: the catalog's list price."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "node group name")

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return check_labels(value)

    @field_validator("nccl_env")
    @classmethod
    def _nccl_env(cls, value: dict[str, str]) -> dict[str, str]:
        return check_fabric_env(check_env_names(value, "ncclEnv"), "ncclEnv")

    @field_validator("availability_zones")
    @classmethod
    def _zones(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"availabilityZones lists a zone twice: {list(value)}")
        return value
