"""The README's commands as a user types them. The quick-start block runs verbatim in a fresh folder (after
the demo it relies on, at its quick sizes); every other command's config files exist and load."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```bash\n(.*?)```", README, re.S)


def _commands(block: str) -> list[str]:
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip().startswith(".venv/bin/")]


def _quick_start() -> list[str]:
    section = README.split("## Quick start", 1)[1]
    return _commands(re.search(r"```bash\n(.*?)```", section, re.S).group(1))


def test_the_readme_holds_exactly_two_set_up_commands() -> None:
    setup = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", setup, re.S)
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make demo", "make test"]


@pytest.mark.slow
def test_quick_start_commands_run_as_written(tmp_path: Path, quick_demo: Path) -> None:
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "demo").symlink_to(quick_demo)  # what `make demo` leaves, at its quick sizes
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    commands = _quick_start()
    assert len(commands) >= 6
    for command in commands:
        done = subprocess.run(shlex.split(command), cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert (tmp_path / "runs" / "example-steered.jsonl").exists()


def test_every_other_command_names_configs_that_load() -> None:
    from rewardsmith.calibrate.config import CalibrateRunConfig
    from rewardsmith.config import RunConfig, load_yaml
    from rewardsmith.icrm.config import ICRMRunConfig
    from rewardsmith.w2s.config import ShiftConfig

    kinds = {"train": RunConfig, "shift": ShiftConfig, "icrm": ICRMRunConfig, "calibrate": CalibrateRunConfig}
    seen = 0
    for block in BLOCKS:
        for command in _commands(block):
            words = shlex.split(command)
            for flag in ("--config", "-c"):
                if flag in words:
                    path = ROOT / words[words.index(flag) + 1]
                    assert path.exists(), command
                    load_yaml(kinds[words[1]], path)
                    seen += 1
    assert seen >= 6
