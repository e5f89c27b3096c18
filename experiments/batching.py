"""Does length-grouped batching change what the default recipe learns? configs/train-harmless.yaml trained with
train.batches length-grouped (the default) and random, seeds 0-2, scored on the held-out and validation pairs
of hh-rlhf/harmless-base; the difference grouped - random with hierarchical bootstrap CIs (seeds, then pairs).
Also: the default recipe's held-out accuracy now against the committed figure it had before forward groups
(docs/results/train-harmless.json, seed 0).

    python experiments/batching.py run --seeds 0 1 2
    python experiments/batching.py summarise --seeds 0 1 2

Runs go to runs/batching/; the summary to docs/results/batching.json (tools/blocks_speed.py renders it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.evaluate.transfer import paired_differences
from rewardsmith.stats import mean_interval

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "batching"
OUT = ROOT / "docs" / "results" / "batching.json"
BEFORE = ROOT / "docs" / "results" / "train-harmless.json"
ARMS = ("length-grouped", "random")
N_BOOT = 2000


def run_dir(arm: str, seed: int) -> Path:
    return RUNS / f"harmless-{arm}-s{seed}"


def command(arm: str, seed: int) -> list[str]:
    return [
        str(ROOT / ".venv" / "bin" / "rewardsmith"),
        "train",
        "--config",
        "configs/train-harmless.yaml",
        "--seed",
        str(seed),
        "--set",
        f"train.batches={arm}",
        "--set",
        "data.eval=[]",
        "--quiet",
        "--out",
        str(run_dir(arm, seed).relative_to(ROOT)),
    ]


def run_all(seeds: list[int]) -> None:
    for seed in seeds:
        for arm in ARMS:
            if (run_dir(arm, seed) / "scores.json").exists():
                continue
            log = run_dir(arm, seed).with_suffix(".log")
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as fh:
                rc = subprocess.call(command(arm, seed), cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
            print(f"{'done' if rc == 0 else f'FAILED ({rc}), see {log}'}: {arm} seed {seed}", flush=True)


def _correct(scores: dict[str, Any]) -> np.ndarray:
    c, r = np.asarray(scores["chosen"]), np.asarray(scores["rejected"])
    return np.where(c > r, 1.0, np.where(c == r, 0.5, 0.0))


def summarise(seeds: list[int]) -> dict[str, Any]:
    scores = {a: [json.loads((run_dir(a, s) / "scores.json").read_text()) for s in seeds] for a in ARMS}
    sets = list(scores[ARMS[0]][0])
    for a in ARMS:
        for r in scores[a]:
            for s in sets:
                if r[s]["pair_id"] != scores[ARMS[0]][0][s]["pair_id"]:
                    raise SystemExit(f"{a}: {s} holds other pairs than the {ARMS[0]} seed-{seeds[0]} run")
    correct = {a: {s: np.stack([_correct(r[s]) for r in scores[a]]) for s in sets} for a in ARMS}
    levels: dict[str, Any] = {}
    for a in ARMS:
        levels[a] = {}
        for s in sets:
            est = mean_interval(correct[a][s], N_BOOT, 0, scale=100.0)  # seeds, then pairs
            levels[a][s] = {
                "accuracy": round(est.estimate, 2),
                "ci": [round(est.low, 2), round(est.high, 2)],
                "per_seed": [round(100 * float(x), 2) for x in correct[a][s].mean(axis=1)],
            }
    diff = paired_differences(correct, "random", n_boot=N_BOOT)["length-grouped"]
    held = next(s for s in sets if s.endswith("(held-out)"))
    before = json.loads(BEFORE.read_text())["eval"][held]
    now = json.loads((run_dir("length-grouped", 0) / "metrics.json").read_text())["eval"][held]
    seconds = {
        a: [json.loads((run_dir(a, s) / "metrics.json").read_text())["train"]["seconds"] for s in seeds] for a in ARMS
    }
    return {
        "config": "configs/train-harmless.yaml",
        "seeds": seeds,
        "sets": sets,
        "pairs": {s: len(scores[ARMS[0]][0][s]["pair_id"]) for s in sets},
        "levels": levels,
        "grouped_minus_random": {
            s: {"points": round(diff[f"d.{s}"], 2), "ci": [round(x, 2) for x in diff[f"d.{s}_ci"]]} for s in sets
        },
        "default_seed0": {
            "set": held,
            "before": {
                "accuracy": round(before["accuracy"], 2),
                "ci": [round(x, 2) for x in before["accuracy_ci"]],
                "n": before["n"],
            },
            "now": {
                "accuracy": round(now["accuracy"], 2),
                "ci": [round(x, 2) for x in now["accuracy_ci"]],
                "n": now["n"],
            },
            "within_before_ci": before["accuracy_ci"][0] <= now["accuracy"] <= before["accuracy_ci"][1],
        },
        "train_seconds_shared_cpu": seconds,
        "command": "; ".join(
            f"python experiments/batching.py {step} --seeds {' '.join(map(str, seeds))}"
            for step in ("run", "summarise")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["run", "summarise"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    if args.step == "run":
        run_all(args.seeds)
        return
    out = summarise(args.seeds)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("grouped_minus_random", "default_seed0")}, indent=1))


if __name__ == "__main__":
    main()
