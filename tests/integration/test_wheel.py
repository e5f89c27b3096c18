"""The package as a user installs it: a wheel built from this tree, installed into a fresh virtual
environment outside the repository, runs `rewardsmith demo --help` and a quick demo from another folder, so
data files must come from the package (importlib.resources), not from paths next to the source tree."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_wheel_installs_and_runs_the_demo_outside_the_repo(tmp_path: Path) -> None:
    tree = tmp_path / "tree"  # built from a copy: setuptools writes build/ and *.egg-info into the tree it builds
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation", "-q", "-w", str(dist)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("rewardsmith-*.whl")
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    # The new environment sees this environment's dependencies (a plain path: the editable install of this tree
    # is not activated there) and gets the wheel itself.
    (next((env_dir / "lib").glob("python3*")) / "site-packages" / "deps.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n"
    )
    python = env_dir / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
    where = subprocess.run(
        [str(python), "-c", "import rewardsmith, sys; print(rewardsmith.__file__)"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert where.returncode == 0 and str(env_dir) in where.stdout, (where.stdout, where.stderr)
    exe = env_dir / "bin" / "rewardsmith"
    helped = subprocess.run(
        [str(exe), "demo", "--help"], cwd=work, capture_output=True, text=True, env=env, timeout=120
    )
    assert helped.returncode == 0 and "--quick" in helped.stdout
    demo = subprocess.run(
        [str(exe), "demo", "--quick", "--quiet", "--out", "demo"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert (work / "demo" / "index.html").exists() and (work / "demo" / "metrics.json").exists()
    for step in ("train", "shift", "steer", "calibrate"):
        assert (work / "demo" / step / "report.html").exists(), step
