"""Step time of naive W2S training against anchoring with a per-step reference forward and with cached
reference states (rewardsmith.w2s.reference), in one run on the same batches.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_anchor.py [--steps 12] [--threads 1]

Three MiniLM students (same initial weights) take turns on identical batches, so load from other
processes hits all three alike; the median step time of each is reported. Writes
benchmarks/results/anchor.json and prints a table. Target: cached <= 1.10x naive.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from rewardsmith.config import ModelConfig
from rewardsmith.data.collate import PairEncoder, collate_pairs, encode_pairs, length_grouped_batches
from rewardsmith.data.registry import load_dataset
from rewardsmith.models.factory import build_reward_model
from rewardsmith.train.objectives import BradleyTerryObjective, StepInfo
from rewardsmith.w2s.config import AnchorSettings
from rewardsmith.w2s.objectives.anchor import AnchorObjective
from rewardsmith.w2s.reference import CachedReference, FrozenCopyReference, ReferenceStateCache

RESULTS = Path(__file__).parent / "results" / "anchor.json"


def _pairs(n: int) -> tuple[str, list]:
    for name in ("hh-rlhf/helpful-base", "synthetic/source"):
        try:
            return name, load_dataset(name, limit=n).pairs
        except Exception:
            continue
    raise SystemExit("no dataset available")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="timed steps per method (after 2 warm-up steps)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    n_batches = args.steps + 2
    dataset, pairs = _pairs(n_batches * args.batch_size)
    pairs = [p.with_label(0.7) for p in pairs]
    cfg = ModelConfig(backbone=args.backbone, template="hh", max_length=args.max_length)
    models = {}
    for name in ("naive", "anchor-per-step", "anchor-cached"):
        models[name], tokenizer = build_reward_model(cfg, seed=0)
    pad = int(tokenizer.pad_token_id)
    encoded = encode_pairs(PairEncoder(tokenizer, cfg.max_length, cfg.min_prompt_tokens), pairs)
    layer = int(models["naive"].config.num_hidden_layers)

    t0 = time.perf_counter()
    cache = ReferenceStateCache.build(models["anchor-cached"], encoded, [layer], pad)
    cache_build_s = time.perf_counter() - t0

    objectives = {
        "naive": BradleyTerryObjective(),
        "anchor-per-step": AnchorObjective(
            reference=FrozenCopyReference(models["anchor-per-step"]),
            layers=[layer],
            settings=AnchorSettings(weight=1e-4),
        ),
        "anchor-cached": AnchorObjective(
            reference=CachedReference(cache), layers=[layer], settings=AnchorSettings(weight=1e-4)
        ),
    }
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=2e-5) for k, m in models.items()}
    batches = length_grouped_batches([p.length for p in encoded], args.batch_size, seed=0)[:n_batches]
    times: dict[str, list[float]] = {k: [] for k in models}
    for step, idx in enumerate(batches):
        batch = collate_pairs([encoded[i] for i in idx], pad)
        for name, model in models.items():
            model.train()
            start = time.perf_counter()
            result = objectives[name](model, batch, StepInfo(step, len(batches)))
            result.total.backward()
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)
            if step >= 2:
                times[name].append(time.perf_counter() - start)

    median = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "dataset": dataset,
        "backbone": args.backbone,
        "batch_pairs": args.batch_size,
        "max_length": args.max_length,
        "threads": args.threads,
        "steps": args.steps,
        "dtype": "fp32",
        "median_step_s": {k: round(v, 4) for k, v in median.items()},
        "ratio_to_naive": {k: round(v / median["naive"], 3) for k, v in median.items()},
        "cache_build_s": round(cache_build_s, 2),
        "cache_mb": round(cache.nbytes / 2**20, 2),
        "cache_pairs": len(encoded),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{'method':<18}{'median step (s)':>16}{'x naive':>10}")
    for k in median:
        print(f"{k:<18}{median[k]:>16.3f}{out['ratio_to_naive'][k]:>10.2f}")
    print(f"cache: {out['cache_mb']} MB, {len(encoded)} pairs, built in {cache_build_s:.1f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
