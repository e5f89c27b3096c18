"""Training throughput: rewardsmith's Trainer versus TRL's RewardTrainer, side by side in one run.

Same backbone (the embedded MiniLM, dropout 0), same pairs (hh-rlhf/harmless-base), same max_length,
16 pairs a step, one epoch, gradient checkpointing off, fp32 and bf16 autocast. TRL pads each random
batch to its longest pair and drops pairs longer than max_length; rewardsmith groups batches by length and
truncates the prompt from the left instead, so it keeps every pair. Throughput = pairs trained / wall
time of the training loop (tokenisation excluded for both).

    .venv/bin/python benchmarks/bench_train_throughput.py --pairs 480 --max-length 256 --precision fp32 bf16

Writes benchmarks/results/train_throughput.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from rewardsmith.config import ModelConfig, TrainConfig
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.splits import split_pairs
from rewardsmith.models import build_reward_model
from rewardsmith.models.backbone import minilm_dir, quiet_transformers, set_dropout
from rewardsmith.train.trainer import Trainer

RESULTS = Path(__file__).parent / "results" / "train_throughput.json"


def load_pairs(n: int, data_dir: str | None) -> list[PreferencePair]:
    pairs = load_dataset("hh-rlhf/harmless-base", data_dir=data_dir).pairs
    return split_pairs(pairs, {"train": 0.8})["train"][:n]


def run_rewardsmith(pairs: list[PreferencePair], max_length: int, bf16: bool) -> dict[str, Any]:
    model_cfg = ModelConfig(backbone="minilm", max_length=max_length)
    cfg = TrainConfig(epochs=1, batch_size=16, lr=2e-5, bf16=bf16, checkpoint_every=0, progress=False)
    model, tok = build_reward_model(model_cfg)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(model, tok, pairs, cfg, model_cfg, tmp)  # tokenises here, before the clock
        padded = sum(2 * max(len(p.chosen.input_ids), len(p.rejected.input_ids)) for p in trainer.encoded)
        result = trainer.fit()
    return {"pairs_trained": result.pairs_seen, "pairs_kept": len(pairs), "seconds": round(result.seconds, 2),
            "pairs_per_s": round(result.pairs_seen / result.seconds, 3),
            "tokens_per_pair_side": padded / (2 * len(pairs))}


def run_trl(pairs: list[PreferencePair], max_length: int, bf16: bool) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    quiet_transformers()
    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    tok.eos_token = tok.sep_token  # BERT has no EOS; TRL appends one to every response
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_dir()), num_labels=1)
    set_dropout(model, 0.0)
    data = Dataset.from_list([{"prompt": p.prompt_text(), "chosen": " " + p.chosen, "rejected": " " + p.rejected}
                              for p in pairs])
    with tempfile.TemporaryDirectory() as tmp:
        args = RewardConfig(output_dir=tmp, per_device_train_batch_size=16, num_train_epochs=1, learning_rate=2e-5,
                            max_length=max_length, bf16=bf16, use_cpu=not torch.cuda.is_available(),
                            gradient_checkpointing=False, logging_steps=1000, save_strategy="no", report_to=[],
                            disable_tqdm=True, dataloader_num_workers=0, seed=0)
        trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
        kept = len(trainer.train_dataset)
        t0 = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - t0
    return {"pairs_trained": kept, "pairs_kept": kept, "seconds": round(seconds, 2),
            "pairs_per_s": round(kept / seconds, 3)}


def _combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Total pairs over total seconds across repeated runs."""
    seconds = sum(r["seconds"] for r in runs)
    trained = sum(r["pairs_trained"] for r in runs)
    return {**runs[0], "seconds": round(seconds, 2), "pairs_trained": trained,
            "pairs_per_s": round(trained / seconds, 3), "repeats": len(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=480)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--rounds", type=int, default=2, choices=[1, 2], help="1: AB, 2: ABBA")
    args = parser.parse_args()
    pairs = load_pairs(args.pairs, args.data_dir)
    rows = []
    for precision in args.precision:
        bf16 = precision == "bf16"
        # ABBA order: a load change on this shared machine during the run biases both sides alike.
        runs: dict[str, list[dict[str, Any]]] = {"rewardsmith": [], "trl": []}
        for order in (["rewardsmith", "trl"], ["trl", "rewardsmith"])[: args.rounds]:
            for name in order:
                fn = run_rewardsmith if name == "rewardsmith" else run_trl
                runs[name].append(fn(pairs, args.max_length, bf16))
        ours, trl = (_combine(runs[k]) for k in ("rewardsmith", "trl"))
        rows.append({"precision": precision, "pairs_in": len(pairs), "rewardsmith": ours, "trl": trl,
                     "runs": runs, "ratio_pairs_per_s": round(ours["pairs_per_s"] / trl["pairs_per_s"], 3)})
        print(f"{precision}: rewardsmith {ours['pairs_per_s']:.2f} pairs/s ({ours['pairs_kept']} pairs kept) | "
              f"TRL {trl['pairs_per_s']:.2f} pairs/s ({trl['pairs_kept']} kept of {len(pairs)}) | "
              f"ratio {rows[-1]['ratio_pairs_per_s']:.2f}x", flush=True)
    out = {"benchmark": "train_throughput", "backbone": "minilm", "max_length": args.max_length,
           "batch_size": 16, "torch_threads": torch.get_num_threads(), "results": rows,
           "command": f"benchmarks/bench_train_throughput.py --pairs {args.pairs} --max-length {args.max_length} "
                      f"--precision {' '.join(args.precision)} --rounds {args.rounds}"}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\n{'precision':<10}{'rewardsmith pairs/s':>20}{'TRL pairs/s':>14}{'TRL kept':>10}{'ratio':>8}")
    for r in rows:
        print(f"{r['precision']:<10}{r['rewardsmith']['pairs_per_s']:>20.2f}{r['trl']['pairs_per_s']:>14.2f}"
              f"{r['trl']['pairs_kept']:>10}{r['ratio_pairs_per_s']:>8.2f}")
    print(f"written {RESULTS}")


if __name__ == "__main__":
    main()
