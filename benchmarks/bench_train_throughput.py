"""Training throughput as a user sees it: rewardsmith's Trainer against TRL's RewardTrainer and against the
hardware's limit, every measured run in its own fresh process.

Same backbone (the embedded MiniLM, dropout 0), same hh-rlhf/harmless-base pairs, same max_length, 16 pairs a
step, one epoch, lr 2e-5, gradient checkpointing off, fp32 or bf16 autocast. Per round, three processes run in
a rotating order:
- rewardsmith: `train_pairs`'s Trainer on the pairs, timed over the training loop (tokenisation and model load
  excluded), then a second model trained in the same process (the first must not be slower than the second);
- trl: TRL's RewardTrainer with its defaults (random batches padded to their longest pair; pairs longer than
  max_length dropped). TRL 1.16's `train_sampling_strategy="group_by_length"` fails on reward datasets ("Can
  only automatically infer lengths for datasets whose items are dictionaries with an 'input_ids' key"), so
  its defaults are its best working configuration here;
- bare: a plain PyTorch loop (forward, Bradley-Terry loss, backward, AdamW step) over exactly rewardsmith's
  batches, pre-padded before the clock, fused AdamW: no data loading, no logging, no accelerate. What training
  could reach.

Reported per run: pairs/s, non-padding tokens/s, the padding fraction, loop wall and CPU seconds, and the
process's wall and CPU seconds from outside. Per precision: the median paired ratio rewardsmith / TRL (pairs/s)
and rewardsmith / bare (non-padding tokens/s) with their ranges, and second / first training in one process.

    .venv/bin/python benchmarks/bench_train_throughput.py --pairs 480 --max-length 256 --precision fp32 bf16 --rounds 3

Writes benchmarks/results/train_throughput.json and prints a table.
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
from _common import rotated, run_worker, spread, write_results

RESULTS = Path(__file__).resolve().parent / "results" / "train_throughput.json"
TOOLS = ("rewardsmith", "trl", "bare")
BATCH = 16
LR = 2e-5


def load_pairs(n: int, data_dir: str | None) -> list[Any]:
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.data.splits import split_pairs

    pairs = load_dataset("hh-rlhf/harmless-base", data_dir=data_dir).pairs
    return split_pairs(pairs, {"train": 0.8})["train"][:n]


def _plan(pairs: list[Any], max_length: int) -> tuple[Any, Any, Any]:
    """A fresh MiniLM reward model, its tokenizer and rewardsmith's batch plan for the pairs."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.data.collate import PairEncoder, encode_pairs
    from rewardsmith.models import build_reward_model
    from rewardsmith.train.trainer import PairBatchPlan

    model_cfg = ModelConfig(backbone="minilm", template="hh", max_length=max_length)
    model, tok = build_reward_model(model_cfg, seed=0)
    encoded = encode_pairs(PairEncoder(tok, max_length, model_cfg.min_prompt_tokens), pairs)
    return model, tok, PairBatchPlan(encoded, int(tok.pad_token_id), BATCH, 1.0, seed=0)


def _tokens(plan: Any) -> tuple[int, int]:
    """(non-padding tokens, padded positions) over every batch of one epoch of the plan."""
    real = padded = 0
    for b in range(plan.natural_batches):
        mask = plan.batch(b).tensors["attention_mask"]
        real += int(mask.sum())
        padded += mask.numel()
    return real, padded


def _record(pairs: int, real: int, padded: int, wall: float, cpu: float, **extra: Any) -> dict[str, Any]:
    return {
        "pairs": pairs,
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "pairs_per_s": round(pairs / wall, 3),
        "tokens_per_s": round(real / wall, 1),
        "padding_fraction": round(1 - real / padded, 4),
        **extra,
    }


def measure_rewardsmith(pairs: list[Any], max_length: int, bf16: bool) -> dict[str, Any]:
    from rewardsmith.config import TrainConfig
    from rewardsmith.train.trainer import Trainer

    trainings = []
    for _ in range(2):  # the first training of the process, then a second one beside it
        model, _, plan = _plan(pairs, max_length)
        real, padded = _tokens(plan)
        cfg = TrainConfig(epochs=1, batch_size=BATCH, lr=LR, bf16=bf16, checkpoint_every=0, progress=False)
        with tempfile.TemporaryDirectory() as tmp:
            trainer = Trainer(model, plan, cfg, tmp)
            cpu0 = time.process_time()
            result = trainer.fit()
            cpu = time.process_time() - cpu0
        trainings.append(_record(result.items_seen, real, padded, result.seconds, cpu, pairs_in=len(pairs)))
    return {**trainings[0], "second": trainings[1]}


def measure_bare(pairs: list[Any], max_length: int, bf16: bool) -> dict[str, Any]:
    import torch

    from rewardsmith.losses.bt import bradley_terry_loss

    model, _, plan = _plan(pairs, max_length)
    batches = [plan.batch(b).tensors for b in range(plan.natural_batches)]
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    padded = sum(b["attention_mask"].numel() for b in batches)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)  # the fastest step torch has on CPU
    model.train()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for batch in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            rewards = model(batch).rewards
        half = rewards.shape[0] // 2
        bradley_terry_loss(rewards[:half], rewards[half:], batch["labels"]).total.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return _record(len(pairs), real, padded, wall, cpu)


def measure_trl(pairs: list[Any], max_length: int, bf16: bool) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    from rewardsmith.models.backbone import minilm_dir, quiet_transformers, set_dropout

    quiet_transformers()
    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    tok.eos_token = tok.sep_token  # BERT has no EOS; TRL appends one to every response
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_dir()), num_labels=1)
    set_dropout(model, 0.0)
    data = Dataset.from_list(
        [{"prompt": p.prompt_text(), "chosen": " " + p.chosen, "rejected": " " + p.rejected} for p in pairs]
    )
    counts = {"real": 0, "padded": 0}
    with tempfile.TemporaryDirectory() as tmp:
        args = RewardConfig(
            output_dir=tmp,
            per_device_train_batch_size=BATCH,
            num_train_epochs=1,
            learning_rate=LR,
            max_length=max_length,
            bf16=bf16,
            use_cpu=not torch.cuda.is_available(),
            gradient_checkpointing=False,
            logging_steps=1000,
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=0,
        )
        trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
        collate = trainer.data_collator

        def counting(examples: list[dict[str, Any]]) -> dict[str, Any]:
            batch = collate(examples)
            counts["real"] += int(batch["attention_mask"].sum())
            counts["padded"] += batch["attention_mask"].numel()
            return batch

        trainer.data_collator = counting
        kept = len(trainer.train_dataset)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        trainer.train()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return _record(kept, counts["real"], counts["padded"], wall, cpu, pairs_in=len(pairs))


MEASURES = {"rewardsmith": measure_rewardsmith, "trl": measure_trl, "bare": measure_bare}


def _child(tool: str, args: argparse.Namespace, precision: str) -> dict[str, Any]:
    cmd = ["--worker", tool, "--pairs", str(args.pairs), "--max-length", str(args.max_length), "--precision", precision]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    return run_worker(__file__, cmd, f"{tool} ({precision})")


def drive(args: argparse.Namespace) -> None:

    rows = []
    for precision in args.precision:
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TOOLS}
        for r in range(args.rounds):
            for tool in rotated(TOOLS, r):
                runs[tool].append(_child(tool, args, precision))
                last = runs[tool][-1]
                print(
                    f"{precision} round {r + 1} {tool}: {last['pairs_per_s']:.2f} pairs/s, "
                    f"{last['tokens_per_s']:.0f} tokens/s",
                    file=sys.stderr,
                    flush=True,
                )
        ours, trl, bare = runs["rewardsmith"], runs["trl"], runs["bare"]
        rows.append(
            {
                "precision": precision,
                "runs": runs,
                "ratio_vs_trl_pairs_per_s": spread(
                    [o["pairs_per_s"] / t["pairs_per_s"] for o, t in zip(ours, trl, strict=True)]
                ),
                "fraction_of_bare_tokens_per_s": spread(
                    [o["tokens_per_s"] / b["tokens_per_s"] for o, b in zip(ours, bare, strict=True)]
                ),
                "second_over_first_training": spread([o["second"]["pairs_per_s"] / o["pairs_per_s"] for o in ours]),
                "median": {
                    t: {
                        k: statistics.median(x[k] for x in runs[t])
                        for k in ("pairs_per_s", "tokens_per_s", "padding_fraction", "seconds", "cpu_seconds")
                    }
                    for t in TOOLS
                },
                "pairs_kept": {"rewardsmith": ours[0]["pairs"], "trl": trl[0]["pairs"], "of": args.pairs},
            }
        )
    out = {
        "benchmark": "train_throughput",
        "backbone": "minilm (embedded), dropout 0",
        "max_length": args.max_length,
        "batch_size": BATCH,
        "pairs": args.pairs,
        "rounds": args.rounds,
        "results": rows,
        "command": f".venv/bin/python benchmarks/bench_train_throughput.py --pairs {args.pairs} --max-length "
        f"{args.max_length} --precision {' '.join(args.precision)} --rounds {args.rounds}",
    }
    write_results(RESULTS, out, table(out))


def table(out: dict[str, Any]) -> str:
    lines = ["| precision | tool | pairs/s | tokens/s | padding | pairs kept |", "|---|---|---:|---:|---:|---:|"]
    for r in out["results"]:
        for t in TOOLS:
            m = r["median"][t]
            kept = r["pairs_kept"].get(t, r["pairs_kept"]["rewardsmith"])
            lines.append(
                f"| {r['precision']} | {t} | {m['pairs_per_s']:.2f} | {m['tokens_per_s']:.0f} | "
                f"{100 * m['padding_fraction']:.0f}% | {kept} of {r['pairs_kept']['of']} |"
            )
    lines.append("")
    for r in out["results"]:
        a, b, c = (
            r[k] for k in ("ratio_vs_trl_pairs_per_s", "fraction_of_bare_tokens_per_s", "second_over_first_training")
        )
        lines.append(
            f"{r['precision']}: rewardsmith / TRL {a['median']:.2f}x ({a['min']:.2f}-{a['max']:.2f}); "
            f"of the bare limit {100 * b['median']:.0f}% ({100 * b['min']:.0f}-{100 * b['max']:.0f}); "
            f"second / first training {c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=480)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (rewardsmith, trl, bare), at least 3")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        pairs = load_pairs(args.pairs, args.data_dir)
        print(json.dumps(MEASURES[args.worker](pairs, args.max_length, args.precision[0] == "bf16")))
        return
    drive(args)


if __name__ == "__main__":
    main()
