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


@pytest.fixture
def rater_ratings_csv(tmp_path: Path) -> Path:
    """A ratings CSV (rater_id, item_id, score, model_score) of two simulated raters: a with slope 10 and
    intercept 50, b with slope 30 and intercept 20, 20 items each, noise sd 0.5."""
    import random

    rng = random.Random(0)
    lines = ["rater_id,item_id,score,model_score"]
    for rater, (slope, intercept) in {"a": (10.0, 50.0), "b": (30.0, 20.0)}.items():
        for item in range(20):
            r = rng.uniform(-2, 2)
            lines.append(f"{rater},{item},{slope * r + intercept + rng.gauss(0, 0.5):.4f},{r:.4f}")
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join(lines) + "\n")
    return path
