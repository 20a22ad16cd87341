"""How pyxis and enroot reach a node (``render/slurm/container_build.py``): the baked image's component document
builds them from the pinned releases and validates them; ``slurm.images.bake: false`` builds them at first boot; login
nodes build them at setup; a group with ``containers: false``, a cluster with ``enabled: false`` and a CPU group get
none. Each script passes bash and shellcheck. (The build itself runs for real in test_node_install_root.py.)"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import yaml

from gpucluster.facts.containers import ENROOT, MAKESELF, PYXIS
from gpucluster.load import load_spec
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.container_build import PYXIS_SO, container_packages
from gpucluster.render.slurm.image import COMPONENT_DATA_LIMIT, component_document
from gpucluster.render.slurm.login import LoginInputs, login_setup
from gpucluster.render.slurm.names import NODE_SETUP, SlurmContext
from tests.conftest import group, make_config, require_tool
from tests.render.identity_cases import DECLARED

CPU = {"name": "cpu", "instanceType": "m7i.xlarge", "availabilityZones": ["us-east-1a"], "maxSize": 2}
LUSTRE = {"lustre": {"storageCapacityGib": 1200, "throughputPerUnitStorage": 250}}
URI, SHA = "s3://bucket-1/agent/gpucluster_agents-0123456789abcdef.zip", "ab" * 32


def _cluster(containers: dict[str, Any] | None = None, entries: list[dict[str, Any]] | None = None, **slurm: Any) -> Any:
    section: dict[str, Any] = {"nodeGroups": entries or [{"name": "p5"}], **slurm}
    if containers is not None:
        section["containers"] = containers
    return load_spec(make_config(group(name="p5"), CPU, slurm=section, storage=LUSTRE), stack="img").cluster


def _document(cluster: Any, name: str = "p5") -> str:
    g = next(g for g in cluster.slurm.node_groups if g.name == name)
    return component_document(SlurmContext.of(cluster), g, package_uri=URI, agent_sha256=SHA)


def _shellcheck(script: str, tmp_path: Path) -> None:
    path = tmp_path / "script.sh"
    path.write_text(script)
    for argv in (["bash", "-n"], [require_tool("shellcheck"), "-s", "bash", "-S", "warning"]):
        done = subprocess.run([*argv, str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_builds_the_pinned_releases_against_its_own_slurm(tmp_path: Path) -> None:
    text = _document(_cluster())
    doc = yaml.safe_load(text)
    script = doc["phases"][0]["steps"][-1]["inputs"]["commands"][0]
    for s, dest in ((ENROOT, "enroot"), (MAKESELF, "enroot/deps/makeself"), (PYXIS, "pyxis")):
        assert f"fetch {s.name} {s.tag} {s.commit} {s.archive} {s.archive_sha256} {s.repository} {dest}\n" in script
    assert "git clone -q --depth 1 --branch" in script and '[ "$(git -C "$dir" rev-parse HEAD)" = "$commit" ]' in script
    assert "dpkg-query -W -f='${Version}' libslurm-dev" in script  # the headers are the running Slurm's build
    assert all(p in script for p in container_packages())
    assert script.index("apt-get") < script.index("fetch enroot") < script.index('make -s -C "$src/pyxis" install')
    validate = doc["phases"][1]["steps"][0]["inputs"]["commands"]
    assert f"test -s {PYXIS_SO}" in validate and f"enroot version | grep -qx {ENROOT.version}" in validate
    _shellcheck(script, tmp_path)
    # the biggest document (Lustre, the node package, containers) keeps room under Image Builder's limit
    assert len(text) < COMPONENT_DATA_LIMIT - 4000, len(text)


def test_groups_and_clusters_without_containers_build_nothing() -> None:
    for cluster, name in (
        (_cluster(entries=[{"name": "p5", "containers": False}]), "p5"),
        (_cluster({"enabled": False}), "p5"),
        (_cluster(), "cpu"),  # no GPU: containers only when the group asks
    ):
        text = _document(cluster, name)
        assert "pyxis" not in text and "enroot" not in text and "libslurm-dev" not in text, name
    asked = _cluster(entries=[{"name": "p5"}, {"name": "cpu", "containers": True}])
    assert "fetch pyxis" in _document(asked, "cpu")
    # enabled: false wins over a group's own true
    assert "pyxis" not in _document(_cluster({"enabled": False}, [{"name": "p5", "containers": True}]))


def _setup(cluster: Any, name: str = "p5") -> str:
    g = next(g for g in cluster.slurm.node_groups if g.name == name)
    part = node_slurm_part(SlurmContext.of(cluster), g)
    return next(f.content for f in part.write_files if f.path == NODE_SETUP)


def test_without_a_baked_image_the_node_builds_them_at_first_boot(tmp_path: Path) -> None:
    unbaked = _setup(_cluster(images={"bake": False}))
    assert "fetch pyxis" in unbaked and "libslurm-dev" in unbaked
    assert unbaked.index("apt-get") < unbaked.index("fetch pyxis") < unbaked.index("systemctl enable --now slurmd")
    _shellcheck(unbaked, tmp_path)
    assert "fetch pyxis" not in _setup(_cluster())  # the baked image holds them
    assert "fetch pyxis" not in _setup(_cluster({"enabled": False}, images={"bake": False}))


def test_login_nodes_build_pyxis_when_a_group_runs_containers(tmp_path: Path) -> None:
    given = LoginInputs("us-east-1", "img-login", "img-login-grace", 600)
    with_containers = SlurmContext.of(_cluster())
    script = login_setup(dataclasses.replace(with_containers, identity=DECLARED), given)
    assert "fetch pyxis" in script and all(p in script for p in container_packages())
    assert script.index("fetch pyxis") < script.index("7. sackd")
    _shellcheck(script, tmp_path)
    without = dataclasses.replace(SlurmContext.of(_cluster({"enabled": False})), identity=DECLARED)
    assert "pyxis" not in login_setup(without, given)
