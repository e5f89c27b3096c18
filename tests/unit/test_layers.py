"""The import-linter layers contract (pyproject.toml) holds for the code, and fails on a wrong-way import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(exe), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=src,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_contract_holds() -> None:
    result = _lint(ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_lower_layer_importing_a_higher_one_breaks_it(tmp_path: Path) -> None:
    shutil.copytree(
        ROOT / "src" / "rewardsmith", tmp_path / "rewardsmith", ignore=shutil.ignore_patterns("__pycache__")
    )
    bad = tmp_path / "rewardsmith" / "models" / "factory.py"
    bad.write_text(bad.read_text() + "\nfrom rewardsmith.jobs import common as _wrong_way  # noqa\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "rewardsmith.models.factory -> rewardsmith.jobs.common" in result.stdout
