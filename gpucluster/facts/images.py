"""Default machine images, by accelerator, read from AWS's public SSM parameters at deploy time."""

from __future__ import annotations

from gpucluster.facts.catalog import InstanceFacts

# AWS Deep Learning Base OSS Nvidia Driver GPU AMI: NVIDIA driver, CUDA, EFA installer, aws-ofi-nccl,
# local NVMe prepared at /opt/dlami/nvme. SSM name pattern from the DLAMI guide, "Finding the ID of a DLAMI".
NVIDIA_DLAMI = "/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-ubuntu-{release}/latest/ami-id"
# Neuron multi-framework DLAMI (Trainium / Inferentia): Neuron driver and runtime, EFA.
NEURON_DLAMI = "/aws/service/neuron/dlami/multi-framework/ubuntu-{release}/latest/image_id"
# Plain Ubuntu for CPU-only groups (Canonical's parameters: 22.04 images are gp2-backed, 24.04 gp3).
UBUNTU = "/aws/service/canonical/ubuntu/server/{release}/stable/current/{deb_arch}/hvm/{volume}/ami-id"
UBUNTU_VOLUME = {"22.04": "ebs-gp2", "24.04": "ebs-gp3"}
DEFAULT_RELEASE = "22.04"

DEB_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def default_image_parameter(facts: InstanceFacts, release: str = DEFAULT_RELEASE) -> str:
    """The SSM parameter of the Ubuntu ``release`` image for ``facts``' accelerator (22.04 or 24.04;
    Slurm node groups use 24.04, the head node's release)."""
    arch = facts.architectures[0] if facts.architectures else "x86_64"
    kinds = {a.kind for a in facts.accelerators}
    if "gpu" in kinds:
        return NVIDIA_DLAMI.format(arch=arch, release=release)
    if "neuron" in kinds:
        return NEURON_DLAMI.format(release=release)
    return UBUNTU.format(release=release, deb_arch=DEB_ARCH.get(arch, "amd64"), volume=UBUNTU_VOLUME[release])
