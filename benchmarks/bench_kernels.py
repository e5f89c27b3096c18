"""Two kernel choices rewardsmith makes on CPU, measured: the attention core's precision under bf16 autocast
(models/attention.py) and the AdamW implementation (train/trainer.py).

- attention: torch's scaled_dot_product_attention with a padding mask, as transformers calls it, forward +
  backward (training) and forward only (scoring), with q/k/v in bf16 ("bf16-core") or upcast to fp32 and the
  output cast back ("fp32-core"). Two head shapes: MiniLM's (32 texts x 12 heads x 32 dims) and SmolLM2-135M's
  (16 texts x 9 heads x 64 dims), at several lengths.
- adamw: one optimiser step over MiniLM's parameters, torch's default multi-tensor loop ("foreach") against
  the fused kernel ("fused").

Each variant runs in its own fresh process; per round the four processes run in a rotating order; the ratios
are paired per round (median and range over rounds). Inside a process each figure is the median of 7 timed
calls after 2 warm-up calls.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_kernels.py --rounds 3

Writes benchmarks/results/kernels.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, rotated, run_worker, spread, write_results

from rewardsmith.evaluate.formatting import with_range

RESULTS = Path(__file__).resolve().parent / "results" / "kernels.json"
VARIANTS = ("bf16-core", "fp32-core", "foreach", "fused")
SHAPES = {"minilm (32 texts, 12 heads x 32)": (32, 12, 32), "smollm2-135m (16 texts, 9 heads x 64)": (16, 9, 64)}
LENGTHS = (64, 128, 192, 256, 384)
MODES = ("forward+backward", "forward")


def _median_ms(fn: Callable[[], None], warmup: int = 2, repeats: int = 7) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(1e3 * statistics.median(times), 3)


def measure_attention(fp32_core: bool) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    out = {}
    for shape_name, (rows, heads, dim) in SHAPES.items():
        for length in LENGTHS:
            lengths = torch.randint(length // 2, length + 1, (rows,))
            mask = (torch.arange(length)[None, :] < lengths[:, None])[:, None, None, :].expand(rows, 1, length, length)
            q, k, v = (torch.randn(rows, heads, length, dim, dtype=torch.bfloat16) for _ in range(3))
            for mode in MODES:
                train = mode == "forward+backward"
                q.requires_grad_(train)
                k.requires_grad_(train)
                v.requires_grad_(train)

                def call(q: Any = q, k: Any = k, v: Any = v, mask: Any = mask, train: bool = train) -> None:
                    with torch.set_grad_enabled(train):
                        if fp32_core:
                            o = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
                            o = o.to(torch.bfloat16)
                        else:
                            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                        if train:
                            o.float().sum().backward()

                out[f"{shape_name} | {length} | {mode}"] = _median_ms(call)
    return out


def measure_adamw(fused: bool) -> dict[str, float]:
    import torch

    from rewardsmith.config import ModelConfig
    from rewardsmith.models import build_reward_model

    model, _ = build_reward_model(ModelConfig(backbone="minilm", max_length=256), seed=0)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=2e-5, fused=fused)
    return {"minilm step": _median_ms(optimizer.step, warmup=3, repeats=15)}


MEASURES: dict[str, Callable[[], dict[str, float]]] = {
    "bf16-core": lambda: measure_attention(False),
    "fp32-core": lambda: measure_attention(True),
    "foreach": lambda: measure_adamw(False),
    "fused": lambda: measure_adamw(True),
}


def drive(rounds: int) -> None:
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for variant in rotated(VARIANTS, r):
            record = run_worker(__file__, ["--worker", variant], variant)
            runs[variant].append({k: v for k, v in record.items() if not k.startswith("process_")})
            print(f"round {r + 1} {variant} done", file=sys.stderr, flush=True)
    attention = []
    for key in runs["bf16-core"][0]:
        shape, length, mode = key.split(" | ")
        slow, fast = [x[key] for x in runs["bf16-core"]], [x[key] for x in runs["fp32-core"]]
        attention.append(
            {
                "shape": shape,
                "length": int(length),
                "mode": mode,
                "bf16_core_ms": statistics.median(slow),
                "fp32_core_ms": statistics.median(fast),
                "speedup_of_fp32_core": spread([s / f for s, f in zip(slow, fast, strict=True)]),
            }
        )
    foreach, fused = [x["minilm step"] for x in runs["foreach"]], [x["minilm step"] for x in runs["fused"]]
    adamw = {
        "foreach_ms": statistics.median(foreach),
        "fused_ms": statistics.median(fused),
        "speedup_of_fused": spread([a / b for a, b in zip(foreach, fused, strict=True)]),
    }
    out = {
        "benchmark": "kernels",
        "rounds": rounds,
        "attention": attention,
        "adamw_minilm": adamw,
        "runs": runs,
        "command": f"OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_kernels.py --rounds {rounds}",
    }
    write_results(RESULTS, out, table(out))


def table(out: dict[str, Any]) -> str:
    header = ["attention shape", "tokens", "pass", "bf16 core ms", "fp32 core ms", "fp32 core speed-up (range)"]
    rows = [
        [
            a["shape"],
            a["length"],
            a["mode"],
            f"{a['bf16_core_ms']:.1f}",
            f"{a['fp32_core_ms']:.1f}",
            with_range(a["speedup_of_fp32_core"]),
        ]
        for a in out["attention"]
    ]
    lines = markdown_table(header, "lrlrrr", rows)
    w = out["adamw_minilm"]
    s = w["speedup_of_fused"]
    lines += [
        "",
        f"AdamW step over MiniLM's parameters: foreach {w['foreach_ms']:.1f} ms, "
        f"fused {w['fused_ms']:.1f} ms ({s['median']:.1f}x, {s['min']:.1f}-{s['max']:.1f})",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the four variants, at least 3")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(MEASURES[args.worker]()))
        return
    drive(args.rounds)


if __name__ == "__main__":
    main()
