"""One way to run Slurm's read commands (``gpucluster_agents.usage.run``), against stand-in commands: the output as
text with no terminal input, and one error naming the command and Slurm's last word when there is no output, for
every reader of Slurm's figures (the usage report, the teams' files, the head node's and the teams' metrics)."""

from __future__ import annotations

import datetime as dt
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from gpucluster_agents.metrics import head
from gpucluster_agents.metrics.exposition import Registry
from gpucluster_agents.usage import sacct, teams
from gpucluster_agents.usage.run import SlurmCommandError, run_slurm

REFUSED = "sacct: error: Problem talking to the database: Connection refused"


def _command(path: Path, body: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_output_comes_back_as_text_with_no_input_to_read(tmp_path: Path) -> None:
    # A command that reads its input would otherwise wait on the caller's terminal (a timer's is /dev/null anyway).
    cmd = _command(tmp_path / "sinfo", "if read line; then echo \"read $line\"; fi\necho out\nprintf 'job\\377\\n'\n")
    assert run_slurm([cmd], timeout=10) == "out\njob\ufffd\n"


def test_a_failure_names_the_command_and_slurms_last_line(tmp_path: Path) -> None:
    class Refused(SlurmCommandError):
        pass

    cmd = _command(tmp_path / "bin" / "sacct", f"echo 'sacct: debug: connecting' >&2\necho '{REFUSED}' >&2\nexit 1\n")
    with pytest.raises(Refused) as exc:
        run_slurm([cmd, "--noheader"], timeout=10, error=Refused)
    assert str(exc.value) == f"sacct failed (exit 1): {REFUSED}"
    silent = _command(tmp_path / "bin" / "sshare", "exit 3\n")
    with pytest.raises(SlurmCommandError, match=r"^sshare failed \(exit 3\): exit 3$"):
        run_slurm([silent], timeout=10)


def test_a_missing_or_hung_command_is_the_same_error(tmp_path: Path) -> None:
    with pytest.raises(SlurmCommandError, match=r"^cannot run .*/nowhere/squeue: "):
        run_slurm([str(tmp_path / "nowhere" / "squeue")], timeout=10)
    hung = _command(tmp_path / "squeue", "exec sleep 30\n")
    with pytest.raises(SlurmCommandError, match=r"^cannot run .*/squeue: .*timed out"):
        run_slurm([hung], timeout=0.5)


def test_the_environment_is_the_one_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCLUSTER_PROBE", "inherited")
    cmd = _command(tmp_path / "sacct", 'echo "TZ=${TZ:-unset} PROBE=${GPUCLUSTER_PROBE:-unset}"\n')
    assert run_slurm([cmd], timeout=10, env={"TZ": "UTC"}) == "TZ=UTC PROBE=unset\n"
    assert run_slurm([cmd], timeout=10).endswith(" PROBE=inherited\n")


NOW = dt.datetime(2026, 11, 26)
READERS: dict[str, tuple[str, Callable[[Path], object], type[SlurmCommandError]]] = {
    "usage report": ("sacct", lambda b: sacct.run_sacct(NOW - dt.timedelta(days=1), NOW, str(b / "sacct")), sacct.SacctError),
    "teams' files": ("sshare", lambda b: teams.run_sshare(["research"], str(b / "sshare")), teams.ShareError),
    "head metrics": ("sinfo", lambda b: head.collect_slurm(Registry(), str(b)), SlurmCommandError),
}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_of_slurms_figures_fails_the_same_way(tmp_path: Path, reader: str) -> None:
    name, read, error = READERS[reader]
    _command(tmp_path / name, f"echo '{name}: error: Unable to contact slurm controller' >&2\nexit 1\n")
    with pytest.raises(error) as exc:
        read(tmp_path)
    assert isinstance(exc.value, SlurmCommandError)
    assert str(exc.value) == f"{name} failed (exit 1): {name}: error: Unable to contact slurm controller"
