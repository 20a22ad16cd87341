"""Default machine images, by accelerator, read from AWS's public SSM parameters at deploy time."""

from __future__ import annotations

from components.spec.catalog import InstanceFacts

# AWS Deep Learning Base OSS Nvidia Driver GPU AMI: NVIDIA driver, CUDA, EFA installer, aws-ofi-nccl,
# local NVMe prepared at /opt/dlami/nvme. SSM name pattern from the DLAMI guide, "Finding the ID of a DLAMI".
NVIDIA_DLAMI = "/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
# Neuron multi-framework DLAMI (Trainium / Inferentia): Neuron driver and runtime, EFA.
NEURON_DLAMI = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"
# Plain Ubuntu 22.04 for CPU-only groups.
UBUNTU = "/aws/service/canonical/ubuntu/server/22.04/stable/current/{deb_arch}/hvm/ebs-gp2/ami-id"

DEB_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def default_image_parameter(facts: InstanceFacts) -> str:
    arch = facts.architectures[0] if facts.architectures else "x86_64"
    kinds = {a.kind for a in facts.accelerators}
    if "gpu" in kinds:
        return NVIDIA_DLAMI.format(arch=arch)
    if "neuron" in kinds:
        return NEURON_DLAMI
    return UBUNTU.format(deb_arch=DEB_ARCH.get(arch, "amd64"))
