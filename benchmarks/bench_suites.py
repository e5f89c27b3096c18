"""Benchmark scoring speed: the scoring phase of `rewardsmith bench` against the bare forward of the same model on
the same distinct texts, every measured run in its own fresh process.

The model is the embedded MiniLM with a seeded head, saved once as a rewardsmith model folder (HH template, as the
shipped models); the texts are the distinct (prompt, response) texts of the RM-Bench and local suites on the data
here (--limit rows per subset, the same rows for both). Per round, two processes alternate (who goes first
rotates):
- bench: `jobs.bench.run_bench` (what `rewardsmith bench --suite rm-bench --suite local` runs): loads the suites,
  loads the model (timed apart), then scores every distinct text once through the one inference path (encoding,
  length-sorted batches of 64, the forward passes); its texts/s are the distinct texts over the scoring seconds
  the job records, and the counters say how many texts the suites requested and how many were reused;
- bare: `transformers.AutoModel` on the model folder's backbone plus the head read from heads.safetensors; the
  same texts encoded, sorted and padded into the same batches before the clock, then only the forward passes,
  mean pooling over the response tokens and the head (no rewardsmith code in the loop), under inference mode.

Under bf16 a third process runs the bare loop with rewardsmith's attention (models/attention.py runs the
attention core of MiniLM's 32-wide heads in fp32 under CPU bf16 autocast), which tells the cost of that kernel
choice apart from the tool's own work. The bare rewards are checked against the bench scores (max abs difference
recorded). Before measuring, the
1-minute load average is polled every 30 s (for at most --load-wait seconds, default 20 min) until it is below
--load-target (default 1.0); on a shared machine `--load-wait 0` measures at once. Either way the JSON records
the load seen, and each run the load before and after it: the paired ratios of alternating fresh processes are
what holds under load, not the absolute rates.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_suites.py --limit 15 --precision fp32 bf16 --rounds 3

Writes benchmarks/results/suites.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, rotated, run_worker, spread, write_results

from rewardsmith.evaluate.formatting import with_range

RESULTS = Path(__file__).resolve().parent / "results" / "suites.json"
BATCH = 64
MAX_LENGTH = 256
SUITES = ("rm-bench", "local")
LOAD_TARGET, LOAD_POLL_S, LOAD_WAIT_MAX_S = 1.0, 30, 20 * 60  # defaults of --load-target / --load-wait


def load_1m() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def wait_for_quiet_machine(target: float = LOAD_TARGET, max_wait_s: float = LOAD_WAIT_MAX_S) -> dict[str, Any]:
    """Polls the 1-minute load every LOAD_POLL_S seconds until it is below `target`, for at most `max_wait_s`
    seconds (0: not at all); returns what was seen {target_1m, max_wait_s, at_start_1m,
    when_measuring_started_1m, waited_s, settled}."""
    start = time.monotonic()
    first = load_1m()
    seen = first
    while seen >= target and time.monotonic() - start < max_wait_s:
        print(f"load {seen:.2f} >= {target}: waiting", file=sys.stderr, flush=True)
        time.sleep(min(LOAD_POLL_S, max(max_wait_s - (time.monotonic() - start), 0.0)))
        seen = load_1m()
    return {
        "target_1m": target,
        "max_wait_s": max_wait_s,
        "at_start_1m": first,
        "when_measuring_started_1m": seen,
        "waited_s": round(time.monotonic() - start),
        "settled": seen < target,
    }


def prepare(folder: Path) -> Path:
    """A saved MiniLM reward model with a seeded head."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.models import build_reward_model
    from rewardsmith.models.factory import save_model

    cfg = ModelConfig(backbone="minilm", max_length=MAX_LENGTH, template="hh")
    model, tok = build_reward_model(cfg, seed=0)
    return save_model(model, tok, folder / "model", cfg)


def measure_bench(model_dir: Path, limit: int, bf16: bool, data_dir: str | None) -> dict[str, Any]:
    from rewardsmith.inference import InferenceOptions
    from rewardsmith.jobs.bench import run_bench

    with tempfile.TemporaryDirectory() as tmp:
        result = run_bench(
            [str(model_dir)],
            list(SUITES),
            Path(tmp) / "run",
            data_dir=data_dir,
            limit=limit,
            n_boot=0,
            options=InferenceOptions(batch_size=BATCH, bf16=bf16),
            progress=False,
        )
    label = result.metrics["models"][0]
    info = result.metrics["model_info"][label]
    texts, timing = info["texts"], info["timing"]
    rm_bench = result.metrics["results"][label]["suites"]["rm-bench"]["measures"]
    return {
        "texts": texts,
        "load_seconds": timing["load_seconds"],
        "seconds": timing["score_seconds"],
        "texts_per_s": round(texts["scored"] / timing["score_seconds"], 2),
        "rm_bench_overall_avg": next(m["score"] for m in rm_bench if (m["subset"], m["metric"]) == ("overall", "avg")),
    }


def _bench_rewards(model_dir: Path, texts: list[Any], bf16: bool) -> Any:
    from rewardsmith.inference import InferenceOptions, load_inference

    return load_inference(model_dir, InferenceOptions(batch_size=BATCH, bf16=bf16)).score_texts(texts).rewards


def measure_bare_fp32_core(model_dir: Path, limit: int, bf16: bool, data_dir: str | None) -> dict[str, Any]:
    """The bare forward with rewardsmith's attention (models/attention.py: under CPU bf16 autocast the attention
    core of heads of at most 32 dims runs in fp32): the same kernels as the bench, to tell the cost of that kernel
    choice from the cost of the tool's own work."""
    return measure_bare(model_dir, limit, bf16, data_dir, fp32_core=True)


def measure_bare(
    model_dir: Path, limit: int, bf16: bool, data_dir: str | None, fp32_core: bool = False
) -> dict[str, Any]:
    import numpy as np
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel

    from rewardsmith.bench.runner import collect_texts, load_suites
    from rewardsmith.data.collate import pad_texts, sorted_batches
    from rewardsmith.models.loading import load_reward_model

    loaded_suites, _ = load_suites(data_dir, list(SUITES), limit=limit)
    texts, _, _ = collect_texts(loaded_suites)
    loaded = load_reward_model(model_dir)  # its encoder and pad id only: the tokens the bench scores
    encoder, pad_id = loaded.encoder(), loaded.pad_id
    encoded = [encoder.encode(prompt, response) for prompt, response in texts]
    order = list(sorted_batches([len(t.input_ids) for t in encoded], BATCH))
    batches = [pad_texts([encoded[i] for i in idx], pad_id) for idx in order]
    del loaded
    t0 = time.perf_counter()
    base = AutoModel.from_pretrained(
        str(model_dir), use_safetensors=True, dtype=torch.float32, attn_implementation="sdpa", add_pooling_layer=False
    ).eval()
    if fp32_core:
        from rewardsmith.models.attention import use_rewardsmith_attention

        use_rewardsmith_attention(base)
    head = load_file(str(model_dir / "heads.safetensors"))["head.weight"].float()  # (1, H)
    load = time.perf_counter() - t0
    rewards = torch.zeros(len(encoded))
    t1 = time.perf_counter()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for idx, batch in zip(order, batches, strict=True):
            hidden = base(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                token_type_ids=batch["token_type_ids"],
            ).last_hidden_state.float()
            weights = batch["response_mask"].unsqueeze(-1).float()
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
            with torch.autocast("cpu", enabled=False):  # the head in fp32, as the model runs it
                rewards[torch.as_tensor(idx)] = (pooled @ head.T).squeeze(-1)
    seconds = time.perf_counter() - t1
    # The same numbers as the bench path (checked outside the clock).
    diff = float(np.abs(rewards.double().numpy() - _bench_rewards(model_dir, texts, bf16)).max())
    return {
        "texts": len(encoded),
        "load_seconds": round(load, 3),
        "seconds": round(seconds, 3),
        "texts_per_s": round(len(encoded) / seconds, 2),
        "max_abs_diff_to_bench": diff,
    }


MEASURES = {"bench": measure_bench, "bare": measure_bare, "bare-fp32-core": measure_bare_fp32_core}
# The diagnostic variant differs from the bare forward only where rewardsmith's attention differs: under bf16.
TOOLS = {"fp32": ("bench", "bare"), "bf16": ("bench", "bare", "bare-fp32-core")}


def _ratios(runs: dict[str, list[dict[str, Any]]], top: str, bottom: str) -> list[float]:
    """Per round, texts/s of `top` over texts/s of `bottom` (paired by round)."""
    return [a["texts_per_s"] / b["texts_per_s"] for a, b in zip(runs[top], runs[bottom], strict=True)]


def drive(args: argparse.Namespace) -> None:
    load_wait = wait_for_quiet_machine(args.load_target, args.load_wait)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = prepare(Path(tmp))
        for precision in args.precision:
            runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in TOOLS[precision]}
            for r in range(args.rounds):
                for tool in rotated(TOOLS[precision], r):
                    worker = [
                        "--worker",
                        tool,
                        "--model-dir",
                        str(model_dir),
                        "--limit",
                        str(args.limit),
                        "--precision",
                        precision,
                        *(["--data-dir", args.data_dir] if args.data_dir else []),
                    ]
                    before = load_1m()
                    run = run_worker(__file__, worker, f"{tool} ({precision})")
                    runs[tool].append({**run, "loadavg_1m": {"before": before, "after": load_1m()}})
                    print(
                        f"{precision} round {r + 1} {tool}: {run['texts_per_s']:.1f} texts/s",
                        file=sys.stderr,
                        flush=True,
                    )
            row = {
                "precision": precision,
                "runs": runs,
                "median_texts_per_s": {t: statistics.median(x["texts_per_s"] for x in runs[t]) for t in runs},
                "median_load_seconds": {t: statistics.median(x["load_seconds"] for x in runs[t]) for t in runs},
                "fraction_of_bare": spread(_ratios(runs, "bench", "bare")),
                "max_abs_diff_to_bench": max(x["max_abs_diff_to_bench"] for x in runs["bare"]),
            }
            if "bare-fp32-core" in runs:
                row["fraction_of_bare_fp32_core"] = spread(_ratios(runs, "bench", "bare-fp32-core"))
                row["bare_fp32_core_of_bare"] = spread(_ratios(runs, "bare-fp32-core", "bare"))
            rows.append(row)
    texts = rows[0]["runs"]["bench"][0]["texts"]
    loads = [x["loadavg_1m"][k] for r in rows for tool in r["runs"].values() for x in tool for k in ("before", "after")]
    threads = os.environ.get("OMP_NUM_THREADS")
    out = {
        "benchmark": "suites",
        "model": f"minilm (embedded), seeded head, hh template, {MAX_LENGTH} tokens",
        "suites": list(SUITES),
        "limit_per_subset": args.limit,
        "batch_size": BATCH,
        "rounds": args.rounds,
        "texts": texts,
        "load_wait": load_wait,
        "loadavg_1m_during": {"min": min(loads), "max": max(loads)},
        "results": rows,
        "command": (f"OMP_NUM_THREADS={threads} " if threads else "")
        + f".venv/bin/python benchmarks/bench_suites.py --limit {args.limit} --precision "
        f"{' '.join(args.precision)} --rounds {args.rounds} --load-target {args.load_target} "
        f"--load-wait {args.load_wait:g}",
    }
    write_results(RESULTS, out, table(out))


def table(out: dict[str, Any]) -> str:
    t = out["texts"]
    lines = [
        f"{t['scored']} distinct texts of {t['requested']} requested ({t['reused']} reused), "
        f"{', '.join(out['suites'])}, {out['limit_per_subset']} rows per subset; 1-minute load "
        f"{out['loadavg_1m_during']['min']:.1f}-{out['loadavg_1m_during']['max']:.1f} while measuring:",
        "",
    ]
    header = [
        "precision",
        "bench texts/s",
        "bare forward texts/s",
        "bench / bare",
        "bench / bare with the fp32 attention core",
        "model load s (bench)",
    ]
    rows = [
        [
            r["precision"],
            f"{r['median_texts_per_s']['bench']:.1f}",
            f"{r['median_texts_per_s']['bare']:.1f}",
            with_range(r["fraction_of_bare"], percent=True),
            with_range(core, percent=True) if (core := r.get("fraction_of_bare_fp32_core")) else "same kernels",
            f"{r['median_load_seconds']['bench']:.1f}",
        ]
        for r in out["results"]
    ]
    return "\n".join(lines + markdown_table(header, "lrrrrr", rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=15, help="rows per subset of each suite")
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (bench, bare), at least 3")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--load-target",
        type=float,
        default=LOAD_TARGET,
        help="wait until the 1-minute load average is below this before measuring",
    )
    parser.add_argument(
        "--load-wait",
        type=float,
        default=LOAD_WAIT_MAX_S,
        help="wait at most this many seconds for that load (0: measure at once; the load is recorded either way)",
    )
    parser.add_argument("--worker", choices=tuple(MEASURES), help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(MEASURES[args.worker](args.model_dir, args.limit, args.precision[0] == "bf16", args.data_dir)))
        return
    if args.rounds < 3:
        parser.error("--rounds must be at least 3 (the median of paired rounds)")
    drive(args)


if __name__ == "__main__":
    main()
