"""The generated config reference stays true, and `gpucluster docs` writes it where it should (the README's own
tests: tests/test_readme.py)."""

from __future__ import annotations

from gpucluster.tools.docs import REFERENCE, config_reference
from tests.conftest import ROOT


def test_config_reference_is_generated():
    assert REFERENCE.read_text() == config_reference(), "run `gpucluster generate` and commit docs/config-reference.md"


# --- gpucluster docs: into the checkout or --out, never into an installation --------------------------------


def test_docs_writes_the_checkouts_reference_by_default():
    from gpucluster.tools.docs import checkout_root, reference_path

    assert checkout_root() == ROOT
    assert reference_path() == ROOT / "docs" / "config-reference.md" == REFERENCE


def test_docs_out_writes_there(tmp_path, capsys):
    from gpucluster.tools import cli

    before = REFERENCE.stat().st_mtime_ns
    assert cli.main(["docs", "--out", str(tmp_path / "ref")]) == 0
    written = tmp_path / "ref" / "config-reference.md"
    assert written.read_text() == config_reference()
    assert capsys.readouterr().out == f"wrote {written}\n"
    assert REFERENCE.stat().st_mtime_ns == before  # the checkout's copy untouched


def test_docs_from_an_installed_package_refuses_without_out(tmp_path, monkeypatch, capsys):
    """Run from a wheel the package sits in site-packages, with no project around it: `gpucluster docs` says to
    pass --out (exit 2) and writes nothing there; with --out it writes where it is told."""
    from gpucluster.tools import cli, docs

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "gpucluster").mkdir(parents=True)
    monkeypatch.setattr(docs, "PACKAGE_DIR", site / "gpucluster")
    assert docs.checkout_root() is None
    assert cli.main(["docs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"gpucluster docs: gpucluster runs from an installed package ({site / 'gpucluster'})"
    )
    assert "pass --out DIR to write config-reference.md there" in err
    assert list(tmp_path.rglob("*.md")) == []
    assert cli.main(["docs", "--out", str(tmp_path / "docs")]) == 0
    assert (tmp_path / "docs" / "config-reference.md").read_text() == config_reference()


def test_docs_out_that_is_a_file_is_one_line(tmp_path, capsys):
    from gpucluster.tools import cli

    (tmp_path / "f").write_text("x")
    assert cli.main(["docs", "--out", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err == f"gpucluster docs: --out {tmp_path / 'f'}: not a folder\n"
