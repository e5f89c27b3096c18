"""Sampling a policy's completions (`sample`, `bon --policy`, the RL gold tracker): sampler 2 (rollouts/policy.py:
the prompt read once for one row and its cache copied to every row; the next token drawn without sorting the
vocabulary) against sampler 1 (every row reads the prompt; every step sorts the whole vocabulary), each in its
own fresh process, the two alternating, median of the rounds.

    .venv/bin/python benchmarks/bench_sampling.py --rounds 3

Sampler 1 is rebuilt here from sampler 2's code: the same generate loop with the prompt's shared cache switched off
and the nucleus taken from a full sort (as tests/unit/test_sampler.py compares them). Each worker loads SmolLM2
(the embedded policy), samples N completions of 48 tokens for each of a few HH-RLHF helpful prompts at top_p 1.0 (the
testbed's setting, `sample`'s default) and at 0.9 (bon's), and reports the sampling seconds of each; the policy's
load is not counted. Writes benchmarks/results/sampling.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, rotated, run_worker, spread, write_results

RESULTS = Path(__file__).resolve().parent / "results" / "sampling.json"
VARIANTS = ("sampler 1", "sampler 2")
TOP_PS = (1.0, 0.9)


def _sampler_1() -> None:
    """Sampler 1's way, inside this worker: every row reads the prompt, and the nucleus comes from a full sort."""
    import torch

    from rewardsmith.rollouts import policy

    def sorted_nucleus(probs: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(ordered, dim=-1) - ordered
        return torch.where(before >= top_p, torch.zeros_like(ordered), ordered), order

    def call(self: Any, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.top_p = min(self.top_p, 1.0 - 1e-12)  # sampler 1 sorted at top_p 1 too
        return original(self, input_ids, scores)

    original = policy.SeededSampling.__call__
    policy.nucleus = sorted_nucleus  # type: ignore[assignment]
    policy.SeededSampling.__call__ = call  # type: ignore[method-assign]
    policy._prompt_cache = lambda *_: None  # type: ignore[assignment]


def worker(variant: str, prompts: int, n: int) -> None:
    import torch

    from rewardsmith.rollouts.policy import load_policy, sample_prompt
    from rewardsmith.rollouts.prompts import load_prompts

    torch.set_num_threads(2)
    if variant == "sampler 1":
        _sampler_1()
    policy = load_policy("smollm2")
    chosen = load_prompts("hh-rlhf/helpful-base", None, prompts, 0)
    out: dict[str, Any] = {"prompt_tokens": [len(policy.prompt_ids(p)) for p in chosen]}
    for top_p in TOP_PS:
        start = time.perf_counter()
        tokens = 0
        for p in chosen:
            done = sample_prompt(policy, p, n, seed=0, temperature=1.0, top_p=top_p, max_new_tokens=48, batch_size=n)
            tokens += sum(c.tokens for c in done)
        out[f"top_p={top_p}"] = {"seconds": round(time.perf_counter() - start, 2), "tokens": tokens}
    print(json.dumps(out))


def _ratio_text(ratio: dict[str, Any]) -> str:
    return f"{ratio['median']:.2f}x ({ratio['min']:.2f}-{ratio['max']:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.prompts, args.n)
        return
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        for variant in rotated(VARIANTS, r):
            extra = ["--prompts", str(args.prompts), "--n", str(args.n)]
            runs[variant].append(run_worker(__file__, ["--worker", variant, *extra], variant))
            timed = [(k, v) for k, v in runs[variant][-1].items() if k.startswith("top_p")]
            seconds = ", ".join(f"{k} {v['seconds']:.1f} s" for k, v in timed)
            print(f"round {r + 1} {variant}: {seconds}", flush=True)
    keys = [f"top_p={p}" for p in TOP_PS]
    median = {v: {k: statistics.median(x[k]["seconds"] for x in runs[v]) for k in keys} for v in VARIANTS}
    pairs = list(zip(runs["sampler 1"], runs["sampler 2"], strict=True))
    ratios = {k: spread([a[k]["seconds"] / b[k]["seconds"] for a, b in pairs]) for k in keys}
    out = {
        "benchmark": "sampling",
        "command": f"python benchmarks/bench_sampling.py --rounds {args.rounds} --prompts {args.prompts} --n {args.n}",
        "rounds": args.rounds,
        "prompts": args.prompts,
        "n": args.n,
        "max_new_tokens": 48,
        "runs": runs,
        "median": median,
        "sampler_1_over_sampler_2": ratios,
    }
    rows = [[k, f"{median['sampler 1'][k]:.1f}", f"{median['sampler 2'][k]:.1f}", _ratio_text(ratios[k])] for k in keys]
    table = "\n".join(markdown_table(["setting", "sampler 1 s", "sampler 2 s", "sampler 1 / 2"], "lrrl", rows))
    write_results(RESULTS, out, table)


if __name__ == "__main__":
    main()
