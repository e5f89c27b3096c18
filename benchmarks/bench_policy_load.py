"""Loading the embedded SmolLM2 (the policy of `bon`, `rl`, `sample` and `label`): read from its Q4_1 GGUF file by
transformers (de-quantised on every load) against read from the de-quantised cache folder (models/gguf.py), each
in its own fresh process, the two alternating, median of the rounds; plus the one-off build of the cache folder.

    .venv/bin/python benchmarks/bench_policy_load.py --rounds 3

Each worker process imports rewardsmith, loads the policy (`load_policy("smollm2")`) and reports the load's seconds;
the process's seconds are measured from outside. The GGUF variant runs with a cache folder that cannot be written (a
path under a file), the fallback a read-only home takes; the cache variant with a folder built before the rounds.
Writes benchmarks/results/policy_load.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, rotated, run_worker, spread, write_results

RESULTS = Path(__file__).resolve().parent / "results" / "policy_load.json"
VARIANTS = ("gguf", "cache")


def worker() -> None:
    from rewardsmith.rollouts.policy import load_policy

    start = time.perf_counter()
    policy = load_policy("smollm2")
    seconds = time.perf_counter() - start
    print(
        json.dumps({"load_seconds": round(seconds, 2), "parameters": sum(p.numel() for p in policy.model.parameters())})
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    import os

    with tempfile.TemporaryDirectory(prefix="rewardsmith-bench-") as tmp:
        blocked = Path(tmp) / "a-file"
        blocked.write_text("a file where the cache folder would go\n")
        caches = {"gguf": str(blocked / "cache"), "cache": str(Path(tmp) / "cache")}
        os.environ["REWARDSMITH_CACHE_DIR"] = caches["cache"]
        build = run_worker(__file__, ["--worker"], "the cache's build")  # the first load writes the folder
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for r in range(args.rounds):
            for variant in rotated(VARIANTS, r):
                os.environ["REWARDSMITH_CACHE_DIR"] = caches[variant]
                runs[variant].append(run_worker(__file__, ["--worker"], variant))
                print(f"round {r + 1} {variant}: {runs[variant][-1]['process_seconds']:.1f} s", flush=True)
    ratios = [g["process_seconds"] / c["process_seconds"] for g, c in zip(runs["gguf"], runs["cache"], strict=True)]
    load_ratios = [g["load_seconds"] / c["load_seconds"] for g, c in zip(runs["gguf"], runs["cache"], strict=True)]
    median = {
        v: {k: statistics.median(x[k] for x in runs[v]) for k in ("load_seconds", "process_seconds")} for v in VARIANTS
    }
    out = {
        "benchmark": "policy_load",
        "command": f"python benchmarks/bench_policy_load.py --rounds {args.rounds}",
        "rounds": args.rounds,
        "build": build,
        "runs": runs,
        "median": median,
        "gguf_over_cache_process": spread(ratios),
        "gguf_over_cache_load": spread(load_ratios),
    }
    rows = [[v, f"{median[v]['load_seconds']:.2f}", f"{median[v]['process_seconds']:.1f}"] for v in VARIANTS] + [
        ["cache build (once)", f"{build['load_seconds']:.2f}", f"{build['process_seconds']:.1f}"]
    ]
    table = "\n".join(markdown_table(["variant", "load s (median)", "process s (median)"], "lrr", rows))
    write_results(RESULTS, out, table + f"\nGGUF / cache, whole process: {spread(ratios)}")


if __name__ == "__main__":
    main()
