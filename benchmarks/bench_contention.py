"""Whole commands timed from outside on a machine with other work: `make demo`'s command idle and beside one
CPU-bound process, and a short training run with OpenMP's threads waiting passively (the `rewardsmith` command's
default, rewardsmith/launch.py) against spinning (OMP_WAIT_POLICY=ACTIVE), each beside one CPU-bound process.

    .venv/bin/python benchmarks/bench_contention.py [--rounds 3] [--only demo threads]

Every run is a fresh process into a fresh folder (a first run, as a user's is); variants alternate, who goes first
rotating per round; medians over rounds. The load beside is one Python process spinning on one core (what "one
CPU-bound process" means here). Writes benchmarks/results/contention.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import rotated, spread, write_results

HERE = Path(__file__).resolve().parent
EXE = str(HERE.parent / ".venv" / "bin" / "rewardsmith")
RESULT = HERE / "results" / "contention.json"
# The short training run of the threads comparison: MiniLM on the packaged sample's harmless pairs.
TRAIN = ["train", "--train", "synthetic/source", "--backbone", "minilm", "--max-steps", "30", "--train-pairs", "480",
         "--eval-pairs", "100", "--max-length", "128", "--quiet"]  # fmt: skip


class Load:
    """One CPU-bound process beside the measured one (a Python loop spinning on one core)."""

    def __enter__(self) -> Load:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *_: object) -> None:
        self.proc.kill()
        self.proc.wait()


def timed(args: list[str], env: dict[str, str], steps: list[dict[str, float]] | None = None) -> float:
    """Seconds of one fresh `rewardsmith` process, its --out a new folder; with `steps`, the run's own seconds per
    step (metrics.json's step_seconds, the demo's) are appended to it."""
    with tempfile.TemporaryDirectory(prefix="rewardsmith-bench-") as tmp:
        start = time.perf_counter()
        subprocess.run(
            [EXE, *args, "--out", str(Path(tmp) / "run")],
            check=True,
            capture_output=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        )
        seconds = time.perf_counter() - start
        if steps is not None:
            steps.append(json.loads((Path(tmp) / "run" / "metrics.json").read_text(encoding="utf-8"))["step_seconds"])
        return seconds


def _summary(values: list[float]) -> dict[str, Any]:
    return {"median_s": round(statistics.median(values), 1), "runs_s": [round(x, 1) for x in values]}


def demo(rounds: int) -> dict[str, Any]:
    """`rewardsmith demo` idle and beside one CPU-bound process."""
    seconds: dict[str, list[float]] = {"idle": [], "beside one CPU-bound process": []}
    steps: dict[str, list[dict[str, float]]] = {k: [] for k in seconds}
    for r in range(rounds):
        for variant in rotated(list(seconds), r):
            if variant == "idle":
                seconds[variant].append(timed(["demo"], {}, steps[variant]))
            else:
                with Load():
                    seconds[variant].append(timed(["demo"], {}, steps[variant]))
    return {k: {**_summary(v), "step_seconds": steps[k]} for k, v in seconds.items()}


def threads(rounds: int) -> dict[str, Any]:
    """A short training run beside one CPU-bound process, OpenMP threads waiting passively against spinning."""
    variants = {"PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}, "ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"}}
    seconds: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(rounds):
        for variant in rotated(list(variants), r):
            with Load():
                seconds[variant].append(timed(TRAIN, variants[variant]))
    ratios = [a / p for a, p in zip(seconds["ACTIVE"], seconds["PASSIVE"], strict=True)]
    return {
        **{
            k: {"median_s": round(statistics.median(v), 1), "runs_s": [round(x, 1) for x in v]}
            for k, v in seconds.items()
        },
        "active_over_passive": spread(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=["demo", "threads"], default=["demo", "threads"])
    args = parser.parse_args()
    out: dict[str, Any] = {
        "command": "python benchmarks/bench_contention.py --rounds " + str(args.rounds),
        "rounds": args.rounds,
    }
    lines = ["| measure | variant | median s | runs |", "|---|---|---|---|"]
    if "demo" in args.only:
        out["demo"] = demo(args.rounds)
        lines += [f"| make demo | {k} | {v['median_s']} | {v['runs_s']} |" for k, v in out["demo"].items()]
    if "threads" in args.only:
        out["threads"] = threads(args.rounds)
        lines += [
            f"| train 30 steps, one CPU-bound process beside | OMP_WAIT_POLICY={k} | {v['median_s']} | {v['runs_s']} |"
            for k, v in out["threads"].items()
            if k in ("PASSIVE", "ACTIVE")
        ]
        lines.append(
            f"ACTIVE / PASSIVE seconds, median of paired rounds: {out['threads']['active_over_passive']['median']}"
        )
    write_results(RESULT, out, "\n".join(lines))


if __name__ == "__main__":
    main()
