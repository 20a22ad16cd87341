"""The container files a Slurm node reads (``render/slurm/containers.py``): where enroot's bytes go per node group,
the enroot.conf, pyxis and plugstack files (pinned by golden files), the slurm.conf lines, and which node gets what.
Real pyxis, enroot and slurmd read them in ``tests/e2e/test_containers_e2e.py``."""

from __future__ import annotations

import pytest

from gpucluster.load import load_spec
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.conf import slurm_conf
from gpucluster.render.slurm.containers import (
    CONTAINER_JOB,
    ENROOT_CONF,
    JOB_PROGRAM,
    MOUNT_CHECK_HOOK,
    PYXIS_CONF,
    PYXIS_SO,
    TMPFS_BUDGET_MIB,
    ContainerLayout,
    enroot_conf,
    layout_of,
    node_container_files,
    plugstack_conf,
    pyxis_conf,
)
from gpucluster.render.slurm.names import SlurmContext
from tests.conftest import ROOT, check_golden, group, make_config

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
    conf = enroot_conf(ContainerLayout("/scratch/enroot", False, 1000))
    keys = dict(line.split(" ", 1) for line in conf.splitlines() if line and not line.startswith("#"))
    assert {k: v for k, v in keys.items() if k.endswith("_PATH")} == {
        "ENROOT_RUNTIME_PATH": "/scratch/enroot/runtime/user-${UID}",
        "ENROOT_DATA_PATH": "/scratch/enroot/data/user-${UID}",
        "ENROOT_CACHE_PATH": "/scratch/enroot/cache/user-${UID}",
        "ENROOT_TEMP_PATH": "/scratch/enroot/tmp/user-${UID}",
        "ENROOT_CONFIG_PATH": "${HOME}/.config/enroot",
    }
    assert keys["ENROOT_ALLOW_SUPERUSER"] == "no" and keys["ENROOT_ALLOW_HTTP"] == "no"
    assert keys["ENROOT_RESTRICT_DEV"] == "no" and keys["ENROOT_MOUNT_HOME"] == "no"


def test_pyxis_is_required_where_it_is_and_plugstack_includes_only_the_local_drop_ins():
    compute = pyxis_conf(ContainerLayout("/scratch/enroot", False, 1000))
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


def test_a_gpu_node_gets_the_files_and_a_node_without_containers_only_a_no_op_prolog():
    ctx = context(P5, CPU, storage=SCRATCH)
    gpu, cpu = part_files(ctx, "p5"), part_files(ctx, "cpu")
    assert {ENROOT_CONF, PYXIS_CONF, MOUNT_CHECK_HOOK, CONTAINER_JOB} <= gpu.keys()
    assert f"exec /bin/bash {JOB_PROGRAM} /scratch/enroot " in gpu[CONTAINER_JOB]
    assert ENROOT_CONF not in cpu and PYXIS_CONF not in cpu and cpu[CONTAINER_JOB].endswith("exit 0\n")
    setup = gpu["/usr/local/sbin/gpucluster-slurm-node"]
    assert "for hook in 50-slurm-pmi.sh 50-slurm-pytorch.sh; do ln -sf" in setup
    assert "50-slurm-pytorch" not in cpu["/usr/local/sbin/gpucluster-slurm-node"]
    assert node_container_files(context(P5, storage=SCRATCH, containers={"enabled": False}), ctx.node_groups[0]) == ()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("enroot-nvme.conf", lambda: enroot_conf(ContainerLayout("/scratch/enroot", False, 286102))),
        ("enroot-tmpfs.conf", lambda: enroot_conf(ContainerLayout("/run/enroot", True, TMPFS_BUDGET_MIB))),
        ("pyxis-compute.conf", lambda: pyxis_conf(ContainerLayout("/scratch/enroot", False, 286102))),
        ("pyxis-login.conf", lambda: pyxis_conf(None)),
        ("plugstack.conf", plugstack_conf),
    ],
)
def test_golden(name, text, update_golden):
    check_golden(GOLDEN / name, text(), update_golden)
