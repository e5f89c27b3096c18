"""The `rewardsmith` command's OpenMP wait policy (rewardsmith/launch.py): chosen from the run queue before torch
loads, PASSIVE for serve, a value the user set kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rewardsmith import launch


def _loadavg(tmp_path: Path, runnable: int) -> Path:
    path = tmp_path / "loadavg"
    path.write_text(f"0.47 0.12 0.04 {runnable}/109 2131\n", encoding="ascii")
    return path


def test_an_idle_machine_spins_and_a_busy_one_sleeps(tmp_path: Path) -> None:
    assert launch.wait_policy(["rewardsmith", "train", "--quiet"], _loadavg(tmp_path, 1)) == "ACTIVE"
    assert launch.wait_policy(["rewardsmith", "train", "--quiet"], _loadavg(tmp_path, 2)) == "PASSIVE"


def test_serve_always_sleeps_its_threads(tmp_path: Path) -> None:
    assert launch.wait_policy(["rewardsmith", "serve", "--model", "m"], _loadavg(tmp_path, 1)) == "PASSIVE"
    assert launch.wait_policy(["rewardsmith", "-q", "serve"], _loadavg(tmp_path, 1)) == "PASSIVE"


def test_a_machine_that_cannot_be_looked_at_sleeps(tmp_path: Path) -> None:
    assert launch.others_runnable(tmp_path / "absent", gap_s=0) is None
    assert launch.wait_policy(["rewardsmith", "train"], tmp_path / "absent") == "PASSIVE"
    garbled = tmp_path / "garbled"
    garbled.write_text("not a load average\n", encoding="ascii")
    assert launch.wait_policy(["rewardsmith", "train"], garbled) == "PASSIVE"


def test_most_looks_decide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task runnable for one look of five (a shell starting) is not other work; one runnable in most looks is."""
    path = tmp_path / "loadavg"
    reads = iter([2, 1, 1, 1, 1, 2, 2, 2, 1, 1])

    def read_text(self: Path, encoding: str = "ascii") -> str:
        return f"0.0 0.0 0.0 {next(reads)}/100 1\n"

    monkeypatch.setattr(Path, "read_text", read_text)
    assert launch.others_runnable(path, gap_s=0) is False
    assert launch.others_runnable(path, gap_s=0) is True


@pytest.mark.skipif(not launch.LOADAVG.exists(), reason="no /proc/loadavg on this system")
def test_the_command_keeps_a_value_the_user_set_and_sets_one_otherwise(tmp_path: Path) -> None:
    """The entry point sets the variable before torch loads; the run's environment record shows it."""
    code = (
        "import os, sys\n"
        "sys.argv = ['rewardsmith', '--version']\n"
        "from rewardsmith.launch import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(os.environ['OMP_WAIT_POLICY'])\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def run(extra: dict[str, str]) -> str:
        done = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[-1]

    assert run({"OMP_WAIT_POLICY": "PASSIVE"}) == "PASSIVE"
    assert run({}) in ("ACTIVE", "PASSIVE")
