"""Committed metrics files (docs/results/<name>.json): a run's metrics.json with the command that produced it and
without the bulky parts no document shows (its environment kept). The experiments (experiments/*.py) write them;
tools/build_docs.py renders the documents' result blocks from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rewardsmith.errors import DataError
from rewardsmith.io.atomic import atomic_write_text

# Bulky parts of a run's metrics.json that no document shows. The run's `environment` (package versions, git commit,
# torch threads) is kept: it says which code made a committed result, so a rerun that differs can be traced.
DROPPED = frozenset({"reliability", "curve", "tables"})


def slim(metrics: Any) -> Any:
    """`metrics` without the keys in DROPPED, at every depth (dicts and lists walked, other values kept)."""
    if isinstance(metrics, dict):
        return {k: slim(v) for k, v in metrics.items() if k not in DROPPED}
    if isinstance(metrics, list):
        return [slim(v) for v in metrics]
    return metrics


def save_results(name: str, run_dir: Path, command: str, results_dir: Path) -> Path:
    """Writes `<results_dir>/<name>.json`: {"command": command, **slim(run_dir/metrics.json)}. Returns its path;
    DataError naming the file when the run has no readable metrics.json."""
    source = Path(run_dir) / "metrics.json"
    try:
        metrics = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{source}: no readable metrics.json ({err.__class__.__name__})") from None
    if not isinstance(metrics, dict):
        raise DataError(f"{source}: metrics.json is not a JSON object")
    out = Path(results_dir) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps({"command": command, **slim(metrics)}, indent=1) + "\n")
    return out
