"""The plan for humans: the cluster summary first, a tree that fits on a screen and
still names every resource, stack outputs, rendered files on demand, the mocks' ids shown as what they
stand for, and colour only on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest
import yaml

from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.run.json import dumps, to_json
from gpucluster.tools.plan.run.stackfile import SECRET, stack_names
from gpucluster.tools.plan.show.colour import use_colour
from gpucluster.tools.plan.show.outputs import output_lines
from gpucluster.tools.plan.show.report import SCREENS, render_text
from gpucluster.tools.plan.show.summary import HOURS_PER_MONTH, markdown, rows, summarize, text_lines
from gpucluster.tools.plan.show.width import DEFAULT_WIDTH
from tests.conftest import GOLDEN, ROOT, check_golden
from tests.plans import shipped_plan


@pytest.fixture(scope="module")
def plans():
    return {stack: shipped_plan(stack) for stack in stack_names()}


def _stack_groups(stack: str) -> dict[str, dict]:
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return {g["name"]: g for g in doc["config"]["gpucluster:nodeGroups"]}


# --- the summary ------------------------------------------------------------------------------------------


def test_slurm_summary_counts_nodes_gpus_efa_zones_and_partitions(plans, catalog):
    s = summarize(to_json(plans["slurm-p5"]))
    config = _stack_groups("slurm-p5")
    assert s.scheduler == "Slurm" and s.region == "us-east-1"
    by_name = {g.name: g for g in s.groups}
    assert set(by_name) == set(config)
    for name, g in by_name.items():
        facts = catalog[config[name]["instanceType"]]
        assert (g.instance_type, g.max) == (config[name]["instanceType"], config[name]["maxSize"])
        assert g.gpus_per_node == facts.gpu_count and g.gpu_model == facts.gpus[0].model
        assert g.zones == tuple(config[name]["availabilityZones"])
        assert g.efa_per_node == (facts.max_efa_interfaces if name == "p5" else 0)
    assert by_name["p5"].role == "partition p5 (dynamic, default)" and by_name["dev"].role == "partition dev (static)"
    assert s.gpus_at_max == 16 * 8 + 2 * 1 and s.gpus_now == 2  # the dynamic partition starts empty
    lines = text_lines(s)
    assert lines[0] == "  scheduler  Slurm"
    assert any("p5: 0 × p5.48xlarge now, max 16 · 8 × H100 per node · 32 EFA · us-east-1a" in line for line in lines)
    assert any("FSx for Lustre /fsx · 4,800 GiB · PERSISTENT_2 · 250 MB/s/TiB (1,200 MB/s)" in line for line in lines)


def test_eks_summary_names_node_groups_and_teams(plans):
    s = summarize(to_json(plans["eks-p5"]))
    assert s.scheduler == "Kubernetes 1.33 on EKS"
    (p5,) = s.groups
    assert (p5.desired, p5.max, p5.efa_per_node, p5.role) == (8, 8, 32, "EKS node group eks-p5-p5")
    assert ("system", "system: 2 × m7i.xlarge (max 4)") in s.extra
    assert ("teams", "applied, research (a namespace and a Kueue queue each)") in s.extra


def test_summary_reads_a_saved_plan_the_same_way(plans, tmp_path):
    """From the JSON a CI job saved, not only from the live plan."""
    saved = tmp_path / "p5.json"
    saved.write_text(dumps(plans["p5-training"]))
    assert summarize(json.loads(saved.read_text())) == summarize(to_json(plans["p5-training"]))


def test_monthly_cost_from_the_estimate_or_730_hours(plans):
    doc = json.loads(dumps(plans["dev"]))  # a copy: to_json shares the plan's own outputs
    # an estimate without monthly figures (a plan from before they existed): 730 × $/h
    est = {k: v for k, v in doc["outputs"]["estimate"].items() if k not in ("usdPerMonth", "usdPerMonthAtMax")}
    doc["outputs"]["estimate"] = est
    s = summarize(doc)
    assert s.usd_per_month == pytest.approx(est["usdPerHour"] * HOURS_PER_MONTH)
    assert s.usd_per_month_at_max == pytest.approx(est["usdPerHourAtMax"] * HOURS_PER_MONTH)
    doc["outputs"]["estimate"] = {**est, "usdPerMonth": 1234.5, "usdPerMonthAtMax": 2345.5}
    with_monthly = summarize(doc)
    assert (with_monthly.usd_per_month, with_monthly.usd_per_month_at_max) == (1234.5, 2345.5)
    assert "≈ $1,234 and $2,346 a month (730 h)" in "\n".join(text_lines(with_monthly))


def test_summary_markdown_is_a_table_with_every_row(plans):
    s = summarize(to_json(plans["slurm-p5"]))
    md = markdown(s)
    assert md.startswith("**Cluster `slurm-p5`**\n\n| | |\n|---|---|\n")
    rows = [line for line in md.splitlines() if line.startswith("| ") and line != "| | |"]
    assert len(rows) == len(text_lines(s))
    assert "| scheduler | Slurm |" in rows and all(line.count(" | ") == 1 for line in rows)


def test_summary_of_an_invalid_config_says_so():
    s = summarize({"stack": "bad", "region": "us-east-1", "error": "gpucluster:nodeGroups is required", "resources": []})
    assert "invalid" in "\n".join(text_lines(s))


# --- the text plan --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", stack_names())
def test_default_plan_fits_two_screens_and_starts_with_the_summary(stack, plans, update_golden):
    text = render_text(plans[stack], width=DEFAULT_WIDTH)  # as piped, logged or saved
    lines = text.splitlines()
    assert len(lines) <= SCREENS, f"{stack}: {len(lines)} lines"
    assert lines[0].startswith(f"gpucluster plan — stack {stack} ")
    assert lines[1].startswith("  scheduler ") and lines[2].lstrip().startswith(("controller", "nodes"))
    order = ["  scheduler ", "Resources: ", "Findings", "Outputs", "Rendered files"]
    positions = [next(n for n, line in enumerate(lines) if line.startswith(head)) for head in order]
    assert positions == sorted(positions)
    check_golden(GOLDEN / "plans" / f"{stack}.txt", text, update_golden)


def _expand(text: str) -> set[str]:
    """Every name the compact tree mentions: ``a-{x,y}`` stands for ``a-x`` and ``a-y``."""
    names = set(re.findall(r"[\w./:-]+", text))
    for prefix, inner in re.findall(r"([\w-]*)\{([^{}]*)\}", text):
        names |= {prefix + part for part in inner.split(",")}
    return names


@pytest.mark.parametrize("stack", stack_names())
def test_compact_tree_still_names_every_resource_and_its_protection(stack, plans):
    plan = plans[stack]
    text = render_text(plan, files="none", full_tree=False)
    names = _expand(text)
    missing = [r.name for r in plan.resources if r.name not in names]
    assert not missing
    for r in plan.resources:
        if r.protect:
            line = next(line for line in text.splitlines() if r.name in _expand(line) and "[protected" in line)
            assert "retained on delete" in line or not r.retain_on_delete
    full = render_text(plan, files="none", full_tree=True)
    assert all(f"  {r.name}" in full or f" {r.name}" in full for r in plan.resources)
    assert len(full.splitlines()) > len(text.splitlines())


def test_small_plans_keep_the_full_tree_and_large_ones_fold(plans):
    assert render_text(plans["dev"]) == render_text(plans["dev"], full_tree=True)
    assert "│  ├─ aws:ec2:Subnet  dev-network-private-us-east-1a" not in render_text(plans["dev"])  # a root child
    assert "   ├─ aws:ec2:Subnet  dev-network-private-us-east-1a" in render_text(plans["dev"])
    slurm = render_text(plans["slurm-p5"])
    assert slurm == render_text(plans["slurm-p5"], full_tree=False) != render_text(plans["slurm-p5"], full_tree=True)
    assert "aws:ec2:Subnet ×2  slurm-p5-network-{private-us-east-1a,public-us-east-1a}" in slurm


def test_files_in_full_only_with_files_and_not_at_all_with_no_files(plans):
    plan = plans["slurm-p5"]
    conf_path = "slurm-p5-slurm-head-files/etc/slurm/slurm.conf"
    conf = plan.files[conf_path]
    listed = render_text(plan)
    assert conf.rstrip("\n") not in listed
    (user_data,) = [line for line in listed.splitlines() if line.startswith("  slurm-p5-slurm-head/user-data ")]
    size = len(plan.files["slurm-p5-slurm-head/user-data"].encode())
    written = sum(1 for p in plan.files if p.startswith("slurm-p5-slurm-head/") and not p.endswith("/user-data"))
    assert f"{size:,} B" in user_data and "cloud-init" in user_data and f"writes {written} files" in user_data
    full = render_text(plan, files="full")
    assert f"--- {conf_path}\n{conf.rstrip()}" in full
    none = render_text(plan, files="none")
    assert "Rendered files" not in none and "user-data" not in none.split("Outputs")[-1]


def test_stack_outputs_shown_with_secrets_masked():
    # A plan whose program exported these (secrets arrive masked from the engine, see engine._plain). Built
    # directly: a program with no resources run under the mocks sometimes hands back its outputs empty (a
    # timing of the in-process runtime, noted for a fix of its own).
    plan = Plan(
        project="gpucluster",
        stack="outs",
        region="us-east-1",
        outputs={"endpoint": "https://example.internal", "token": SECRET, "nested": {"a": {"b": 1}, "list": [{"x": "y"}]}},
    )
    text = render_text(plan)
    assert "s3cr3t-value" not in text
    lines = text.splitlines()
    start = lines.index("Outputs (what `pulumi stack output` will show)")
    assert [line.split() for line in lines[start + 1 : start + 5]] == [
        ["endpoint", "https://example.internal"],
        ["nested.a", "b=1"],
        ["nested.list[0]", "x=y"],
        ["token", "[secret]"],
    ]
    assert output_lines({"findings": [], "estimate": {}}) == ["Outputs: none"]
    assert output_lines({"k": SECRET}) == ["Outputs (what `pulumi stack output` will show)", "  k [secret]"]


def test_mock_values_shown_as_what_they_stand_for_and_the_json_stays_exact(plans):
    plan = plans["p5-training"]
    text = render_text(plan)
    lt = plan.by_name("p5-training-p5-lt")
    bucket = plan.by_name("p5-training-data-bucket")
    vpc = plan.by_name("p5-training-network-vpc")
    assert lt.inputs["imageId"] not in text and bucket.id not in text and str(vpc.id) not in text
    assert "image (AMI from SSM /aws/service/deeplearning/ami/x86_64/" in text
    assert "p5-training-data-… (name set by AWS at create)" in text
    assert "vpcId         (id of p5-training-network-vpc, assigned at create)" in text
    doc = to_json(plan)  # the JSON keeps the mocks' values: diffs and goldens compare them
    assert any(r["inputs"].get("imageId") == lt.inputs["imageId"] for r in doc["resources"])
    assert doc["outputs"]["dataBucket"] == bucket.id and doc["outputs"]["vpcId"] == vpc.id


# --- the CLI and colour -----------------------------------------------------------------------------------


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")}
    return {**env, "TERM": "xterm-256color", **extra}


def _on_a_terminal(*args: str, env: dict[str, str]) -> str:
    """Run the CLI with stdout on a pseudo-terminal and return what it wrote there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucluster.tools.cli", *args], cwd=ROOT, stdout=follower, stderr=subprocess.PIPE, env=env
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closes when the process exits
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode()


ESC = "\x1b["


@pytest.mark.slow  # CLI processes, on a pseudo-terminal and piped, each planning a stack
def test_colour_on_a_terminal_only(tmp_path):
    coloured = _on_a_terminal("plan", "--stack", "dev", env=_cli_env())
    assert ESC in coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", coloured).replace("\r\n", "\n")
    piped = subprocess.run(
        [sys.executable, "-m", "gpucluster.tools.cli", "plan", "--stack", "dev"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_cli_env(),
        timeout=120,
    )
    assert piped.returncode == 0 and ESC not in piped.stdout
    assert plain == piped.stdout  # colour adds escapes, never text
    for env in (_cli_env(NO_COLOR="1"), _cli_env(CI="true")):
        assert ESC not in _on_a_terminal("plan", "--stack", "dev", env=env)


def test_use_colour_rules():
    class Tty:
        def isatty(self) -> bool:
            return True

    class Redirected:
        def isatty(self) -> bool:
            return False

    assert use_colour(Tty(), {})  # type: ignore[arg-type]
    assert not use_colour(Tty(), {"NO_COLOR": "1"})  # type: ignore[arg-type]
    assert not use_colour(Tty(), {"CI": "true"})  # type: ignore[arg-type]
    assert not use_colour(Redirected(), {})  # type: ignore[arg-type]
    assert use_colour(Tty(), {"NO_COLOR": ""})  # type: ignore[arg-type]  # no-color.org: only a non-empty value


@pytest.mark.slow  # a CLI process per option, each planning a stack
def test_cli_default_lists_files_and_no_files_is_an_alias_for_none(plans):
    def run(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "gpucluster.tools.cli", "plan", "--stack", "slurm-p5", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    default, no_files = run(), run("--no-files")
    assert len(default.splitlines()) <= SCREENS and default.splitlines()[1].startswith("  scheduler  Slurm")
    assert f"Rendered files: {len(plans['slurm-p5'].files)}" in default and "Rendered files" not in no_files
    assert no_files == default.split("Rendered files")[0].rstrip("\n") + "\n"
    files = run("--files")
    assert "--- slurm-p5-slurm-head-files/etc/slurm/slurm.conf\n" in files


def test_golden_text_plans_exist_for_every_stack():
    assert {p.stem for p in (GOLDEN / "plans").glob("*.txt")} == set(stack_names())


# --- the cost headline ----------------------------------------------------------------------------------

HEADLINE = re.compile(
    r"\$[\d,]+\.\d\d/h now, \$[\d,]+\.\d\d/h at max size · "
    r"≈ \$[\d,]+ and \$[\d,]+ a month \(730 h\) · [\d.,]+ kW and [\d.,]+ kW"
)


@pytest.mark.parametrize("stack", stack_names())
def test_day1_every_shipped_stack_headline_is_dollars_per_hour_and_per_month(stack, plans):
    s = summarize(to_json(plans[stack]))
    cost = dict(rows(s))["cost"]
    assert HEADLINE.fullmatch(cost), cost
    assert s.unpriced == ()
    total = next(line for line in render_text(plans[stack]).splitlines() if line.startswith("  total: "))
    assert "unknown/h" not in total and "unpriced" not in total and total.startswith("  total: $")


def test_day1_the_slurm_directory_estimate_prices_each_service_and_states_its_usage(plans):
    text = render_text(plans["slurm-directory"])
    for words in (
        "SSH load balancer (internal); ~1 NLCU an hour",
        "FSx for OpenZFS /home 128 GiB, 64 MB/s; IOPS included (3 per GB); backups ~128 GB (kept 7 days)",
        "Secrets Manager 2 secret(s); ~10,000 reads a month each",
        "Image builds: 2 image(s) × 1 a month × ~1 h on m7i.xlarge",
        "Monitoring: AMP 96 M samples a month at 30s (6,403 M at max), each read ~3×; logs ~6.0 GB a month "
        "(15.6 GB at max), kept 180 days",  # 2 login nodes × 0.9 GB (LogGbLoginMonth) in it
    ):
        assert words in text, words
    monitoring = next(line for line in text.splitlines() if line.startswith("  Monitoring: "))
    assert re.search(r"/month; at max \$[\d.]+/h, \$[\d,.]+/month \[\d+\]$", monitoring), monitoring


def test_day1_an_unpriced_line_is_counted_beside_the_dollar_headline(plans):
    doc = json.loads(dumps(plans["slurm-p5"]))
    doc["outputs"]["estimate"]["unpriced"] = ["FSx for OpenZFS /home 128 GiB, 160 MB/s"]
    cost = dict(rows(summarize(doc)))["cost"]
    assert HEADLINE.match(cost)
    assert cost.endswith(" · plus 1 unpriced line (FSx for OpenZFS /home 128 GiB, 160 MB/s; see Estimate)")
