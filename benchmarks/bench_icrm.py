"""Set-mode ICRM scoring cost: 1,000 pairs under one standard with N = 64 demonstrations versus the same
pairs with no demonstrations, in one run.

Same model (set-mode BetaRewardModel on the embedded MiniLM; the heads' weights do not change the cost),
same pairs (held-out pku-saferlhf pairs, or the synthetic suite without a data directory), same
max_length, batch size and precision. The steered run starts with an empty demonstration cache, so it
pays for encoding the 64 demonstrations once; every pair then reuses the cached context vector. The two
conditions alternate (none, demos, none, demos, ...) and each one's best time counts. The ratio is taken on
the process's CPU time (one thread), which other processes on a shared machine do not inflate; wall-clock
times are recorded beside it. Target: ratio <= 1.2.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_icrm.py --pairs 1000 --demos 64 --repeats 2

Writes benchmarks/results/icrm.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from rewardsmith.config import ICRMModelConfig
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.sources import find_data_dir
from rewardsmith.data.splits import split_pairs
from rewardsmith.data.templates import encoder_for
from rewardsmith.icrm.scoring import DemoCache, ICRMScorer
from rewardsmith.models.factory import build_model

RESULTS = Path(__file__).parent / "results" / "icrm.json"


def load_pairs(n_pairs: int, n_demos: int) -> tuple[list[PreferencePair], list[PreferencePair], str]:
    """(targets, demonstrations, source): disjoint by the hash of the first human turn."""
    if find_data_dir() is not None:
        name = "pku-saferlhf/harmless"
        pairs = load_dataset(name, split="train").pairs + load_dataset(name, split="test").pairs
    else:
        name = "synthetic/source"
        pairs = load_dataset(name).pairs
    parts = split_pairs(pairs, {"targets": 0.8, "demos": 0.2}, salt="bench-icrm")
    demos = [p.swapped().with_label(1.0) for p in parts["demos"][:n_demos]]  # a flipped standard
    return parts["targets"][:n_pairs], demos, name


def timed(scorer: ICRMScorer, pairs: list[PreferencePair], demos: list[PreferencePair]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to score `pairs` under `demos`."""
    scorer.cache = DemoCache()  # every steered run encodes its demonstrations again
    wall, cpu = time.perf_counter(), time.process_time()
    scorer.score_pairs(pairs, demos)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--demos", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    args = parser.parse_args()

    pairs, demos, source = load_pairs(args.pairs, args.demos)
    cfg = ICRMModelConfig(backbone="minilm", template="hh", mode="set", max_length=args.max_length)
    model, tok = build_model(cfg)
    scorer = ICRMScorer(model, encoder_for(tok, cfg), args.batch_size, bf16=args.precision == "bf16")
    scorer.score_pairs(pairs[:32], demos[:4])  # warm-up: allocator, kernels, tokenizer caches
    wall: dict[str, list[float]] = {"none": [], "demos": []}
    cpu: dict[str, list[float]] = {"none": [], "demos": []}
    for _ in range(args.repeats):
        for key, condition in (("none", []), ("demos", demos)):
            w, c = timed(scorer, pairs, condition)
            wall[key].append(w)
            cpu[key].append(c)
    best = {k: min(v) for k, v in cpu.items()}
    best_wall = {k: min(v) for k, v in wall.items()}
    ratio = best["demos"] / best["none"]
    result: dict[str, Any] = {
        "benchmark": "icrm set-mode scoring under N demonstrations vs none",
        "source": source,
        "pairs": len(pairs),
        "demos": len(demos),
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "precision": args.precision,
        "repeats": args.repeats,
        "cpu_seconds": cpu,
        "wall_seconds": wall,
        "best_cpu_seconds": best,
        "best_wall_seconds": best_wall,
        "pairs_per_cpu_s": {k: len(pairs) / v for k, v in best.items()},
        "ratio": ratio,
        "wall_ratio": best_wall["demos"] / best_wall["none"],
        "target_ratio": 1.2,
        "passes": ratio <= 1.2,
        # Without the cache every pair would re-encode its demonstrations: 2P(N + 1) backbone passes.
        "backbone_passes": {
            "none": 2 * len(pairs),
            "demos_cached": 2 * len(pairs) + 2 * len(demos),
            "demos_uncached": 2 * len(pairs) * (len(demos) + 1),
        },
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'condition':<22}{'CPU s':>10}{'wall s':>10}{'pairs/CPU s':>13}")
    for k in ("none", "demos"):
        label = "no demonstrations" if k == "none" else f"N={len(demos)} (cached)"
        print(f"{label:<22}{best[k]:>10.2f}{best_wall[k]:>10.2f}{len(pairs) / best[k]:>13.1f}")
    print(
        f"ratio (CPU) {ratio:.3f}, wall {result['wall_ratio']:.3f} (target <= 1.2): "
        f"{'pass' if ratio <= 1.2 else 'FAIL'} -> {RESULTS}"
    )


if __name__ == "__main__":
    main()
