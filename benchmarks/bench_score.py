"""Scoring speed as a user sees it: `rewardsmith score` on a file of pairs against the bare forward limit of the
same model on the same batches, every measured run in its own fresh process.

The model is the embedded MiniLM with a seeded head, saved once as a rewardsmith model folder; the input is
--pairs hh-rlhf/harmless-base pairs (prompt, chosen, rejected) as JSONL. Per round, two processes alternate:
- score: `jobs.score.score_file` (what `rewardsmith score` runs): reads the file, loads the model (timed apart),
  encodes, scores through the shared batched path (length-sorted batches of 64, bf16 autocast on request) and
  writes the output file; the scoring time counts encoding and writing;
- bare: the same model loaded the same way, the same texts encoded, sorted and padded into the same batches
  before the clock, then only the forward passes under inference mode.

Reported per max_length and precision: pairs/s of each, model load seconds, and the median paired ratio
score / bare with its range.

    .venv/bin/python benchmarks/bench_score.py --pairs 1000 --max-length 128 256 --precision fp32 bf16 --rounds 3

Writes benchmarks/results/score.json and prints a table.
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

from rewardsmith.evaluate.formatting import with_range

RESULTS = Path(__file__).resolve().parent / "results" / "score.json"
BATCH = 64


def prepare(folder: Path, n: int, max_length: int, data_dir: str | None) -> tuple[Path, Path]:
    """A saved MiniLM reward model (seeded head) and a JSONL file of n pairs."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.models import build_reward_model
    from rewardsmith.models.factory import save_model

    cfg = ModelConfig(backbone="minilm", max_length=max_length, template="hh")
    model, tok = build_reward_model(cfg, seed=0)
    model_dir = folder / f"model-{max_length}"
    save_model(model, tok, model_dir, cfg)
    pairs = load_dataset("hh-rlhf/harmless-base", data_dir=data_dir).pairs[:n]
    rows = folder / "pairs.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"prompt": p.prompt_text(), "chosen": p.chosen, "rejected": p.rejected}) + "\n" for p in pairs
        ),
        encoding="utf-8",
    )
    return model_dir, rows


def measure_score(model_dir: Path, rows: Path, bf16: bool) -> dict[str, Any]:
    from rewardsmith.inference import InferenceOptions
    from rewardsmith.jobs.score import score_file

    with tempfile.TemporaryDirectory() as tmp:
        options = InferenceOptions(batch_size=BATCH, bf16=bf16)
        result = score_file(model_dir, rows, Path(tmp) / "out.jsonl", options=options, progress=False)
    m = result.metrics
    return {
        "pairs": m["rows"],
        "load_seconds": round(m["load_seconds"], 3),
        "seconds": round(m["score_seconds"], 3),
        "pairs_per_s": round(m["rows"] / m["score_seconds"], 2),
    }


def measure_bare(model_dir: Path, rows: Path, bf16: bool) -> dict[str, Any]:
    import torch

    from rewardsmith.data.collate import pad_texts, sorted_batches
    from rewardsmith.evaluate.scoring import encode_pair_texts
    from rewardsmith.inference import read_score_rows
    from rewardsmith.models.loading import load_reward_model

    _, pairs, _, _ = read_score_rows(rows)
    t0 = time.perf_counter()
    loaded = load_reward_model(model_dir)
    model = loaded.model
    load = time.perf_counter() - t0
    texts = encode_pair_texts(loaded.encoder(), pairs)
    batches = [
        pad_texts([texts[i] for i in idx], loaded.pad_id)
        for idx in sorted_batches([len(t.input_ids) for t in texts], BATCH)
    ]
    model.eval()
    t1 = time.perf_counter()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for batch in batches:
            model(batch)
    seconds = time.perf_counter() - t1
    return {
        "pairs": len(pairs),
        "load_seconds": round(load, 3),
        "seconds": round(seconds, 3),
        "pairs_per_s": round(len(pairs) / seconds, 2),
    }


MEASURES = {"score": measure_score, "bare": measure_bare}


def drive(args: argparse.Namespace) -> None:

    rows_out = []
    with tempfile.TemporaryDirectory() as tmp:
        for max_length in args.max_length:
            model_dir, rows = prepare(Path(tmp), args.pairs, max_length, args.data_dir)
            for precision in args.precision:
                runs: dict[str, list[dict[str, Any]]] = {"score": [], "bare": []}
                for r in range(args.rounds):
                    for tool in rotated(("score", "bare"), r):
                        args_ = [
                            "--worker",
                            tool,
                            "--model-dir",
                            str(model_dir),
                            "--rows",
                            str(rows),
                            "--precision",
                            precision,
                        ]
                        runs[tool].append(run_worker(__file__, args_, f"{tool} ({precision})"))
                        print(
                            f"{max_length} {precision} round {r + 1} {tool}: {runs[tool][-1]['pairs_per_s']:.1f} "
                            "pairs/s",
                            file=sys.stderr,
                            flush=True,
                        )
                ratios = [s["pairs_per_s"] / b["pairs_per_s"] for s, b in zip(runs["score"], runs["bare"], strict=True)]
                rows_out.append(
                    {
                        "max_length": max_length,
                        "precision": precision,
                        "runs": runs,
                        "median_pairs_per_s": {t: statistics.median(x["pairs_per_s"] for x in runs[t]) for t in runs},
                        "median_load_seconds": statistics.median(x["load_seconds"] for x in runs["score"]),
                        "fraction_of_bare": spread(ratios),
                    }
                )
    out = {
        "benchmark": "score",
        "model": "minilm (embedded), seeded head",
        "pairs": args.pairs,
        "batch_size": BATCH,
        "rounds": args.rounds,
        "results": rows_out,
        "command": f".venv/bin/python benchmarks/bench_score.py --pairs {args.pairs} --max-length "
        f"{' '.join(map(str, args.max_length))} --precision {' '.join(args.precision)} "
        f"--rounds {args.rounds}",
    }
    write_results(RESULTS, out, table(out))


def table(out: dict[str, Any]) -> str:
    header = ["tokens", "precision", "score pairs/s", "bare forward pairs/s", "score / bare", "model load s"]
    rows = [
        [
            r["max_length"],
            r["precision"],
            f"{r['median_pairs_per_s']['score']:.1f}",
            f"{r['median_pairs_per_s']['bare']:.1f}",
            with_range(r["fraction_of_bare"], percent=True),
            f"{r['median_load_seconds']:.1f}",
        ]
        for r in out["results"]
    ]
    return "\n".join(markdown_table(header, "rlrrrr", rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--max-length", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--worker", choices=tuple(MEASURES), help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(MEASURES[args.worker](args.model_dir, args.rows, args.precision[0] == "bf16")))
        return
    drive(args)


if __name__ == "__main__":
    main()
