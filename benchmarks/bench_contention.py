"""Whole commands timed from outside on a machine with other work: `make demo`'s command idle and beside one
CPU-bound process, and a short training run, idle and beside one CPU-bound process, with OpenMP's threads waiting
passively (OMP_WAIT_POLICY=PASSIVE), spinning (ACTIVE), and as the `rewardsmith` command chooses when the variable
is unset (rewardsmith/launch.py: ACTIVE on an idle machine, PASSIVE beside other work; the run's choice is read back
from its metrics.json).

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


def timed(
    args: list[str],
    env: dict[str, str | None],
    steps: list[dict[str, float]] | None = None,
    chosen: list[str | None] | None = None,
) -> float:
    """Seconds of one fresh `rewardsmith` process, its --out a new folder, under os.environ with `env` over it (a
    None value unsets the variable); with `steps`, the run's own seconds per step (metrics.json's step_seconds, the
    demo's) are appended to it, with `chosen` the OMP_WAIT_POLICY it ran under (metrics.json's environment)."""
    merged = {**os.environ, "HF_HUB_OFFLINE": "1", **env}
    with tempfile.TemporaryDirectory(prefix="rewardsmith-bench-") as tmp:
        start = time.perf_counter()
        subprocess.run(
            [EXE, *args, "--out", str(Path(tmp) / "run")],
            check=True,
            capture_output=True,
            env={k: v for k, v in merged.items() if v is not None},
        )
        seconds = time.perf_counter() - start
        metrics = json.loads((Path(tmp) / "run" / "metrics.json").read_text(encoding="utf-8"))
        if steps is not None:
            steps.append(metrics["step_seconds"])
        if chosen is not None:
            chosen.append(metrics["environment"].get("omp_wait_policy"))
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


# The threads comparison's variants: OMP_WAIT_POLICY as set for the run; None leaves it unset (the command chooses).
POLICIES: dict[str, dict[str, str | None]] = {
    "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
    "unset": {"OMP_WAIT_POLICY": None},
}
CONDITIONS = ("idle", "beside one CPU-bound process")


def threads(rounds: int) -> dict[str, Any]:
    """A short training run, idle and beside one CPU-bound process, under each OMP_WAIT_POLICY variant."""
    out: dict[str, Any] = {}
    for condition in CONDITIONS:
        seconds: dict[str, list[float]] = {k: [] for k in POLICIES}
        chosen: list[str | None] = []
        for r in range(rounds):
            for variant in rotated(list(POLICIES), r):
                record = chosen if variant == "unset" else None
                if condition == "idle":
                    seconds[variant].append(timed(TRAIN, POLICIES[variant], chosen=record))
                else:
                    with Load():
                        seconds[variant].append(timed(TRAIN, POLICIES[variant], chosen=record))
        out[condition] = {
            **{k: _summary(v) for k, v in seconds.items()},
            "unset_chose": chosen,
            "active_over_passive": spread([a / p for a, p in zip(seconds["ACTIVE"], seconds["PASSIVE"], strict=True)]),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=["demo", "threads"], default=["demo", "threads"])
    args = parser.parse_args()
    out: dict[str, Any] = {
        "command": "python benchmarks/bench_contention.py --rounds "
        + str(args.rounds)
        + ("" if set(args.only) == {"demo", "threads"} else " --only " + " ".join(args.only)),
        "rounds": args.rounds,
    }
    # A section not run this time is kept from the last results, with the command and machine that measured it.
    previous = json.loads(RESULT.read_text(encoding="utf-8")) if RESULT.exists() else {}
    for section in ("demo", "threads"):
        if section not in args.only and section in previous:
            out[section] = previous[section]
            out.setdefault("kept", {})[section] = previous.get("kept", {}).get(section) or {
                "command": previous.get("command"),
                "machine": previous.get("machine"),
            }
    lines = ["| measure | variant | median s | runs |", "|---|---|---|---|"]
    if "demo" in args.only:
        out["demo"] = demo(args.rounds)
        lines += [f"| make demo | {k} | {v['median_s']} | {v['runs_s']} |" for k, v in out["demo"].items()]
    if "threads" in args.only:
        out["threads"] = threads(args.rounds)
        for condition, result in out["threads"].items():
            lines += [
                f"| train 30 steps, {condition} | OMP_WAIT_POLICY={k} | {r['median_s']} | {r['runs_s']} |"
                for k, r in ((k, result[k]) for k in POLICIES)
            ]
        lines += [
            f"{condition}: ACTIVE / PASSIVE seconds, median of paired rounds {r['active_over_passive']['median']}; "
            f"unset chose {r['unset_chose']}"
            for condition, r in out["threads"].items()
        ]
    write_results(RESULT, out, "\n".join(lines))


if __name__ == "__main__":
    main()
