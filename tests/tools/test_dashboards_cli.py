"""``gpucluster dashboards --out DIR``: the command the ``monitoring.dashboards`` output names where no Grafana gets
them writes the shipped dashboards, importable anywhere, and never overwrites an edited copy."""

from __future__ import annotations

import json

from gpucluster.components.monitoring.monitoring import DASHBOARDS_COMMAND
from gpucluster.render.monitoring.dashboards import dashboards
from gpucluster.tools.cli import main
from tests.conftest import ROOT

SHIPPED = ROOT / "gpucluster" / "render" / "monitoring" / "dashboards"


def test_writes_the_shipped_dashboards_and_prints_their_absolute_paths(tmp_path, capsys):
    out = tmp_path / "boards"
    assert main(["dashboards", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == set(dashboards())
    for path in out.iterdir():
        assert path.read_text() == (SHIPPED / path.name).read_text()
        assert json.loads(path.read_text())["templating"]["list"][0]["name"] == "datasource"
        assert f"  {path.resolve()}\n" in printed
    assert main(["dashboards", "--out", str(out)]) == 0  # the same files again: nothing to refuse
    assert DASHBOARDS_COMMAND.startswith("gpucluster dashboards --out ")


def test_refuses_to_overwrite_an_edited_copy(tmp_path, capsys):
    edited = tmp_path / "gpucluster-fabric.json"
    edited.write_text('{"title": "my fabric"}\n')
    assert main(["dashboards", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "gpucluster-fabric.json" in err and "Traceback" not in err
    assert edited.read_text() == '{"title": "my fabric"}\n'
    assert not (tmp_path / "gpucluster-overview.json").exists()  # nothing written
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["dashboards", "--out", str(target)]) == 1
    assert "is a file" in capsys.readouterr().err
