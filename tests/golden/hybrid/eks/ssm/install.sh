#!/bin/bash
# Join this ubuntu24 server of site onprem to EKS cluster hybrid-eks as an EKS Hybrid Node.
# Rendered by gpucluster; run as root next to nodeConfig.yaml:
#   ./install.sh ACTIVATION_ID ACTIVATION_CODE
# from an SSM hybrid activation for the hybrid node role (aws ssm create-activation --iam-role ROLE
# --registration-limit N): activations expire (24 hours by default), so make one when you install, not before.
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ -f "$here/nodeConfig.yaml" ]] || die "nodeConfig.yaml is not next to install.sh"

[[ $# -eq 2 ]] || die "usage: install.sh ACTIVATION_ID ACTIVATION_CODE"
activation_id=$1
activation_code=$2
[[ $activation_id =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]] || die "'$activation_id' is not an SSM activation id"
[[ $activation_code =~ ^[A-Za-z0-9+/=]{20,250}$ ]] || die "the activation code is not one SSM issues"
die "nodeadm is not pinned: set gpucluster:hybrid.kubernetes.nodeadm (version, and the sha256 of each architecture from the release's bin/linux/<arch>/nodeadm.sha256), then render install.sh again"

# Kubernetes 1.33 (the cluster's), containerd from distro.
nodeadm install 1.33 --credential-provider ssm --containerd-source distro

install -d -m 0700 /etc/gpucluster/eks
config=/etc/gpucluster/eks/nodeConfig.yaml
sed -e "s|@ACTIVATION_ID@|$activation_id|" -e "s|@ACTIVATION_CODE@|$activation_code|" "$here/nodeConfig.yaml" > "$config"
chmod 0600 "$config"
nodeadm init -c "file://$config"
echo "install.sh: joined hybrid-eks; the node is NotReady until the CNI runs on it"
