"""The parts of the health program one at a time: XID lines and classes, EFA devices in sysfs and
through fi_info, /proc/mounts, the config schema, and the fake NVML against the real binding."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from gpucluster_agents.contract import health as hc
from gpucluster_agents.health import host_checks, xid
from gpucluster_agents.health.fake_nvml import FakeNvml
from gpucluster_agents.health.verdict import Check, reason
from tests.agents.health.fakes import (
    BASE_RECORDS,
    FORGED_FILE,
    FORGED_RECORDS,
    XID_MESSAGES,
    dmesg_text,
    journal_entry,
    journal_log,
    kernel_log,
    kmsg_record,
    make_sysfs,
    p5_config,
    scenario,
    segfault_message,
)

# --- XID -------------------------------------------------------------------------------------------------------
# The evidence rule (gpucluster_agents/health/xid.py): kernel records only, the driver's exact form from the
# message's first character, and only on this node's GPUs. The fixtures (tests/agents/health/fakes.py) carry the
# forgeries any user can make, in every format: the crafted program's segfault report, the same with a newline in
# its file name, and a userspace record written to /dev/kmsg.

P5_GPUS = frozenset(f"0000:{0x53 + 0x11 * i:02x}:00" for i in range(8))  # scenario()'s NVML bus IDs


def xids(text: str) -> list[tuple[int, str, str]]:
    events, _ = xid.parse(xid.records(text))
    return [(e.xid, e.pci, e.cls) for e in events]


def test_every_real_xid_record_parses_with_its_gpu_and_class():
    events, refused = xid.parse(xid.kmsg_records(kernel_log(*XID_MESSAGES)))
    assert [(e.xid, e.cls) for e in events] == [
        (13, "ignore"), (31, "ignore"), (48, "reboot"), (63, "reboot"), (64, "reboot"),
        (79, "replace"), (94, "reboot"), (95, "reboot"), (119, "replace"),
    ]  # fmt: skip
    assert events[5].pci == "0000:a8:00" and events[5].text.startswith("pid='<unknown>'")
    assert refused == FORGED_RECORDS  # the base log's three forgeries, each seen and refused


def test_the_crafted_segfault_report_is_a_kernel_record_that_starts_like_an_xid_and_is_refused():
    """The kernel writes the report (facility kern) and it starts with the program's name, cut to 15
    characters: exactly "NVRM: Xid (PCI:". Anchoring alone would take it; the driver's full form does not."""
    message = segfault_message(FORGED_FILE)
    assert message.startswith("NVRM: Xid (PCI:[4711]: segfault at 0 ")
    assert f" in {FORGED_FILE}[" in message  # the whole file name, the text the old parser matched
    record = xid.Record(kernel=True, message=message)
    assert xid.xid_of(record) is None
    assert xid.parse([record]) == ([], 1)


@pytest.mark.parametrize(
    "text",
    [
        kernel_log(),  # /dev/kmsg records
        journal_log(),  # journalctl -k -o json, journald 240+
        journal_log(old_journald=True),  # journalctl -k -o json, older journald (no SYSLOG_FACILITY on kernel records)
    ],
    ids=["kmsg", "journal", "journal-old"],
)
def test_no_forgery_gives_an_xid_in_any_format(text: str):
    assert xids(text) == []
    assert xid.parse(xid.records(text))[1] >= FORGED_RECORDS


def test_dmesg_text_is_not_read_at_all():
    """Plain dmesg prints no facility and puts the newline of a crafted file name at the start of a line
    (measured: util-linux 2.38 on kernel 6.18): its lines are not records, so none is read."""
    text = dmesg_text(79)
    assert "\n               NVRM: Xid (PCI:0000:53:00): 79, pwned[" in text
    assert xid.records(text) == []


def test_genuine_records_in_every_format_are_read():
    assert xids(kernel_log(79, 48)) == [(79, "0000:a8:00", "replace"), (48, "0000:75:00", "reboot")]
    assert xids(journal_log(79, 48)) == [(79, "0000:a8:00", "replace"), (48, "0000:75:00", "reboot")]
    assert xids(journal_log(79, old_journald=True)) == [(79, "0000:a8:00", "replace")]


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ("11,5,100,-;" + XID_MESSAGES[79], "facility user: written to /dev/kmsg from userspace"),
        ("8,5,100,-;" + XID_MESSAGES[79], "facility user, level 0: what '<0>' from userspace becomes"),
        ("4,5,100,-;kernel: " + XID_MESSAGES[79], "not at the start of the message"),
        ("4,5,100,-;NVRM: Xid (PCI:0000:a8:00): 79x, pid=1", "not the driver's form"),
        ("4,5,100,-;NVRM: Xid (PCI:zz): 79, pid=1", "not a PCI address"),
        (" " + XID_MESSAGES[79], "a dictionary line, not a record"),
        (XID_MESSAGES[79], "no record header"),
    ],
)
def test_records_that_are_not_the_drivers_are_refused(record: str, why: str):
    assert xids(record) == [], why


def test_journal_records_need_the_kernel_transport_and_facility():
    genuine = json.loads(journal_entry(XID_MESSAGES[79]))
    assert xid.journal_records(json.dumps(genuine)) == [xid.Record(True, XID_MESSAGES[79])]
    for change in (
        {"_TRANSPORT": "syslog"},  # logger -t kernel 'NVRM: Xid …'
        {"_TRANSPORT": "stdout"},  # a service printing it
        {"SYSLOG_FACILITY": "1"},  # written to /dev/kmsg from userspace
        {"SYSLOG_FACILITY": None, "SYSLOG_IDENTIFIER": "nvidia"},  # old journald, a userspace record's identifier
    ):
        entry = {k: v for k, v in {**genuine, **change}.items() if v is not None}
        assert xid.journal_records(json.dumps(entry))[0].kernel is False, change
    as_bytes = {**genuine, "MESSAGE": list(XID_MESSAGES[79].encode())}  # journalctl's form for unprintable text
    assert xid.journal_records(json.dumps(as_bytes))[0].message == XID_MESSAGES[79]


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("0000:53:00", "0000:53:00"),  # the kernel's XID record
        ("00000000:53:00.0", "0000:53:00"),  # NVML's busId
        ("0000:A8:00.0", "0000:a8:00"),  # sysfs, upper case
        ("00000001:53:00.0", "0001:53:00"),
        ("53:00.0", None),
        ("zz", None),
    ],
)
def test_pci_addresses_compare_across_kernel_nvml_and_sysfs(address: str, key: str | None):
    assert xid.pci_key(address) == key


def test_an_xid_on_a_gpu_this_node_does_not_have_is_ignored(tmp_path: Path):
    """A genuine XID 79 record naming an address NVML does not report (another node's log copied here, a
    device passed through elsewhere): reported as ignored, never a fault."""
    other = XID_MESSAGES[79].replace("0000:a8:00", "0000:e1:00")
    (tmp_path / "k.log").write_text(kernel_log() + kmsg_record(500, other))
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "k.log")), P5_GPUS)
    assert c.ok and c.value == [
        {"xid": 79, "pci": "0000:e1:00", "class": "replace", "count": 1, "ignored": "not a GPU of this node"}
    ]
    assert "1 on a PCI address that is not this node's GPU: ignored" in c.detail


def test_a_genuine_xid_79_on_this_nodes_gpu_asks_for_a_replacement(tmp_path: Path):
    (tmp_path / "k.log").write_text(kernel_log(79))
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "k.log")), P5_GPUS)
    assert (c.ok, c.action, c.detail) == (False, "replace", "XID 79 GPU has fallen off the bus on PCI:0000:a8:00")
    # with no GPU known (NVML down, nothing in sysfs) the same record is ignored: no evidence ties it to this node
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "k.log")), frozenset())
    assert c.ok and c.value[0]["ignored"] == "not a GPU of this node"


def test_this_nodes_gpus_come_from_nvml_and_from_sysfs(tmp_path: Path):
    """NVML's bus IDs; and NVIDIA display/3D controllers in sysfs, which still lists the GPU NVML lost."""
    from gpucluster_agents.health.nvml import snapshot

    snap = snapshot(FakeNvml(scenario({5: {"handle": {"error": "GPU_IS_LOST"}}})))
    cfg = p5_config(tmp_path)
    assert xid.node_gpus(cfg, snap) == P5_GPUS - {"0000:a8:00"}
    devices = tmp_path / "sys" / "bus" / "pci" / "devices"
    for name, vendor, cls in (
        ("0000:a8:00.0", "0x10de", "0x030200"),  # the lost H100
        ("0000:05:00.0", "0x10de", "0x068000"),  # an NVSwitch: not a GPU
        ("0000:10:00.0", "0x1d0f", "0x020000"),  # an EFA device
    ):
        (devices / name).mkdir(parents=True)
        (devices / name / "vendor").write_text(vendor + "\n")
        (devices / name / "class").write_text(cls + "\n")
    assert xid.node_gpus(cfg, snap) == P5_GPUS
    assert xid.node_gpus(cfg, None) == {"0000:a8:00"}


def test_an_unknown_xid_is_reported_but_not_a_fault(tmp_path: Path):
    (tmp_path / "k.log").write_text(kmsg_record(1, "NVRM: Xid (PCI:0000:53:00): 999, pid=1, something new"))
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "k.log")), P5_GPUS)
    assert c.ok and c.value == [{"xid": 999, "pci": "0000:53:00", "class": "ignore", "count": 1}]


def test_repeated_xids_are_counted_not_listed(tmp_path: Path):
    (tmp_path / "k.log").write_text("".join(kmsg_record(i, XID_MESSAGES[13]) for i in range(5000)))
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "k.log")), P5_GPUS)
    assert c.ok and c.value == [{"xid": 13, "pci": "0000:53:00", "class": "ignore", "count": 5000}]


def test_an_unreadable_kernel_log_skips_the_check(tmp_path: Path):
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "missing.log")), P5_GPUS)
    assert c.ok and c.detail.startswith("skipped: ") and "missing.log" in c.detail
    (tmp_path / "dmesg.log").write_text(dmesg_text(79))  # a file that holds no records: said, not judged
    c = xid.check_xid(p5_config(tmp_path, kernel_log_file=str(tmp_path / "dmesg.log")), P5_GPUS)
    assert c.ok and c.detail.startswith("skipped: ") and "holds no kernel log records" in c.detail


def test_no_file_configured_reads_the_kmsg_device_then_the_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The host's sources, pointed at fixtures (never this machine's log): the kmsg device whole, records and
    headers; without it, the journal's JSON; with neither, a skip."""
    device = tmp_path / "kmsg"
    device.write_text(kernel_log(79))
    monkeypatch.setattr(xid, "KMSG", str(device))
    cfg = p5_config(tmp_path, kernel_log_file=None)
    recs, source = xid.kernel_log(cfg)
    assert source == str(device) and len(recs or []) == len(BASE_RECORDS) + 1
    assert xid.check_xid(cfg, P5_GPUS).action == "replace"
    monkeypatch.setattr(xid, "KMSG", str(tmp_path / "no-kmsg"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "journal.json").write_text(journal_log(48))
    fake = bin_dir / "journal"
    fake.write_text(f'#!/bin/sh\n[ "$*" = "-k -b -o json --no-pager -q" ] || exit 9\ncat {tmp_path}/journal.json\n')
    fake.chmod(0o755)
    monkeypatch.setattr(xid, "JOURNAL", (str(fake), *xid.JOURNAL[1:]))
    recs, source = xid.kernel_log(cfg)
    assert source == xid.JOURNAL_SOURCE and xid.parse(recs or [])[0][0].xid == 48
    c = xid.check_xid(cfg, P5_GPUS)
    assert (c.ok, c.action) == (False, "reboot")
    monkeypatch.setattr(xid, "JOURNAL", (str(tmp_path / "no-journal"), *xid.JOURNAL[1:]))
    c = xid.check_xid(cfg, P5_GPUS)
    assert c.ok and c.detail.startswith("skipped: no kernel log readable")


# --- EFA and the shared file system ---------------------------------------------------------------------------


def _fi_info(bin_dir: Path, devices: int, exit_code: int = 0) -> None:
    """A stand-in fi_info printing what libfabric's does for EFA: an rdm and a dgrm entry per device."""
    entries = "".join(
        f"provider: efa\n    fabric: efa\n    domain: rdmap{16 + i}s27-{kind}\n    version: 122.0\n    type: FI_EP_{kind.upper()}\n"
        for i in range(devices)
        for kind in ("rdm", "dgrm")
    )
    script = bin_dir / "fi_info"
    script.write_text(f"#!/bin/sh\n[ \"$1 $2\" = '-p efa' ] || exit 3\n/bin/cat <<'EOF'\n{entries}EOF\nexit {exit_code}\n")
    script.chmod(0o755)


@pytest.fixture
def path_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "bin"


def test_efa_counts_only_devices_bound_to_the_efa_driver(tmp_path: Path, path_bin: Path):
    make_sysfs(tmp_path / "sys", efa=32, other=2)
    assert len(host_checks.efa_devices(str(tmp_path / "sys"))) == 32
    c = host_checks.check_efa(p5_config(tmp_path))
    assert c.ok and c.value == {"sysfs": 32} and c.detail == "fi_info not installed: sysfs only"


def test_efa_missing_devices_in_sysfs_or_in_libfabric(tmp_path: Path, path_bin: Path):
    make_sysfs(tmp_path / "sys", efa=32)
    _fi_info(path_bin, 32)
    assert host_checks.check_efa(p5_config(tmp_path)).value == {"sysfs": 32, "fi_info": 32}
    _fi_info(path_bin, 31)
    c = host_checks.check_efa(p5_config(tmp_path))
    assert not c.ok and c.action == "reboot" and c.detail == "31 of 32 EFA devices in fi_info -p efa"
    _fi_info(path_bin, 0, exit_code=1)
    assert not host_checks.check_efa(p5_config(tmp_path)).ok
    c = host_checks.check_efa(p5_config(tmp_path, efa_count=33))
    assert not c.ok and c.detail == "32 of 33 EFA devices in sysfs"


def test_no_efa_expected_is_a_skip(tmp_path: Path):
    assert host_checks.check_efa(p5_config(tmp_path, efa_count=0)).detail.startswith("skipped")


@pytest.mark.parametrize(
    ("mounts", "ok", "detail"),
    [
        ("fs@tcp:/abc /fsx lustre rw 0 0\n", True, ""),
        ("fs@tcp:/abc /fsx/ lustre rw 0 0\n", False, "/fsx not mounted"),
        ("/dev/nvme1n1 /fsx ext4 rw 0 0\n", False, "/fsx is ext4, not lustre"),
        ("/dev/nvme1n1 /fsx ext4 rw 0 0\nfs@tcp:/abc /fsx lustre rw 0 0\n", True, ""),
        ("systemd-1 /fsx autofs rw 0 0\n", False, "/fsx is autofs, not lustre"),  # automount not triggered yet
    ],
)
def test_shared_fs_mount(tmp_path: Path, mounts: str, ok: bool, detail: str):
    (tmp_path / "mounts").write_text(mounts)
    c = host_checks.check_shared_fs(p5_config(tmp_path))
    assert (c.ok, c.detail) == (ok, detail)


def test_an_automount_not_yet_triggered_is_mounted_by_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """After a reboot fstab's x-systemd.automount leaves only autofs at /fsx until someone reads it: the check
    reads it once (here the kernel's answer is simulated: the listing adds the lustre mount) and passes;
    an automount that mounts nothing stays a fault (the parametrized case above)."""
    mounts = tmp_path / "mounts"
    mounts.write_text("systemd-1 /fsx autofs rw 0 0\n")
    touched: list[str] = []

    def listdir(path: str) -> list[str]:
        touched.append(path)
        with open(mounts, "a", encoding="utf-8") as fh:
            fh.write("fs@tcp:/abc /fsx lustre rw 0 0\n")
        return []

    monkeypatch.setattr(host_checks.os, "listdir", listdir)
    c = host_checks.check_shared_fs(p5_config(tmp_path))
    assert (c.ok, c.value, touched) == (True, "lustre fs@tcp:/abc", ["/fsx"])


def test_mount_points_with_escaped_blanks(tmp_path: Path):
    (tmp_path / "mounts").write_text("fs@tcp:/abc /data\\040set lustre rw 0 0\n")
    assert host_checks.check_shared_fs(p5_config(tmp_path, shared_fs_mount="/data set")).ok


# --- config ----------------------------------------------------------------------------------------------------


def test_config_round_trips_and_is_strict(tmp_path: Path):
    cfg = p5_config(tmp_path)
    assert hc.parse(json.loads(hc.to_json(cfg))) == cfg
    bad = {**hc.to_dict(cfg), "gpu_cout": 8, "efa_count": -1, "log_file": "relative.log", "min_fraction": 1.5}
    bad["modes"] = {"sweep": {"checks": ["gpu_count", "gpu_temp"]}, "nightly": {}}
    with pytest.raises(hc.HealthConfigError) as err:
        hc.parse(bad, "/etc/gpucluster/health.json")
    assert err.value.errors == [
        "gpu_cout: unknown key (allowed: " + ", ".join(sorted(hc.TOP_KEYS)) + ")",
        "efa_count: must be between 0 and 64, got -1",
        "min_fraction: must be a number in (0, 1], got 1.5",
        "log_file: must be an absolute path, got 'relative.log'",
        "modes.sweep.checks: unknown check 'gpu_temp' (known: " + ", ".join(hc.CHECKS) + ")",
        "modes.nightly: unknown mode (allowed: boot, prolog, sweep, deep)",
    ]
    assert str(err.value).startswith("/etc/gpucluster/health.json: gpu_cout")


def test_mode_checks_always_run_cheap_first():
    cfg = hc.parse({"instance_type": "p5.48xlarge", "gpu_count": 8, "modes": {"prolog": {"checks": ["xid", "gpu_count"]}}})
    assert cfg.mode("prolog").checks == ("gpu_count", "xid")
    assert cfg.mode("sweep") == hc.ModeConfig(*hc.DEFAULT_MODES["sweep"])


def test_budgets_stay_under_slurms_limits():
    """HealthCheckProgram is killed at 60 s; the prolog delays every job start."""
    assert hc.DEFAULT_MODES["sweep"][1] < 60
    assert hc.DEFAULT_MODES["prolog"][1] <= 10
    assert "hbm_copy" not in hc.DEFAULT_MODES["prolog"][0] and "dcgm_diag" not in hc.DEFAULT_MODES["sweep"][0]


def test_missing_config_file(tmp_path: Path):
    with pytest.raises(hc.HealthConfigError, match="file not found"):
        hc.load(str(tmp_path / "none.json"))


# --- verdict reason --------------------------------------------------------------------------------------------


def test_reason_is_one_short_printable_line():
    long = Check("xid", False, None, None, "replace", 'x "quoted"\n' * 100)
    text = reason([long, Check("efa", False, None, None, "reboot", "y")])
    # the worst action last, in parentheses: what the agent's repair pass reads (gpucluster_agents/repair/quarantine.py)
    assert len(text) == 256 and text.startswith("gpucluster: xid x 'quoted' x") and text.endswith("... (+1 more) (replace)")
    assert "\n" not in text and '"' not in text


# --- the fake NVML is the real binding's shape -----------------------------------------------------------------


def test_fake_nvml_functions_and_constants_exist_in_nvidia_ml_py():
    pynvml = pytest.importorskip("pynvml")  # requirements-dev.txt pins nvidia-ml-py
    for name, fn in inspect.getmembers(FakeNvml, inspect.isfunction):
        if name.startswith("nvml"):
            real = getattr(pynvml, name)
            fake_params = list(inspect.signature(fn).parameters)[1:]
            assert len(inspect.signature(real).parameters) == len(fake_params), name
    for name in dir(FakeNvml):
        if name.startswith("NVML_"):
            assert getattr(pynvml, name) == getattr(FakeNvml, name), name
    assert pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown == 0x80 and pynvml.nvmlClocksEventReasonSwPowerCap == 0x4


# --- what runs on the node -------------------------------------------------------------------------------------

HEALTH_DIR = Path(hc.__file__).parents[1] / "health"


@pytest.mark.parametrize("path", [*sorted(HEALTH_DIR.glob("*.py")), Path(hc.__file__)], ids=lambda p: p.name)
def test_health_modules_are_python_3_9_stdlib_and_load_nvml_lazily(path: Path):
    """GPU images carry a system Python (3.9 on Amazon Linux 2023) without boto3 or PyTorch: the program
    needs the standard library, and nvidia-ml-py only inside the function that reads NVML."""
    import ast
    import sys

    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    if path.name != "__init__.py":  # annotations stay strings: `float | None` is never evaluated on 3.9
        assert "from __future__ import annotations" in source
    for node in tree.body:  # module level: what importing the package needs
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        for name in names:
            assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, f"{path.name} imports {name}"
    lazy = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} - {
        a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names
    }
    assert lazy <= {"pynvml"}, lazy


def test_a_pcie_card_idling_at_a_lower_generation_is_not_a_fault(tmp_path: Path):
    """L4/L40S/A10G drop the link generation while idle; the width, and the generation under load, still count."""
    from gpucluster_agents.health.gpu_checks import check_pcie_link
    from gpucluster_agents.health.nvml import snapshot
    from tests.agents.health.fakes import scenario

    cfg = p5_config(tmp_path, gpu_model="L40S", pcie_generation=4, pcie_idle_downshift=True)

    def judge(**readings: object) -> Check:
        nvml = scenario(gpu={**scenario()["gpu"], "pcie_max_gen": 4, **readings})
        return check_pcie_link(cfg, snapshot(FakeNvml(nvml)))

    idle = judge(pcie_gen=1, clock_events=0x1)
    assert idle.ok and idle.value["gpu0"] == "gen1 x16 (idle)"
    busy = judge(pcie_gen=1, clock_events=0x4)
    assert not busy.ok and busy.detail.startswith("gpu0 gen1 x16 < gen4 x16")
    narrow = judge(pcie_gen=1, pcie_width=8, clock_events=0x1)
    assert not narrow.ok and narrow.detail.startswith("gpu0 gen1 x8 (idle) < gen1 x16")
    # an SXM module (no downshift) idling at gen3 is a fault
    assert not check_pcie_link(p5_config(tmp_path), snapshot(FakeNvml(scenario({0: {"pcie_gen": 3}})))).ok


# --- deep: DCGM, nccl-tests and the CUDA benchmarks when their tools are absent ----------------------------------


def _tool(bin_dir: Path, name: str, out: str, code: int = 0) -> None:
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\n/bin/cat <<'EOF'\n{out}EOF\nexit {code}\n")
    script.chmod(0o755)


DCGM_PASS = "| Diagnostic                | Result                                         |\n| Memory                    | Pass                                           |\n"
DCGM_FAIL = DCGM_PASS + "| Memory Bandwidth          | Fail - GPU 3                                   |\n"
NCCL_OUT = "#  Out of bounds values : 0 OK\n# Avg bus bandwidth    : 312.5 \n#\n"


def test_dcgm_diag_passes_fails_and_skips_when_absent(tmp_path: Path, path_bin: Path):
    from gpucluster_agents.health.deep_checks import check_dcgm_diag

    cfg = p5_config(tmp_path)
    assert check_dcgm_diag(cfg, 10).detail == "skipped: dcgmi not installed"
    _tool(path_bin, "dcgmi", DCGM_PASS)
    assert check_dcgm_diag(cfg, 10).ok
    _tool(path_bin, "dcgmi", DCGM_FAIL, code=226)
    c = check_dcgm_diag(cfg, 10)
    assert (c.ok, c.action, c.detail) == (False, "replace", "Memory Bandwidth Fail - GPU 3")


def test_nccl_all_reduce_against_the_fleet_floor(tmp_path: Path, path_bin: Path):
    from gpucluster_agents.health.deep_checks import check_nccl_pair

    assert check_nccl_pair(p5_config(tmp_path), 10).detail.startswith("skipped: all_reduce_perf")
    _tool(path_bin, "all_reduce_perf", NCCL_OUT)
    report = check_nccl_pair(p5_config(tmp_path), 10)
    assert report.ok and report.value == 312.5 and report.threshold == "report only"
    low = check_nccl_pair(p5_config(tmp_path, nccl_busbw_gbps=400.0), 10)
    assert not low.ok and low.detail == "bus bandwidth 312.5 < 400 GB/s"
    _tool(path_bin, "all_reduce_perf", "NCCL failure common.cu:1000 'unhandled system error'\n", code=1)
    assert check_nccl_pair(p5_config(tmp_path), 10).detail == "all_reduce_perf failed"


@pytest.mark.skipif(bool(__import__("ctypes.util").util.find_library("cuda")), reason="this machine has libcuda")
def test_benchmarks_skip_without_libcuda(tmp_path: Path):
    from gpucluster_agents.health.deep_checks import check_gemm, check_hbm_copy

    hbm = check_hbm_copy(p5_config(tmp_path), None)
    assert hbm.ok and hbm.detail == "skipped: libcuda.so.1 not found" and hbm.threshold == ">= 2718.0 GB/s (90% of 3020)"
    assert check_gemm(p5_config(tmp_path), None).detail == "skipped: libcuda.so.1 not found"
    assert check_hbm_copy(p5_config(tmp_path, hbm_copy_gbps=None), None).detail == "skipped: no baseline for this instance type"
