#!/bin/bash
# Join this ubuntu24 server of site onprem to EKS cluster hybrid-eks as an EKS Hybrid Node.
# Rendered by gpucluster; run as root next to nodeConfig.yaml:
#   ./install.sh NODE_NAME
# NODE_NAME is this node's Kubernetes name, starts with gpu-node- and must equal the common name of its
# certificate (/etc/gpucluster/pki/slurmctld.crt), issued by the site's CA: the hybrid node role trusts only certificates
# named gpu-node-* and only that session name.
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ -f "$here/nodeConfig.yaml" ]] || die "nodeConfig.yaml is not next to install.sh"

[[ $# -eq 1 ]] || die "usage: install.sh NODE_NAME"
node_name=$1
# A Kubernetes node name (DNS label characters): nothing else reaches nodeConfig.yaml.
[[ $node_name =~ ^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$ ]] || die "node name '$node_name' is not a DNS name (lowercase letters, digits, . and -)"
prefix=gpu-node-
[[ $node_name == "$prefix"?* ]] || die "node name '$node_name' does not start with '$prefix': the hybrid node role trusts only certificates named $prefix*"
cert=/etc/gpucluster/pki/slurmctld.crt
[[ -r $cert ]] || die "no certificate at $cert"
cn=$(openssl x509 -noout -subject -nameopt multiline -in "$cert" | sed -n 's/^ *commonName *= *//p')
[[ $cn == "$node_name" ]] || die "the certificate's common name is '$cn', not '$node_name': Roles Anywhere would refuse the session"
die "nodeadm is not pinned: set gpucluster:hybrid.kubernetes.nodeadm (version, and the sha256 of each architecture from the release's bin/linux/<arch>/nodeadm.sha256), then render install.sh again"

# Kubernetes 1.33 (the cluster's), containerd from distro.
nodeadm install 1.33 --credential-provider iam-ra --containerd-source distro

install -d -m 0700 /etc/gpucluster/eks
config=/etc/gpucluster/eks/nodeConfig.yaml
sed "s|@NODE_NAME@|$node_name|" "$here/nodeConfig.yaml" > "$config"
chmod 0600 "$config"
nodeadm init -c "file://$config"
echo "install.sh: joined hybrid-eks; the node is NotReady until the CNI runs on it"
