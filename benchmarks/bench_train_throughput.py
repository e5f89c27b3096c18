"""Training throughput as a user sees it: rewardsmith's Trainer against TRL's RewardTrainer and against the
hardware's limit, every measured run in its own fresh process.

Same backbone (the embedded MiniLM, dropout 0), same max_length, 16 pairs a step, one epoch, lr 2e-5, gradient
checkpointing off, fp32 or bf16 autocast. The same work for every tool: the first N hh-rlhf/harmless-base
training pairs that fit max_length whole under both tools' tokenisation, so rewardsmith truncates none and TRL
(which drops a pair longer than max_length) drops none. Per round, these processes run in a rotating order:
- rewardsmith: `train_pairs`'s Trainer with its defaults (length-grouped batches, forward groups), timed over
  the training loop (tokenisation and model load excluded), then a second model trained in the same process
  (the first must not be slower than the second);
- the levers alone: random batches with neither lever (`rs-none`), length-grouped batches only
  (`rs-grouped`), forward groups only (`rs-forward`), and the defaults with `train.compile` (`rs-compile`:
  torch.compile of the backbone, dynamic shapes, its compile time inside the timed loop, as a first run has
  it; `warm` also records the same process's second training, compiled graphs cached);
- trl: TRL's RewardTrainer with its defaults (random batches padded to their longest pair). TRL 1.16's
  `train_sampling_strategy="group_by_length"` fails on reward datasets ("Can only automatically infer lengths
  for datasets whose items are dictionaries with an 'input_ids' key") and its reward trainer has no
  padding-free mode, so its defaults are its best working configuration here;
- bare: a plain PyTorch loop (forward, Bradley-Terry loss, backward, AdamW step) over exactly rewardsmith's
  default batches, pre-collated before the clock, fused AdamW: no data loading, no logging, no accelerate.

Reported per run: pairs/s, non-padding tokens/s, the padding fraction (of the positions the forward passes
computed), loop wall and CPU seconds, and the process's wall and CPU seconds from outside. Per precision: the
median paired ratio of each rewardsmith variant to TRL (pairs/s), rewardsmith / bare, and second / first
training in one process.

    .venv/bin/python benchmarks/bench_train_throughput.py --pairs 320 --max-length 256 --precision fp32 bf16 --rounds 3

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
from _common import markdown_table, rotated, run_worker, spread, write_results

from rewardsmith.evaluate.formatting import with_range

RESULTS = Path(__file__).resolve().parent / "results" / "train_throughput.json"
# rewardsmith variant -> (train.batches, train.forward_groups, train.compile)
VARIANTS = {
    "rewardsmith": ("length-grouped", True, False),
    "rs-none": ("random", False, False),
    "rs-grouped": ("length-grouped", False, False),
    "rs-forward": ("random", True, False),
    "rs-compile": ("length-grouped", True, True),
}
TOOLS = (*VARIANTS, "trl", "bare")
BATCH = 16
LR = 2e-5


def load_pairs(n: int, data_dir: str | None, max_length: int) -> list[Any]:
    """The first n training pairs of hh-rlhf/harmless-base that both tools take whole at max_length."""
    from transformers import AutoTokenizer

    from rewardsmith.config import ModelConfig
    from rewardsmith.data.collate import PairEncoder
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.data.splits import split_pairs
    from rewardsmith.models.backbone import minilm_dir

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    encoder = PairEncoder(tok, max_length, ModelConfig().min_prompt_tokens)
    kept = []
    for p in split_pairs(load_dataset("hh-rlhf/harmless-base", data_dir=data_dir).pairs, {"train": 0.8})["train"]:
        ours = [encoder.encode(p.prompt_text(), r) for r in (p.chosen, p.rejected)]
        theirs = [len(tok(p.prompt_text() + " " + r + tok.sep_token)["input_ids"]) for r in (p.chosen, p.rejected)]
        if not any(e.prompt_truncated or e.response_truncated for e in ours) and max(theirs) <= max_length:
            kept.append(p)
        if len(kept) == n:
            return kept
    raise SystemExit(f"only {len(kept)} pairs fit {max_length} tokens, {n} asked")


def _plan(
    pairs: list[Any], max_length: int, batches: str = "length-grouped", grouped_forward: bool = True
) -> tuple[Any, Any, Any]:
    """A fresh MiniLM reward model, its tokenizer and rewardsmith's batch plan for the pairs."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.data.collate import PairEncoder, encode_pairs
    from rewardsmith.models import build_reward_model
    from rewardsmith.train.trainer import PairBatchPlan

    model_cfg = ModelConfig(backbone="minilm", template="hh", max_length=max_length)
    model, tok = build_reward_model(model_cfg, seed=0)
    encoded = encode_pairs(PairEncoder(tok, max_length, model_cfg.min_prompt_tokens), pairs)
    plan = PairBatchPlan(
        encoded, int(tok.pad_token_id), BATCH, 1.0, seed=0, batches=batches, grouped_forward=grouped_forward
    )
    return model, tok, plan


def _tokens(plan: Any) -> tuple[int, int]:
    """(non-padding tokens, positions the forward passes compute) over every batch of one epoch of the plan."""
    real = padded = 0
    for b in range(plan.natural_batches):
        t = plan.batch(b).tensors
        real, padded = real + int(t["attention_mask"].sum()), padded + _positions(t)
    return real, padded


def _positions(t: dict[str, Any]) -> int:
    """Token positions a forward pass over the batch computes: each forward group padded to its own longest."""
    lengths = t["attention_mask"].sum(dim=1)
    if "forward_group" not in t:
        return int(t["attention_mask"].numel())
    return sum(
        int((t["forward_group"] == g).sum()) * int(lengths[t["forward_group"] == g].max())
        for g in t["forward_group"].unique()
    )


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


def measure_rewardsmith(pairs: list[Any], max_length: int, bf16: bool, variant: str = "rewardsmith") -> dict[str, Any]:
    from rewardsmith.config import TrainConfig
    from rewardsmith.train.trainer import Trainer

    batches, grouped_forward, compiled = VARIANTS[variant]
    trainings = []
    # The first training of the process; the defaults and compile also a second one beside it.
    for _ in range(2 if variant in ("rewardsmith", "rs-compile") else 1):
        model, _, plan = _plan(pairs, max_length, batches, grouped_forward)
        real, padded = _tokens(plan)
        cfg = TrainConfig(
            epochs=1,
            batch_size=BATCH,
            lr=LR,
            bf16=bf16,
            checkpoint_every=0,
            progress=False,
            batches=batches,
            forward_groups=grouped_forward,
            compile=compiled,
        )
        with tempfile.TemporaryDirectory() as tmp:
            trainer = Trainer(model, plan, cfg, tmp)
            cpu0 = time.process_time()
            result = trainer.fit()
            cpu = time.process_time() - cpu0
        trainings.append(_record(result.items_seen, real, padded, result.seconds, cpu, pairs_in=len(pairs)))
    return {**trainings[0], "second": trainings[1]} if len(trainings) > 1 else trainings[0]


def measure_bare(pairs: list[Any], max_length: int, bf16: bool) -> dict[str, Any]:
    import torch

    from rewardsmith.losses.bt import bradley_terry_loss

    model, _, plan = _plan(pairs, max_length)
    batches = [plan.batch(b).tensors for b in range(plan.natural_batches)]
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    padded = sum(_positions(b) for b in batches)
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


def trl_trainer(pairs: list[Any], max_length: int, bf16: bool, output_dir: str) -> Any:
    """TRL's RewardTrainer with its defaults on the pairs (prompt in HH framing, as rewardsmith's hh template renders
    it): MiniLM with dropout 0, 16 pairs a step, one epoch, lr 2e-5, nothing saved or logged."""
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
    args = RewardConfig(
        output_dir=output_dir,
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
    return RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tok)


def measure_trl(pairs: list[Any], max_length: int, bf16: bool) -> dict[str, Any]:
    counts = {"real": 0, "padded": 0}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = trl_trainer(pairs, max_length, bf16, tmp)
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


def measure(tool: str, pairs: list[Any], max_length: int, bf16: bool) -> dict[str, Any]:
    if tool in VARIANTS:
        return measure_rewardsmith(pairs, max_length, bf16, tool)
    return {"trl": measure_trl, "bare": measure_bare}[tool](pairs, max_length, bf16)


def _child(tool: str, args: argparse.Namespace, precision: str) -> dict[str, Any]:
    cmd = ["--worker", tool, "--pairs", str(args.pairs), "--max-length", str(args.max_length), "--precision", precision]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    return run_worker(__file__, cmd, f"{tool} ({precision})")


def drive(args: argparse.Namespace) -> None:

    rows = []
    for precision in args.precision:
        tools = [t for t in TOOLS if t in args.tools]
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
        for r in range(args.rounds):
            for tool in rotated(tools, r):
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
                "variants_vs_trl_pairs_per_s": {
                    v: spread([o["pairs_per_s"] / t["pairs_per_s"] for o, t in zip(runs[v], trl, strict=True)])
                    for v in VARIANTS
                    if v in runs
                },
                "median": {
                    t: {
                        k: statistics.median(x[k] for x in runs[t])
                        for k in ("pairs_per_s", "tokens_per_s", "padding_fraction", "seconds", "cpu_seconds")
                    }
                    for t in tools
                },
                "process_seconds": {t: statistics.median(x["process_seconds"] for x in runs[t]) for t in tools},
                "pairs_kept": {t: runs[t][0]["pairs"] for t in tools} | {"of": args.pairs},
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
        f"{args.max_length} --precision {' '.join(args.precision)} --rounds {args.rounds}"
        + ("" if set(args.tools) == set(TOOLS) else f" --tools {' '.join(args.tools)}"),
    }
    write_results(RESULTS, out, table(out))


def table(out: dict[str, Any]) -> str:
    header = ["precision", "tool", "pairs/s", "/ TRL", "tokens/s", "padding", "pairs kept"]
    rows = [
        [
            r["precision"],
            t,
            f"{m['pairs_per_s']:.2f}",
            f"{ratio['median']:.2f}x" if (ratio := r["variants_vs_trl_pairs_per_s"].get(t)) else "",
            f"{m['tokens_per_s']:.0f}",
            f"{100 * m['padding_fraction']:.0f}%",
            f"{r['pairs_kept'][t]} of {r['pairs_kept']['of']}",
        ]
        for r in out["results"]
        for t, m in r["median"].items()
    ]
    lines = markdown_table(header, "llrrrrr", rows)
    lines.append("")
    for r in out["results"]:
        a, b, c = (
            r[k] for k in ("ratio_vs_trl_pairs_per_s", "fraction_of_bare_tokens_per_s", "second_over_first_training")
        )
        lines.append(
            f"{r['precision']}: rewardsmith / TRL {with_range(a)}; "
            f"of the bare limit {100 * b['median']:.0f}% ({100 * b['min']:.0f}-{100 * b['max']:.0f}); "
            f"second / first training {with_range(c, unit='')}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=320)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (rewardsmith, trl, bare), at least 3")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--tools", nargs="+", default=list(TOOLS), choices=TOOLS, help="a subset (rewardsmith, trl, bare always run)"
    )
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.tools = sorted(set(args.tools) | {"rewardsmith", "trl", "bare"}, key=TOOLS.index)
    if args.worker:
        pairs = load_pairs(args.pairs, args.data_dir, args.max_length)
        print(json.dumps(measure(args.worker, pairs, args.max_length, args.precision[0] == "bf16")))
        return
    drive(args)


if __name__ == "__main__":
    main()
