"""The container files a Slurm node reads (``render/slurm/containers.py``): where enroot's bytes go per node group,
the enroot.conf, pyxis and plugstack files (pinned by golden files), the slurm.conf lines, and which node gets what.
Real pyxis, enroot and slurmd read them in ``tests/e2e/test_containers_e2e.py``."""

from __future__ import annotations

import subprocess

import pytest

from gpucluster.load import load_spec
from gpucluster.render.compute.node import NCCL_ENV_PATH
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.conf import slurm_conf
from gpucluster.render.slurm.containers import (
    CONTAINER_JOB,
    ENROOT_CONF,
    ENROOT_MOUNTS,
    MOUNT_CHECK_HOOK,
    PYXIS_CONF,
    PYXIS_SO,
    TMPFS_BUDGET_MIB,
    ContainerLayout,
    container_files,
    enroot_conf,
    layout_of,
    node_container_files,
    plugstack_conf,
    pyxis_conf,
)
from gpucluster.render.slurm.names import TASK_PROLOG, SlurmContext
from gpucluster_agents.boot.containers import install
from tests.conftest import ROOT, check_golden, group, make_config, require_tool

GOLDEN = ROOT / "tests" / "golden" / "slurm" / "containers"
P5 = group(name="p5", maxSize=2)
G6 = group(name="g6", instanceType="g6.xlarge", maxSize=2, enableEfaSupport=False)
CPU = group(name="cpu", instanceType="m7i.xlarge", maxSize=2, enableEfaSupport=False)
SCRATCH = {"nvmeScratch": {"mountPoint": "/scratch", "filesystem": "xfs", "nodeGroups": ["p5"]}}


def context(
    *groups: dict, containers: dict | None = None, storage: dict | None = None, node_groups: list | None = None
) -> SlurmContext:
    slurm: dict[str, object] = {"images": {"bake": False}}
    if node_groups is not None:
        slurm["nodeGroups"] = node_groups
    if containers is not None:
        slurm["containers"] = containers
    keys: dict[str, object] = {"slurm": slurm}
    if storage is not None:
        keys["storage"] = storage
    return SlurmContext.of(load_spec(make_config(*groups, **keys), stack="containers").cluster)


def layouts(ctx: SlurmContext) -> dict[str, ContainerLayout | None]:
    return {g.name: layout_of(ctx, g) for g in ctx.node_groups}


def test_bytes_go_to_the_nvme_scratch_with_a_tenth_of_it_as_cache_else_to_tmpfs():
    ctx = context(P5, G6, CPU, storage=SCRATCH)
    found = layouts(ctx)
    p5 = next(g for g in ctx.node_groups if g.name == "p5")
    tenth_mib = p5.facts.nvme_total_gb * 1000**3 // 10 // 1024**2
    assert found["p5"] == ContainerLayout("/scratch/enroot", False, tenth_mib)
    assert 2_000_000 < tenth_mib < 3_000_000  # p5.48xlarge: 8 x 3.84 TB
    assert found["g6"] == ContainerLayout("/run/enroot", True, TMPFS_BUDGET_MIB)  # a GPU group without scratch
    assert found["cpu"] is None  # no GPUs: no containers by default


def test_the_budget_and_the_switches_of_the_config():
    on = [{"name": "p5"}, {"name": "cpu", "containers": True}]
    ctx = context(P5, CPU, storage=SCRATCH, containers={"cacheBudgetGib": 100}, node_groups=on)
    assert layouts(ctx) == {
        "p5": ContainerLayout("/scratch/enroot", False, 102400),
        "cpu": ContainerLayout("/run/enroot", True, TMPFS_BUDGET_MIB),
    }
    assert layouts(context(P5, storage=SCRATCH, node_groups=[{"name": "p5", "containers": False}])) == {"p5": None}
    assert layouts(context(P5, storage=SCRATCH, containers={"enabled": False})) == {"p5": None}


def test_enroot_paths_are_per_uid_under_the_layout_and_the_options_are_set():
    conf = enroot_conf("/scratch/enroot")
    keys = dict(line.split(" ", 1) for line in conf.splitlines() if line and not line.startswith("#"))
    assert {k: v for k, v in keys.items() if k.endswith("_PATH")} == {
        "ENROOT_RUNTIME_PATH": "/scratch/enroot/runtime/user-${UID}",
        "ENROOT_DATA_PATH": "/scratch/enroot/data/user-${UID}",
        "ENROOT_CACHE_PATH": "/scratch/enroot/cache/user-${UID}",
        "ENROOT_TEMP_PATH": "/scratch/enroot/tmp/user-${UID}",
        "ENROOT_CONFIG_PATH": "${HOME:-/nonexistent}/.config/enroot",
    }
    assert keys["ENROOT_ALLOW_SUPERUSER"] == "no" and keys["ENROOT_ALLOW_HTTP"] == "no"
    assert keys["ENROOT_RESTRICT_DEV"] == "no" and keys["ENROOT_MOUNT_HOME"] == "no"


def test_pyxis_is_required_where_it_is_and_plugstack_includes_only_the_local_drop_ins():
    compute = pyxis_conf("/scratch/enroot")
    assert compute.splitlines()[-1] == (
        f"required {PYXIS_SO} runtime_path=/scratch/enroot/pyxis container_scope=job sbatch_support=1 execute_entrypoint=0"
    )
    assert pyxis_conf(None).splitlines()[-1].startswith(f"required {PYXIS_SO} container_scope=job")
    assert [line for line in plugstack_conf().splitlines() if not line.startswith("#")] == [
        "include /etc/slurm/plugstack.conf.d/*.conf"
    ]


def test_slurm_conf_names_the_container_epilog_and_the_prolog_directory():
    lines = slurm_conf(context(P5, storage=SCRATCH)).splitlines()
    assert f"Epilog={CONTAINER_JOB}" in lines and "Prolog=/etc/gpucluster/slurm/prolog.d/*" in lines
    assert sum(line.startswith("Prolog=") for line in lines) == 1
    off = slurm_conf(context(P5, storage=SCRATCH, containers={"enabled": False})).splitlines()
    assert not any(line.startswith("Epilog=") for line in off)


def part_files(ctx: SlurmContext, name: str) -> dict[str, str]:
    g = next(g for g in ctx.node_groups if g.name == name)
    return {f.path: f.text() for f in node_slurm_part(ctx, g).write_files}


def test_a_gpu_node_writes_its_files_at_boot_and_a_node_without_containers_gets_a_no_op_prolog(tmp_path):
    ctx = context(P5, CPU, storage=SCRATCH)
    gpu, cpu = part_files(ctx, "p5"), part_files(ctx, "cpu")
    setup = gpu["/usr/local/sbin/gpucluster-slurm-node"]
    layout = layout_of(ctx, ctx.node_groups[0])
    assert layout is not None
    command = f"(cd /opt/gpucluster/lib && /usr/bin/python3 -E -s -m gpucluster_agents.boot.containers /scratch/enroot {layout.cache_budget_mib})"
    assert command in setup.splitlines()
    assert setup.index("install-agent") < setup.index(command) < setup.index("systemctl enable --now slurmd")  # the package first
    assert not {ENROOT_CONF, PYXIS_CONF, CONTAINER_JOB} & gpu.keys()  # written by the node: no room in user data
    assert (
        "ExecStartPre=/usr/bin/install -d -m 0755 -o root -g root /scratch/enroot /scratch/enroot/pyxis"
        in gpu["/etc/systemd/system/slurmd.service.d/gpucluster.conf"].splitlines()
    )
    assert cpu[CONTAINER_JOB] == "#!/bin/sh\nexit 0\n" and "boot.containers" not in cpu["/usr/local/sbin/gpucluster-slurm-node"]
    assert node_container_files(context(P5, storage=SCRATCH, containers={"enabled": False}), ctx.node_groups[0]) == ()
    # what the setup's command writes is what container_files renders (the goldens')
    install(layout.root, layout.cache_budget_mib, str(tmp_path))
    written = {"/" + str(p.relative_to(tmp_path)): p for p in tmp_path.rglob("*") if not p.is_dir()}
    assert {path: p.read_text() for path, p in written.items() if not p.is_symlink()} == {
        f.path: f.text() for f in container_files(layout)
    }
    assert {path: str(p.readlink()) for path, p in written.items() if p.is_symlink()} == {
        "/etc/enroot/hooks.d/50-slurm-pmi.sh": "/usr/share/enroot/hooks.d/50-slurm-pmi.sh",
        "/etc/enroot/hooks.d/50-slurm-pytorch.sh": "/usr/share/enroot/hooks.d/50-slurm-pytorch.sh",
    }
    assert {
        path: p.stat().st_mode & 0o777
        for path, p in written.items()
        if not p.is_symlink() and path.endswith((".sh", "containers"))
    } == {
        MOUNT_CHECK_HOOK: 0o755,
        CONTAINER_JOB: 0o755,
    }


NVME = ContainerLayout("/scratch/enroot", False, 286102)
GOLDEN_FILES = [
    ("enroot-nvme.conf", lambda: enroot_conf("/scratch/enroot")),
    ("enroot-tmpfs.conf", lambda: enroot_conf("/run/enroot")),
    ("pyxis-compute.conf", lambda: pyxis_conf("/scratch/enroot")),
    ("pyxis-login.conf", lambda: pyxis_conf(None)),
    ("plugstack.conf", plugstack_conf),
    ("prolog-wrapper", lambda: {f.path: f.text() for f in container_files(NVME)}[CONTAINER_JOB]),
    ("mount-check-hook", lambda: {f.path: f.text() for f in container_files(NVME)}[MOUNT_CHECK_HOOK]),
    ("enroot-mounts.fstab", lambda: {f.path: f.text() for f in container_files(NVME)}[ENROOT_MOUNTS]),
]


def test_the_enroot_mounts_bind_the_task_prolog_slurm_conf_names_and_the_settings_it_reads():
    """slurmstepd runs the TaskProlog inside the container: the fstab binds the very paths slurm.conf and the node's
    user data use (the contract's constants are the render's)."""
    ctx = context(P5, storage=SCRATCH)
    assert f"TaskProlog={TASK_PROLOG}" in slurm_conf(ctx).splitlines()
    assert TASK_PROLOG in part_files(ctx, "p5")  # the node's user data writes it (and base_bootstrap NCCL_ENV_PATH)
    fstab = {f.path: f.text() for f in container_files(NVME)}[ENROOT_MOUNTS]
    binds = [line.split()[:2] for line in fstab.splitlines() if not line.startswith("#")]
    assert binds == [[TASK_PROLOG, TASK_PROLOG], [NCCL_ENV_PATH, NCCL_ENV_PATH]]


@pytest.mark.parametrize(("name", "text"), GOLDEN_FILES)
def test_golden(name, text, update_golden):
    check_golden(GOLDEN / name, text(), update_golden)


def test_golden_dir_has_no_stale_files():
    assert {p.name for p in GOLDEN.iterdir()} == {name for name, _ in GOLDEN_FILES}


def test_the_node_programs_pass_shellcheck():
    shellcheck = require_tool("shellcheck")
    programs = [ROOT / "gpucluster_agents" / "boot" / name for name in ("containers-job.sh", "enroot-mount-check.sh")]
    done = subprocess.run([shellcheck, "-s", "bash", *map(str, programs)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
