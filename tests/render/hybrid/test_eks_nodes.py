"""The files a site's GPU server installs to join EKS as a hybrid node: nodeadm's NodeConfig and install.sh.

The NodeConfig is checked, strictly, against the fields the EKS user guide documents for hybrid nodes
(``hybrid-nodes-nodeadm``: spec.cluster{name, region}, spec.hybrid.iamRolesAnywhere{nodeName, trustAnchorArn,
profileArn, roleArn, certificatePath, privateKeyPath} or spec.hybrid.ssm{activationCode, activationId},
spec.kubelet.flags); install.sh by ``bash -n`` and by running it with arguments it must refuse: it checks them
(and the certificate's common name) before anything else, so the refusals change nothing on the machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpucluster.render.hybrid.eks_nodes import (
    NODE_NAME_PLACEHOLDER,
    HybridNodeIdentity,
    node_config,
    render_hybrid_nodes_bundle,
)
from tests.conftest import GOLDEN, check_golden, require_tool
from tests.render.hybrid.eks_fixtures import ANCHOR, PROFILE, ROLE, hybrid_eks_spec, ssm_spec

GOLDEN_DIR = GOLDEN / "hybrid" / "eks"
IDENTITY = HybridNodeIdentity(ROLE, ANCHOR, PROFILE)

_STRING = {"type": "string", "minLength": 1}
NODE_CONFIG_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "spec"],
    "properties": {
        "apiVersion": {"const": "node.eks.aws/v1alpha1"},
        "kind": {"const": "NodeConfig"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["cluster", "hybrid"],
            "properties": {
                "cluster": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name", "region"],
                    "properties": {"name": _STRING, "region": _STRING},
                },
                "hybrid": {
                    "type": "object",
                    "additionalProperties": False,
                    "minProperties": 1,
                    "maxProperties": 1,
                    "properties": {
                        "iamRolesAnywhere": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["nodeName", "trustAnchorArn", "profileArn", "roleArn"],
                            "properties": {
                                k: _STRING
                                for k in (
                                    "nodeName",
                                    "trustAnchorArn",
                                    "profileArn",
                                    "roleArn",
                                    "certificatePath",
                                    "privateKeyPath",
                                )
                            },
                        },
                        "ssm": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["activationCode", "activationId"],
                            "properties": {"activationCode": _STRING, "activationId": _STRING},
                        },
                    },
                },
                "kubelet": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"flags": {"type": "array", "items": {"type": "string", "pattern": "^--[a-z-]+=.+$"}}},
                },
            },
        },
    },
}


def bundle(spec, identity=IDENTITY):
    return render_hybrid_nodes_bundle(
        spec.hybrid, cluster_name="hybrid-eks", region="us-east-1", kubernetes_version=spec.kubernetes.version, identity=identity
    )


@pytest.mark.parametrize("variant", ["rolesanywhere", "ssm"])
def test_bundle_is_schema_checked_and_golden(variant, update_golden):
    spec = hybrid_eks_spec() if variant == "rolesanywhere" else ssm_spec()
    files = bundle(spec, IDENTITY if variant == "rolesanywhere" else HybridNodeIdentity(ROLE))
    assert set(files) == {"nodeConfig.yaml", "install.sh"}
    config = yaml.safe_load(files["nodeConfig.yaml"])
    jsonschema.validate(config, NODE_CONFIG_SCHEMA)
    assert config["spec"]["cluster"] == {"name": "hybrid-eks", "region": "us-east-1"}
    (provider,) = config["spec"]["hybrid"]
    assert provider == ("iamRolesAnywhere" if variant == "rolesanywhere" else "ssm")
    for name, text in files.items():
        check_golden(GOLDEN_DIR / variant / name, text, update_golden)


def test_roles_anywhere_config_names_the_stacks_arns_and_the_site_labels():
    config = yaml.safe_load(bundle(hybrid_eks_spec())["nodeConfig.yaml"])
    ra = config["spec"]["hybrid"]["iamRolesAnywhere"]
    assert (ra["trustAnchorArn"], ra["profileArn"], ra["roleArn"]) == (ANCHOR, PROFILE, ROLE)
    assert (ra["certificatePath"], ra["privateKeyPath"]) == (
        "/etc/gpucluster/pki/slurmctld.crt",
        "/etc/gpucluster/pki/slurmctld.key",
    )
    flags = config["spec"]["kubelet"]["flags"]
    # The site's nodes carry the site label the on-prem Kueue flavor selects, never the cloud flavors' gpucluster/gpu.
    assert "--node-labels=gpucluster/site=onprem,gpucluster/node-group=onprem" in flags
    assert "--register-with-taints=nvidia.com/gpu=true:NoSchedule" in flags
    assert not any("gpucluster/gpu=" in f for f in flags)


def test_node_name_filled_in_by_install_stays_one_yaml_string():
    text = bundle(hybrid_eks_spec())["nodeConfig.yaml"]
    # What install.sh's sed does with a name it accepted; names like "true" or "1e3" stay strings.
    for name in ("gpu-01.hpc.example", "true", "1e3"):
        config = yaml.safe_load(text.replace(NODE_NAME_PLACEHOLDER, name))
        assert config["spec"]["hybrid"]["iamRolesAnywhere"]["nodeName"] == name


@pytest.mark.parametrize(
    ("os_name", "containerd"), [("ubuntu24", "distro"), ("ubuntu22", "distro"), ("rhel9", "docker"), ("al2023", "distro")]
)
def test_install_steps_per_os(os_name, containerd):
    spec = hybrid_eks_spec(kubernetes={"nodeOs": os_name})
    script = bundle(spec)["install.sh"]
    assert f"nodeadm install 1.33 --credential-provider iam-ra --containerd-source {containerd}\n" in script
    assert 'nodeadm init -c "file://$config"' in script
    ssm = bundle(ssm_spec(kubernetes={"nodeOs": os_name}), HybridNodeIdentity(ROLE))["install.sh"]
    assert f"nodeadm install 1.33 --credential-provider ssm --containerd-source {containerd}\n" in ssm


def test_install_script_parses():
    bash = require_tool("bash")
    for spec in (hybrid_eks_spec(), ssm_spec()):
        files = bundle(spec, IDENTITY if spec.hybrid.credentials.type == "rolesanywhere" else HybridNodeIdentity(ROLE))
        subprocess.run([bash, "-n"], input=files["install.sh"], text=True, check=True)


def _write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "install.sh").chmod(0o755)
    return tmp_path / "install.sh"


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_tool("bash"), str(script), *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("name", ["gpu01|rm -rf /", "GPU01", "a b", "$(id)", "gpu01'x", "-gpu", ""])
def test_install_refuses_a_hostile_node_name_before_touching_the_machine(tmp_path, name):
    script = _write(tmp_path, bundle(hybrid_eks_spec()))
    done = _run(script, name)
    assert done.returncode == 1 and "is not a DNS name" in done.stderr, done.stderr


def test_install_refuses_a_certificate_for_another_node(tmp_path):
    openssl = require_tool("openssl")
    cert, key = tmp_path / "node.crt", tmp_path / "node.key"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=gpu-node-02"]
    subprocess.run(
        [openssl, *request, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    spec = hybrid_eks_spec(credentials={"certificatePath": str(cert), "privateKeyPath": str(key)})
    script = _write(tmp_path, bundle(spec))
    done = _run(script, "gpu-node-01")
    assert done.returncode == 1 and "common name is 'gpu-node-02', not 'gpu-node-01'" in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["gpu-01", "gpu-node", "gpu-nodes-1", "other-gpu-node-1"])
def test_install_refuses_a_node_name_the_role_does_not_trust(tmp_path, name):
    """The hybrid node role trusts only certificates named <certificateCn>-<node> (the stack's gpu-node): a node
    named otherwise is refused before anything is installed, not by Roles Anywhere halfway through."""
    script = _write(tmp_path, bundle(hybrid_eks_spec()))
    done = _run(script, name)
    assert done.returncode == 1 and "does not start with 'gpu-node-'" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("activation_id", "code", "says"),
    [
        ("not-a-uuid", "A" * 20, "is not an SSM activation id"),
        ("0a1b2c3d-4e5f-6789-abcd-ef0123456789", "short", "activation code is not one SSM issues"),
        ("0a1b2c3d-4e5f-6789-abcd-ef0123456789", "A" * 19 + "|", "activation code is not one SSM issues"),
    ],
)
def test_install_refuses_a_malformed_activation(tmp_path, activation_id, code, says):
    script = _write(tmp_path, bundle(ssm_spec(), HybridNodeIdentity(ROLE)))
    done = _run(script, activation_id, code)
    assert done.returncode == 1 and says in done.stderr, done.stderr


def test_refuses_what_is_not_an_arn():
    spec = hybrid_eks_spec()
    with pytest.raises(ValueError, match="is not an ARN"):
        node_config(
            spec.hybrid, cluster_name="c", region="us-east-1", identity=HybridNodeIdentity("role'; rm -rf /", ANCHOR, PROFILE)
        )
    with pytest.raises(ValueError, match="trust anchor and profile"):
        node_config(spec.hybrid, cluster_name="c", region="us-east-1", identity=HybridNodeIdentity(ROLE))
