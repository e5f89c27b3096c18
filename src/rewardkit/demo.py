"""`make demo`: the main job on the embedded defaults, offline, in a few minutes on 2 CPU cores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "shift-synthetic.yaml"


def run_demo(out: str | Path, progress: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Trains and evaluates on the built-in synthetic suite; returns (results table rows, title)."""
    from rewardkit.config import DatasetConfig, RunConfig
    from rewardkit.train.run import run_training, summarise_for_console

    cfg = RunConfig()
    cfg.data.train = DatasetConfig(name="synthetic/source", limit=600)
    cfg.data.eval = [DatasetConfig(name="synthetic/target-clean", split="test", limit=300),
                     DatasetConfig(name="synthetic/target-reversed", split="test", limit=300)]
    cfg.model.max_length = 128
    cfg.train.lr = 5e-5
    cfg.train.progress = progress
    metrics = run_training(cfg, out)
    return list(summarise_for_console(metrics)), f"rewardkit demo (synthetic suite, MiniLM) -> {out}"
