"""Shared fixtures. `data_dir` is the real data folder; tests that need it skip when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardsmith.data.sources import ENV_VAR, find_data_dir


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data directory (--data-dir default resolution: $REWARDSMITH_DATA_DIR, else ../shared/data).

    Skips the test with the reason when no such folder exists on this machine."""
    found = find_data_dir()
    if found is None or not found.is_dir():
        pytest.skip(f"real data folder not found ({found or 'none configured'}): set ${ENV_VAR} to the "
                    "folder holding hh-rlhf/, pku-saferlhf/, ... to run the real-data tests")
    return found


@pytest.fixture(scope="session")
def quick_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`rewardsmith demo --quick` run once per test session (the demo-page and README tests share it)."""
    from rewardsmith.jobs.demo import run_demo

    out = tmp_path_factory.mktemp("quick-demo") / "demo"
    run_demo(out, progress=False, quick=True)
    return out
