"""ICRM training speed through the shared Trainer against the episode loop it replaced.

One measured run = one fresh process training a set-mode ICRM (embedded MiniLM, frozen, cached embeddings of
the offline synthetic suite) for --steps optimiser steps of --batch-size episodes with up to 64
demonstrations each. The time counted is the training loop only (after embeddings are cached), as both
implementations report it. "current" is this checkout; "previous" is the separate ICRM loop as it stood before
the consolidation, read from a source folder (a `git worktree` of that commit, see --previous-src). The two
alternate, each in its own process, for --pairs pairs; the table gives steps/s, the median paired ratio
current / previous (above 1 = the shared Trainer is faster) and its range.

    git worktree add /tmp/rewardsmith-previous 4a8731e
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_icrm_trainer.py --previous-src /tmp/rewardsmith-previous/src

Writes benchmarks/results/icrm_trainer.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "icrm_trainer.json"
SOURCES = ["synthetic/source", "synthetic/target-reversed", "synthetic/target-clean"]


def _measure(steps: int, batch_size: int) -> dict[str, float]:
    """Runs inside the child process: trains and returns loop seconds and steps/s."""
    import torch

    torch.manual_seed(0)
    from rewardsmith.icrm.config import ICRMRunConfig

    cfg = ICRMRunConfig()
    cfg.episodes.sources = SOURCES
    cfg.episodes.source_splits = {}
    cfg.episodes.pairs_per_source = 600
    out = Path(tempfile.mkdtemp(prefix="icrm-bench-"))
    from rewardsmith.icrm import train as icrm_train

    if hasattr(cfg.train, "episodes_per_step"):  # the previous, separate loop
        cfg.train.steps, cfg.train.episodes_per_step, cfg.train.checkpoint_every = steps, batch_size, 0
        cfg.train.progress, cfg.model.bf16 = False, True
        result = icrm_train.train_icrm(cfg, out)
        seconds = result.seconds
    else:
        cfg.train.max_steps, cfg.train.batch_size, cfg.train.checkpoint_every = steps, batch_size, 0
        cfg.train.progress, cfg.train.bf16 = False, True
        seconds = icrm_train.train_icrm(cfg, out).train.seconds
    return {"seconds": seconds, "steps_per_s": steps / seconds}


def _child(impl: str, src: Path, steps: int, batch_size: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    code = (
        f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        f"from bench_icrm_trainer import _measure; print(json.dumps(_measure({steps}, {batch_size})))"
    )
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{impl} run failed:\n{done.stderr[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process_seconds": time.perf_counter() - t0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--previous-src", type=Path, required=True, help="src/ folder of the previous commit")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=3, help="alternating (previous, current) pairs of runs")
    args = parser.parse_args()
    current_src = Path(__file__).resolve().parents[1] / "src"
    runs: dict[str, list[dict[str, float]]] = {"previous": [], "current": []}
    for i in range(args.pairs):
        order = [("previous", args.previous_src), ("current", current_src)]
        for impl, src in order if i % 2 == 0 else order[::-1]:
            runs[impl].append(_child(impl, src, args.steps, args.batch_size))
            print(f"pair {i + 1} {impl}: {runs[impl][-1]['steps_per_s']:.1f} steps/s", file=sys.stderr)
    ratios = [c["steps_per_s"] / p["steps_per_s"] for c, p in zip(runs["current"], runs["previous"], strict=True)]
    result = {
        "command": "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_icrm_trainer.py --previous-src "
        f"<worktree of the previous commit>/src --steps {args.steps} --batch-size {args.batch_size} "
        f"--pairs {args.pairs}",
        "setting": {
            "model": "minilm, set mode, frozen, bf16 embeddings",
            "sources": SOURCES,
            "steps": args.steps,
            "episodes_per_step": args.batch_size,
            "max_demos": 64,
        },
        "runs": runs,
        "ratio_current_over_previous": {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
            "per_pair": ratios,
        },
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("| implementation | steps/s (median) | runs |\n|---|---:|---:|")
    for impl in ("previous", "current"):
        print(f"| {impl} | {statistics.median(r['steps_per_s'] for r in runs[impl]):.1f} | {len(runs[impl])} |")
    r = result["ratio_current_over_previous"]
    print(f"\ncurrent / previous: median {r['median']:.2f}x (range {r['min']:.2f}-{r['max']:.2f})")


if __name__ == "__main__":
    main()
