"""The agent on a site's own controller (``gpucluster_agents.contract.site``): its session comes from the bundle's AWS
profile only (a ``credential_process``, never a key from the environment), and the site's own nodes go to the
site's previous Resume/Suspend programs, unchanged, while the agent acts on the cloud nodes only."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from boto3.session import Session

from gpucluster_agents import cli, contract
from gpucluster_agents.contract.jsonread import Reader
from gpucluster_agents.contract.site import Site, parse_site, session_kwargs, split_site_nodes

HELPER_KEY = "ASIAFROMHELPER000001"


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def fake_signing_helper(tmp: Path) -> tuple[str, Path]:
    """A stand-in for aws_signing_helper: prints a session as credential_process JSON and logs each call."""
    calls = tmp / "helper-calls"
    creds = {
        "Version": 1,
        "AccessKeyId": HELPER_KEY,
        "SecretAccessKey": "helper-secret",
        "SessionToken": "helper-token",
        "Expiration": "2099-01-01T00:00:00Z",
    }
    body = f"echo \"$@\" >> {calls}\necho '{json.dumps(creds)}'\n"
    return script(tmp / "aws_signing_helper", body), calls


def is_cloud(node: str) -> bool:
    return node.startswith("p5-")


def test_site_programs_get_the_original_hostlist_when_it_names_no_cloud_node():
    assert split_site_nodes("onprem-[1-3]", is_cloud) == ([], "onprem-[1-3]")
    assert split_site_nodes("onprem-[1-2],p5-[1-2]", is_cloud) == (["p5-1", "p5-2"], "onprem-[1-2]")
    assert split_site_nodes("p5-[3-4]", is_cloud) == (["p5-3", "p5-4"], "")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"aws_profile": "gpucluster-x"}, "aws_profile and aws_config_file go together"),
        ({"resume_program": "relative/resume"}, "site.resume_program"),
        ({"suspend_program": "/bin/x; rm -rf /"}, "site.suspend_program"),
        ({"aws_profile": "x y", "aws_config_file": "/etc/aws"}, "site.aws_profile"),
        ({"typo": 1}, "site.typo"),
    ],
)
def test_site_section_is_checked_with_key_paths(raw: dict, message: str):
    errors: list[str] = []
    parse_site(Reader(errors), raw, "site")
    assert any(message in e for e in errors), errors


def test_session_uses_the_profile_credential_process_and_ignores_keys_in_the_environment(tmp_path: Path, monkeypatch):
    helper, calls = fake_signing_helper(tmp_path)
    config = tmp_path / "aws-config"
    config.write_text(f"[profile site]\nregion = us-east-1\ncredential_process = {helper} credential-process --role-arn r\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASTATICKEYINENV01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "static")
    session = Session(region_name="us-east-1", **session_kwargs(Site("site", str(config))))
    creds = session.get_credentials()
    assert creds is not None and creds.get_frozen_credentials().access_key == HELPER_KEY
    assert calls.read_text().split() == ["credential-process", "--role-arn", "r"]


def agent_config(tmp: Path, site: dict) -> Path:
    cfg = {
        "cluster_name": "hybrid-slurm",
        "region": "us-east-1",
        "endpoint_url": "http://127.0.0.1:9",  # nothing listens: any EC2 call fails at once
        "api_max_attempts": 1,
        "log_file": str(tmp / "agent.log"),
        "state_dir": str(tmp / "state"),
        "slurm_bin_dir": str(tmp / "bin"),
        "topology_conf": None,
        "node_groups": [
            {
                "name": "p5",
                "max_nodes": 4,
                "instance_type": "p5.48xlarge",
                "launch_template_id": "lt-0123456789abcdef0",
                "launch_template_version": "$Default",
                "subnet_ids": ["subnet-0123456789abcdef0"],
            }
        ],
        "site": site,
    }
    contract.parse(cfg)
    path = tmp / "agent.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture
def site_env(tmp_path: Path) -> dict:
    (tmp_path / "bin").mkdir()
    scontrol_log = tmp_path / "scontrol-calls"
    script(tmp_path / "bin" / "scontrol", f'echo "$@" >> {scontrol_log}\n')
    progs = {}
    for name in ("resume", "suspend"):
        progs[name] = script(tmp_path / f"site-{name}", f'echo "$#:$1" >> {tmp_path / f"site-{name}.calls"}\n')
    path = agent_config(tmp_path, {"resume_program": progs["resume"], "suspend_program": progs["suspend"]})
    return {"dir": tmp_path, "config": str(path), "scontrol": scontrol_log}


@pytest.mark.parametrize("command", ["resume", "suspend"])
def test_only_site_nodes_never_start_the_agent(site_env: dict, command: str):
    d = site_env["dir"]
    assert cli.main(["--config", site_env["config"], command, "onprem-[1-3],gpu07"]) == 0
    assert (d / f"site-{command}.calls").read_text() == "1:onprem-[1-3],gpu07\n"
    assert "start " not in (d / "agent.log").read_text()  # no lock, no EC2, no scontrol
    assert not site_env["scontrol"].exists()


def test_a_mixed_hostlist_is_split(site_env: dict):
    d = site_env["dir"]
    assert cli.main(["--config", site_env["config"], "resume", "onprem-2,p5-[1-2],onprem-1"]) == 0
    assert (d / "site-resume.calls").read_text() == "1:onprem-[1-2]\n"
    log = (d / "agent.log").read_text()
    assert "start resume hostlist='p5-[1-2]'" in log  # the agent acts on the cloud nodes only
    assert "onprem" not in site_env["scontrol"].read_text()  # the agent never touches a site node


def test_a_failing_site_program_is_logged_and_the_cloud_nodes_still_handled(site_env: dict):
    d = site_env["dir"]
    script(d / "site-suspend", "exit 3\n")
    assert cli.main(["--config", site_env["config"], "suspend", "onprem-1,p5-1"]) == 0
    log = (d / "agent.log").read_text()
    assert "exited 3" in log and "start suspend hostlist='p5-1'" in log


def test_without_site_programs_the_hostlist_is_the_agents(tmp_path: Path):
    (tmp_path / "bin").mkdir()
    script(tmp_path / "bin" / "scontrol", "exit 0\n")
    path = agent_config(tmp_path, {})
    assert cli.main(["--config", str(path), "suspend", "p5-1"]) == 0
    assert "start suspend hostlist='p5-1'" in (tmp_path / "agent.log").read_text()


# ---------------------------------------------------------------------------- side by side


def timed_site(site_env: dict, seconds: float) -> Path:
    """The site's programs take ``seconds``; they and scontrol write when they start and end."""
    d = site_env["dir"]
    times = d / "times"
    for name in ("resume", "suspend"):
        script(
            d / f"site-{name}",
            f"echo site-start $(date +%s.%N) >> {times}\nsleep {seconds}\necho site-end $(date +%s.%N) >> {times}\n",
        )
    script(d / "bin" / "scontrol", f"echo scontrol $(date +%s.%N) >> {times}\n")
    return times


@pytest.mark.slow  # waits on a site program that sleeps 4 s, twice
@pytest.mark.parametrize("command", ["resume", "suspend"])
def test_n18_the_site_program_runs_beside_the_cloud_work(site_env: dict, command: str):
    times = timed_site(site_env, 4)
    assert cli.main(["--config", site_env["config"], command, "onprem-1,p5-1"]) == 0
    events = [(line.split()[0], float(line.split()[1])) for line in times.read_text().splitlines()]
    site_end = next(t for what, t in events if what == "site-end")  # main returned after the site program
    cloud_start = min(t for what, t in events if what == "scontrol")
    assert cloud_start < site_end, events  # the cloud work did not wait for the site's program
    log = (site_env["dir"] / "agent.log").read_text()
    assert "site program" in log and "exited 0" in log


def test_n18_a_site_program_past_its_timeout_is_stopped(site_env: dict, monkeypatch):
    from gpucluster_agents.contract import site

    monkeypatch.setattr(site, "SITE_PROGRAM_TIMEOUT", 1.0)
    d = site_env["dir"]
    script(d / "site-resume", f"echo $$ > {d / 'site.pid'}\nexec sleep 60\n")
    assert cli.main(["--config", site_env["config"], "resume", "onprem-1,p5-1"]) == 0
    pid = int((d / "site.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "timed out" in (d / "agent.log").read_text()
