"""How many of MiniLM's layers the demo trains (resources/demo/train.yaml, model.num_layers), chosen on validation.

The demo's step 1 as configured, but its training part (80% of the shipped harmless sample, by a hash of the first
human turn) split again: the first 64% trains, the next 16% validates; the held-out 20% the demo reports is the
same set, and this script never reads it. Each depth is a `rewardsmith train` run folder under --out (reused when
finished); accuracy on the validation part with its bootstrap CI, each depth paired against all 6 layers, and the
training loop's pairs/s in fp32 (the precision the demo runs where bf16 is not native).

    .venv/bin/python experiments/demo_depth.py    # docs/results/demo_depth.json (about 5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from rewardsmith.config import RunConfig, from_dict
from rewardsmith.data.sources import sample_dir
from rewardsmith.io.atomic import atomic_write_text
from rewardsmith.jobs.demo import demo_config
from rewardsmith.jobs.train import run_train
from rewardsmith.stats import mean_interval, paired_difference

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "demo_depth.json"
DEPTHS = (6, 3, 2)
FULL = 6


def _config(data_dir: Path, layers: int) -> RunConfig:
    raw = demo_config("train")
    raw["data"].update({"eval": [], "train_fraction": 0.64, "val_fraction": 0.16})
    raw["model"]["num_layers"] = layers
    raw["train"]["bf16"] = False
    raw["train"]["progress"] = False
    cfg = from_dict(RunConfig, raw)
    cfg.data.data_dir = str(data_dir)
    return cfg


def _correct(scores_path: Path) -> tuple[list[str], np.ndarray]:
    """(pair ids, 1.0 where the validation pair's chosen response scored higher) from a run's scores.json."""
    scores = json.loads(scores_path.read_text(encoding="utf-8"))
    (name,) = [k for k in scores if k.endswith("(validation)")]
    rows = scores[name]
    return list(rows["pair_id"]), np.asarray(rows["chosen"]) > np.asarray(rows["rejected"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "demo-depth", help="run folders, one per depth")
    parser.add_argument("--result", type=Path, default=OUT)
    args = parser.parse_args()
    rows, correct = [], {}
    with sample_dir() as data_dir:
        for layers in DEPTHS:
            start = time.perf_counter()
            run = run_train(_config(data_dir, layers), args.out / f"layers{layers}")
            ids, hits = _correct(run.out / "scores.json")
            correct[layers] = (ids, hits.astype(np.float64))
            acc = mean_interval(hits, seed=0, scale=100.0)
            rows.append(
                {
                    "layers": layers,
                    "validation_pairs": acc.n,
                    "accuracy": acc.to_dict(),
                    "pairs_per_s": run.metrics["train"]["pairs_per_s"],
                    "train_seconds": run.metrics["train"]["seconds"],
                    "seconds_this_call": round(time.perf_counter() - start, 1),
                }
            )
    full_ids, full = correct[FULL]
    for row in rows:
        ids, hits = correct[row["layers"]]
        if ids != full_ids:
            raise SystemExit(f"layers {row['layers']}: validation pairs differ from the 6-layer run's")
        row["minus_6_layers"] = paired_difference(hits, full, seed=0, scale=100.0).to_dict()
        row["speed_vs_6_layers"] = round(row["pairs_per_s"] / rows[0]["pairs_per_s"], 2)
    result = {
        "command": "python experiments/demo_depth.py",
        "what": "the demo's step 1 at each depth, trained on 64% of the shipped harmless sample and scored on the "
        "next 16% (validation); the demo's held-out 20% is not read",
        "rows": rows,
    }
    atomic_write_text(args.result, json.dumps(result, indent=1) + "\n")
    for r in rows:
        a, d = r["accuracy"], r["minus_6_layers"]
        print(
            f"layers {r['layers']}: validation {a['estimate']:.1f} [{a['low']:.1f}, {a['high']:.1f}] (n {a['n']}), "
            f"minus 6 layers {d['estimate']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}], "
            f"{r['pairs_per_s']:.1f} pairs/s ({r['speed_vs_6_layers']}x)"
        )
    print(f"-> {args.result}")


if __name__ == "__main__":
    main()
