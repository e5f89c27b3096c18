"""A first training run as a user starts it, timed from outside: the `rewardsmith train` command against a script
that trains TRL's RewardTrainer, both whole processes (imports, reading the file, model load, tokenisation, training,
and whatever else each writes) on the same pairs.

The work is equal: the first N hh-rlhf/harmless-base training pairs that both tools take whole at max_length
(bench_train_throughput.load_pairs), written once to a JSONL file that both processes read; MiniLM, dropout 0, 16
pairs a step, one epoch, lr 2e-5, fp32 or bf16 autocast, no checkpoints. rewardsmith trains on every pair of the
file (`--set data.train_fraction=1.0`, so it has no held-out set to score) and writes what its command always
writes (the run folder, its report and plots); TRL trains with its defaults and saves nothing. Each run is a fresh
process into a fresh folder; the tools alternate, who goes first rotating per round; per precision the median of
the paired ratios TRL seconds / rewardsmith seconds. rewardsmith's own summary splits its seconds into the
training loop and the rest (load, tokenise, report), recorded beside.

    .venv/bin/python benchmarks/bench_train_process.py --pairs 480 --max-length 256 --precision fp32 bf16 --rounds 3

Writes benchmarks/results/train_process.json and prints a table.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, rotated, spread, write_results

from rewardsmith.models.precision import bf16_native

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "train_process.json"
EXE = str(HERE.parent / ".venv" / "bin" / "rewardsmith")
TOOLS = ("rewardsmith", "trl")
BATCH, LR = 16, 2e-5


def write_pairs(path: Path, n: int, max_length: int, data_dir: str | None) -> None:
    """The first n pairs both tools take whole, as a JSONL file (chat-list prompts) both processes read."""
    from bench_train_throughput import load_pairs

    rows = [
        {
            "prompt": [{"role": t.role, "content": t.content} for t in p.prompt],
            "chosen": p.chosen,
            "rejected": p.rejected,
        }
        for p in load_pairs(n, data_dir, max_length)
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def trl_main(pairs_file: str, max_length: int, bf16: bool) -> None:
    """The TRL process: read the file, train (bench_train_throughput.trl_trainer, TRL's defaults), exit."""
    from bench_train_throughput import trl_trainer

    from rewardsmith.data.schema import PreferencePair, Turn

    rows = [json.loads(line) for line in Path(pairs_file).read_text(encoding="utf-8").splitlines()]
    pairs = [
        PreferencePair(tuple(Turn(t["role"], t["content"]) for t in r["prompt"]), r["chosen"], r["rejected"])
        for r in rows
    ]
    with tempfile.TemporaryDirectory() as tmp:
        trainer = trl_trainer(pairs, max_length, bf16, tmp)
        start = time.perf_counter()
        trainer.train()
        print(json.dumps({"pairs": len(trainer.train_dataset), "loop_seconds": round(time.perf_counter() - start, 2)}))


def timed(tool: str, pairs_file: Path, max_length: int, precision: str) -> dict[str, Any]:
    """One fresh process of `tool`, its wall seconds from outside, and what it says of its own loop."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="rewardsmith-bench-") as tmp:
        run = Path(tmp) / "run"
        if tool == "rewardsmith":
            cmd = [EXE, "train", "--train", "file", "--path", str(pairs_file), "--backbone", "minilm",
                   "--template", "hh", "--max-length", str(max_length), "--batch-size", str(BATCH), "--lr", str(LR),
                   "--epochs", "1", "--bf16" if precision == "bf16" else "--fp32", "--set", "data.train_fraction=1.0",
                   "--set", "train.checkpoint_every=0", "--out", str(run), "-q"]  # fmt: skip
        else:
            cmd = [sys.executable, __file__, "--trl-worker", str(pairs_file), "--max-length", str(max_length),
                   "--precision", precision]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{tool} ({precision}) failed:\n{done.stderr[-3000:]}")
        if tool == "rewardsmith":
            train = json.loads((run / "metrics.json").read_text(encoding="utf-8"))["train"]
            return {"seconds": round(wall, 2), "pairs": train["pairs"], "loop_seconds": round(train["seconds"], 2)}
        return {"seconds": round(wall, 2), **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=480)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--trl-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trl_worker:
        trl_main(args.trl_worker, args.max_length, args.precision[0] == "bf16")
        return
    out: dict[str, Any] = {
        "benchmark": "train_process",
        "command": "python benchmarks/bench_train_process.py " + " ".join(sys.argv[1:]),
        "pairs": args.pairs,
        "max_length": args.max_length,
        "batch_size": BATCH,
        "rounds": args.rounds,
        "results": [],
    }
    rows = []
    with tempfile.TemporaryDirectory(prefix="rewardsmith-bench-pairs-") as tmp:
        pairs_file = Path(tmp) / "pairs.jsonl"
        write_pairs(pairs_file, args.pairs, args.max_length, args.data_dir)
        for precision in args.precision:
            if precision == "bf16" and not bf16_native("cpu"):
                reason = (
                    "this CPU has no native bf16: rewardsmith runs a bf16 request in fp32 (models/precision.py), "
                    "TRL in emulated bf16, so the two would not time the same work"
                )
                out["results"].append({"precision": precision, "not_run": reason})
                rows.append([precision, "not run", "", "", "", reason])
                continue
            runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TOOLS}
            for r in range(args.rounds):
                for tool in rotated(list(TOOLS), r):
                    runs[tool].append(timed(tool, pairs_file, args.max_length, precision))
                    print(f"{precision} round {r + 1} {tool}: {runs[tool][-1]}", file=sys.stderr, flush=True)
            ratio = spread([t["seconds"] / o["seconds"] for o, t in zip(runs["rewardsmith"], runs["trl"], strict=True)])
            medians = {t: statistics.median(x["seconds"] for x in runs[t]) for t in TOOLS}
            loops = {t: statistics.median(x["loop_seconds"] for x in runs[t]) for t in TOOLS}
            result = {"precision": precision, "runs": runs, "trl_over_rewardsmith_seconds": ratio}
            out["results"].append({**result, "median_seconds": medians, "median_loop_seconds": loops})
            spread_text = f"{ratio['median']:.2f}x ({ratio['min']:.2f}-{ratio['max']:.2f})"
            rows.append(
                [precision, medians["rewardsmith"], loops["rewardsmith"], medians["trl"], loops["trl"], spread_text]
            )
    table = markdown_table(
        ["precision", "rewardsmith s", "its loop s", "TRL s", "its loop s", "TRL / rewardsmith, whole process"],
        "lrrrrr",
        rows,
    )
    write_results(RESULTS, out, "\n".join(table))


if __name__ == "__main__":
    main()
