"""User data decoding and the secret patterns: what counts as a secret, what does not, and that every
layer of encoding the components use is unwrapped before looking."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from gpucluster.policy.evaluate import from_plan
from gpucluster.policy.rules import no_secrets_in_user_data
from gpucluster.policy.userdata import decode, find_secrets
from tests.conftest import ROOT
from tests.tools.policy.fixtures import AWS_KEY_ID, FIXTURES, PEM, b64, cloud_config


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "a private key"),
        ("-----BEGIN EC PRIVATE KEY-----", "a private key"),
        (f"export AWS_ACCESS_KEY_ID={AWS_KEY_ID}", "an AWS access key id"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "an AWS secret access key"),
        ("git clone https://x:ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/o/r", "an API token"),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "an API token"),
        ("echo c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0 | base64 -d > /etc/munge/munge.key", "a munge key"),
        ("StoragePass=Sl8rmDbPassw0rd", "a secret assigned to StoragePass"),
        ("  password: hunter2hunter2", "a secret assigned to password"),
        ('DB_PASSWORD="correct horse"', None),  # a space inside: not one token, not flagged (documented limit)
        ("mysql --password s3cr3tvalue", "a secret assigned to password"),
        ('{"api_key": "0123456789abcdef"}', "a secret assigned to api_key"),
        ("client_secret=abcDEF123456", "a secret assigned to client_secret"),
        # not secrets
        ("token = urllib.request.Request(", None),
        ("secret_name: str  # the munge key's secret in Secrets Manager", None),
        ('"secret_name": "gpucluster/slurm-p5/munge-key"', None),
        ("password: ${DB_PASSWORD}", None),
        ('password: "{{ lookup }}"', None),
        ("key = read_key(sm, secret)", None),
        ("secret = cfg.secret_name", None),
        ("token = make_token", None),
        ("# the secret generated at first boot", None),
        ("password_file: /etc/slurm/dbd.pass", None),
        ("password: required", None),
        ("/usr/local/sbin/gpucluster-aws munge-key --create", None),
        ('headers = {"X-aws-ec2-metadata-token": r.read().decode()}', None),
        # a Secrets Manager ARN names a secret (the directory's bind password), it is none
        (
            "gpucluster-identity sssd-conf --secret-arn arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/ad-bind-AbCdEf --",
            None,
        ),
        (
            "bind=arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:x/y-AbCdEf password=hunter2hunter2",
            "a secret assigned to password",
        ),
    ],
)
def test_what_counts_as_a_secret(line: str, kind: str | None):
    found = find_secrets([("user data", f"#!/bin/bash\n{line}\n")])
    assert [f.kind for f in found] == ([kind] if kind else [])
    if kind:
        assert found[0].line == 2 and found[0].where == "user data"


def test_a_munge_key_file_written_from_user_data_is_a_secret():
    doc = cloud_config([{"path": "/etc/munge/munge.key", "encoding": "b64", "content": b64(b"0123456789abcdef" * 4)}])
    (finding,) = find_secrets(decode(doc, base64_encoded=False))
    assert finding.kind == "a munge key (a file written with it)" and finding.where == "user data, file /etc/munge/munge.key"
    assert "0123456789abcdef" not in finding.excerpt


def test_the_secret_itself_is_masked_in_the_message():
    (finding,) = find_secrets([("user data", "StoragePass=Sl8rmDbPassw0rd")])
    assert "Sl8rmDbPassw0rd" not in finding.describe() and "Sl8r…" in finding.describe()


def test_every_layer_is_unwrapped():
    inner = "StoragePass=Sl8rmDbPassw0rd\n"
    doc = cloud_config(
        [{"path": "/etc/slurm/slurmdbd.conf", "encoding": "gz+b64", "content": b64(gzip.compress(inner.encode()))}]
    )
    texts = decode(b64(gzip.compress(doc.encode())), base64_encoded=True)
    assert ("user data, file /etc/slurm/slurmdbd.conf", inner) in texts
    assert texts[0][0] == "user data" and texts[0][1].startswith("#cloud-config")
    # Plain text (an instance's userData) is read as it is; so is "base64" that does not decode.
    assert decode("#!/bin/bash\necho hi\n", base64_encoded=False) == [("user data", "#!/bin/bash\necho hi\n")]
    assert decode("not base64!", base64_encoded=True) == [("user data", "not base64!")]


def test_the_user_data_fixture_finds_each_hidden_secret_where_it_hides():
    doc, _ = FIXTURES["no-secrets-in-user-data"]
    by_name = {r.name: no_secrets_in_user_data(r) for r in from_plan(doc)}
    assert by_name["clean"] == []
    (head,) = by_name["head"]
    assert "a secret assigned to StoragePass in user data, file /etc/slurm/slurmdbd.conf, line 3" in head.message
    (eks,) = by_name["eks-node"]
    assert "an AWS access key id in user data, MIME part 2 (text/x-shellscript)" in eks.message
    login = sorted(v.message for v in by_name["login"])
    assert len(login) == 2
    assert "a private key in user data, file /root/.ssh/id_rsa, line 1" in login[1]
    assert "a munge key in user data, runcmd[0], line 1" in login[0]
    assert PEM.splitlines()[1] not in " ".join(login)


def test_shipped_user_data_decodes_to_every_file_it_writes():
    """The head node's user data (gzip + base64, cloud-config with encoded files) opens to the files the
    plan lists for it: the rule reads what the node will read."""
    doc = json.loads((ROOT / "tests" / "golden" / "plans" / "slurm-p5.json").read_text())
    head = next(r for r in doc["resources"] if r["name"] == "slurm-p5-slurm-head")
    texts = dict(decode(head["inputs"]["userDataBase64"], base64_encoded=True))
    files = {k.removeprefix("slurm-p5-slurm-head") for k in doc["files"] if k.startswith("slurm-p5-slurm-head/")}
    files.remove("/user-data")  # the plan's name for the user data itself
    assert {f"user data, file {path}" for path in files} <= set(texts)
    assert dict(texts)["user data"] == doc["files"]["slurm-p5-slurm-head/user-data"]
    assert base64.b64decode(head["inputs"]["userDataBase64"])[:2] == b"\x1f\x8b"


def test_the_head_nodes_files_bundle_is_read_as_its_user_data():
    """The Slurm head node's files ride in a JSON bundle in S3 (render/slurm/headfiles.py): the secret and mount rules
    open it to its files, as they open a user data's write_files; the shipped bundle holds no secret and mounts Lustre
    nosuid,nodev."""
    from gpucluster.policy.evaluate import evaluate
    from gpucluster.policy.model import Resource
    from gpucluster.policy.rules import lustre_mounts_nosuid_nodev
    from gpucluster.render.core import WriteFile, bundle_json

    files = (
        WriteFile("/etc/slurm/slurmdbd.conf", "AuthType=auth/munge\nStoragePass=Sl8rmDbPassw0rd\n", "0600"),
        WriteFile("/usr/local/sbin/gpucluster-mount-lustre", "#!/bin/sh\nmount -t lustre -o noatime fs@tcp:/x /fsx\n", "0755"),
    )
    obj = Resource("aws:s3/bucketObjectv2:BucketObjectv2", "s-slurm-head-files", "urn:x", {"content": bundle_json(files)})
    (secret,) = no_secrets_in_user_data(obj)
    assert "a secret assigned to StoragePass in files bundle, file /etc/slurm/slurmdbd.conf, line 2" in secret.message
    (mount,) = lustre_mounts_nosuid_nodev(obj)
    assert (
        "mounts Lustre at /fsx without nosuid,nodev (files bundle, file /usr/local/sbin/gpucluster-mount-lustre" in mount.message
    )
    doc = json.loads((ROOT / "tests" / "golden" / "plans" / "slurm-p5.json").read_text())
    (shipped,) = [r for r in from_plan(doc) if r.name == "slurm-p5-slurm-head-files"]
    opened = dict(decode(shipped.props["content"], base64_encoded=False, where="bundle"))
    assert "ClusterName=slurm-p5" in opened["bundle, file /etc/slurm/slurm.conf"]
    assert "nosuid" in opened["bundle, file /usr/local/sbin/gpucluster-mount-lustre"]  # read, and passes
    assert evaluate([shipped]) == []
