"""The README's speed block (training, scoring and CPU kernels), rendered from benchmarks/results/*.json (the
benchmarks/ scripts write them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from blocks_common import BENCH
from blocks_common import table as _table


def block_speed() -> str:
    parts = []
    train_path, score_path, kernels_path = (BENCH / f"{n}.json" for n in ("train_throughput", "score", "kernels"))
    if train_path.exists():
        t = json.loads(train_path.read_text(encoding="utf-8"))
        rows = []
        for r in t["results"]:
            med = r["median"]
            vs, bare, again = (
                r[k]
                for k in ("ratio_vs_trl_pairs_per_s", "fraction_of_bare_tokens_per_s", "second_over_first_training")
            )
            rows.append(
                [
                    r["precision"],
                    f"{med['rewardsmith']['pairs_per_s']:.2f}",
                    f"{med['trl']['pairs_per_s']:.2f}",
                    f"{vs['median']:.2f}x ({vs['min']:.2f}-{vs['max']:.2f})",
                    f"{med['rewardsmith']['tokens_per_s']:.0f} / {med['bare']['tokens_per_s']:.0f}",
                    f"{100 * bare['median']:.0f}% ({100 * bare['min']:.0f}-{100 * bare['max']:.0f}%)",
                    f"{100 * med['rewardsmith']['padding_fraction']:.0f}% / "
                    f"{100 * med['trl']['padding_fraction']:.0f}%",
                    f"{again['median']:.2f}",
                    f"{r['pairs_kept']['rewardsmith']} / {r['pairs_kept']['trl']} of {r['pairs_kept']['of']}",
                ]
            )
        parts.append(
            f"**Training** ({t['pairs']} hh-rlhf/harmless-base pairs, {t['max_length']} tokens, "
            f"{t['batch_size']} pairs a step, one epoch, MiniLM; {t['rounds']} rounds):\n\n"
            + _table(
                [
                    "precision",
                    "rewardsmith pairs/s",
                    "TRL pairs/s",
                    "ratio",
                    "tokens/s (ours / bare)",
                    "of the bare limit",
                    "padding (ours / TRL)",
                    "2nd / 1st training",
                    "pairs kept",
                ],
                rows,
            )
            + f"\n\nCommand: `{t['command']}`; results: `benchmarks/results/train_throughput.json`."
        )
    if score_path.exists():
        sc = json.loads(score_path.read_text(encoding="utf-8"))
        rows = []
        for r in sc["results"]:
            f = r["fraction_of_bare"]
            rows.append(
                [
                    str(r["max_length"]),
                    r["precision"],
                    f"{r['median_pairs_per_s']['score']:.1f}",
                    f"{r['median_pairs_per_s']['bare']:.1f}",
                    f"{100 * f['median']:.0f}% ({100 * f['min']:.0f}-{100 * f['max']:.0f}%)",
                    f"{r['median_load_seconds']:.1f}",
                ]
            )
        parts.append(
            f"**Scoring** (`rewardsmith score` on {sc['pairs']} pairs, model load timed apart; bf16 "
            "rewards stay within 5% of the fp32 rewards' standard deviation, "
            "`tests/integration/test_scoring_bf16.py`):\n\n"
            + _table(
                ["tokens", "precision", "score pairs/s", "bare forward pairs/s", "of the bare limit", "model load s"],
                rows,
            )
            + f"\n\nCommand: `{sc['command']}`; results: `benchmarks/results/score.json`."
        )
    if kernels_path.exists():
        parts.append(_kernels_part(json.loads(kernels_path.read_text(encoding="utf-8"))))
    return "\n\n".join(parts) if parts else "Not measured yet."


def _kernels_part(k: dict[str, Any]) -> str:
    """The two CPU kernel choices (models/attention.py, train/trainer.py): speed-up of the fp32 attention core
    over the bf16 one per shape, pass and length, and fused over multi-tensor AdamW."""
    lengths = sorted({a["length"] for a in k["attention"]})
    by_row: dict[tuple[str, str], dict[int, str]] = {}
    for a in k["attention"]:
        s = a["speedup_of_fp32_core"]
        by_row.setdefault((a["shape"], a["mode"]), {})[a["length"]] = f"{s['median']:.2f}x"
    rows = [[shape, mode] + [cells.get(n, "") for n in lengths] for (shape, mode), cells in by_row.items()]
    w = k["adamw_minilm"]
    s = w["speedup_of_fused"]
    return (
        "**CPU kernels** (attention under bf16 autocast: time with the bf16 core / time with the core upcast "
        f"to fp32, median of {k['rounds']} fresh-process rounds; rewardsmith upcasts heads of at most 32 dims, "
        "`src/rewardsmith/models/attention.py`):\n\n"
        + _table(["heads", "pass"] + [f"{n} tokens" for n in lengths], rows)
        + f"\n\nAdamW step over MiniLM's parameters: {w['foreach_ms']:.1f} ms multi-tensor, {w['fused_ms']:.1f} "
        f"ms fused ({s['median']:.1f}x, {s['min']:.1f}-{s['max']:.1f}); rewardsmith's Trainer uses the fused "
        f"kernel. Command: `{k['command']}`; results: `benchmarks/results/kernels.json`."
    )


BLOCKS: dict[str, Callable[[], str]] = {"speed": block_speed}
