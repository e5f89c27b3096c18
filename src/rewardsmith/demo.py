"""`make demo`: the main job on the embedded defaults, offline, in a few minutes on 2 CPU cores.

Weak-to-strong under preference shift on the built-in synthetic suite: a weak teacher (a frozen 1-layer
MiniLM probe) labels pairs for a MiniLM student trained with each method; every model is evaluated on
the source's held-out pairs and on target domains where the source's length / stock-phrase artifacts are
uninformative or reversed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardsmith.errors import ConfigError

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "shift-synthetic.yaml"


def demo_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Console rows: each model's ID accuracy and its accuracy / AOG on every target (percentage points)."""
    rows = []
    for name, rec in metrics["methods"].items():
        row: dict[str, Any] = {"model": name, "ID": _fmt(rec.get("id_acc")), "WRG": _fmt(rec.get("wrg"))}
        for target in metrics["targets"]:
            short = target.split("/")[-1].removeprefix("target-")
            row[short] = _fmt(rec.get(f"ood_acc.{target}"))
            row[f"{short} NTS"] = _fmt(rec.get(f"nts.{target}"))
        rows.append(row)
    return rows


def _fmt(value: Any) -> str:
    return "" if value is None else f"{value:.1f}"


def run_demo(out: str | Path, progress: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Runs configs/shift-synthetic.yaml into `out`; returns (results table rows, title)."""
    from rewardsmith.config import load_yaml
    from rewardsmith.w2s.config import ShiftConfig
    from rewardsmith.w2s.pipeline import run_shift

    if not DEMO_CONFIG.exists():
        raise ConfigError(f"{DEMO_CONFIG}: demo config not found (run from a rewardsmith checkout)")
    cfg = load_yaml(ShiftConfig, DEMO_CONFIG)
    metrics = run_shift(cfg, out, progress=progress)
    title = (f"rewardsmith demo: weak-to-strong under shift, synthetic suite, MiniLM "
             f"({metrics['seconds']:.0f} s) -> {out}/report.md")
    return demo_rows(metrics), title
