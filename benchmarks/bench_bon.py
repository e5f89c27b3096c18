"""Best-of-n speed as a user sees it, every measured run in its own fresh process, alternating:

- sampling: `rewardsmith bon`'s sampler (rollouts.policy.sample_prompt: transformers' generate loop with one seeded
  generator per sample) against a bare `model.generate(do_sample=True)` loop with the same temperature, top-p,
  batch (the N samples of one prompt) and token budget, on the same prompts; new tokens per second of each (the
  samples stop at EOS at different points, so the rate, not the time, is compared), the policy's load timed apart;
- scoring: `rewardsmith bon`'s scoring step (jobs.bon.ModelScores: each distinct text once, through the one
  inference path) against `rewardsmith score` (jobs.score.score_file) on the same (prompt, response) texts with the
  same model; texts per second of each, model load included in neither.

    .venv/bin/python benchmarks/bench_bon.py --prompts 4 --n 16 --max-new-tokens 64 --rounds 3

Writes benchmarks/results/bon.json and prints a table.
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

from rewardsmith.evaluate.formatting import with_range

RESULTS = Path(__file__).resolve().parent / "results" / "bon.json"
TEMPERATURE, TOP_P = 0.7, 0.9


def _prompts(n: int, data_dir: str | None) -> list[Any]:
    from rewardsmith.rollouts.prompts import load_prompts

    return load_prompts("hh-rlhf/helpful-base", data_dir, limit=n)


def measure_sampling(kind: str, n_prompts: int, n: int, max_new_tokens: int, data_dir: str | None) -> dict[str, Any]:
    import torch

    from rewardsmith.rollouts.policy import load_policy, sample_prompt

    prompts = _prompts(n_prompts, data_dir)
    t0 = time.perf_counter()
    policy = load_policy("smollm2")
    load = time.perf_counter() - t0
    tokens = 0
    t0 = time.perf_counter()
    for prompt in prompts:
        if kind == "bon":
            done = sample_prompt(
                policy, prompt, n, seed=0, temperature=TEMPERATURE, top_p=TOP_P, max_new_tokens=max_new_tokens,
                batch_size=n,
            )  # fmt: skip
            tokens += sum(c.tokens for c in done)
        else:
            ids = torch.tensor([policy.prompt_ids(prompt)] * n)
            eos = policy.tokenizer.eos_token_id
            with torch.no_grad():
                out = policy.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=TEMPERATURE,
                    top_p=TOP_P, top_k=0, max_new_tokens=max_new_tokens, eos_token_id=eos,
                    pad_token_id=policy.tokenizer.pad_token_id,
                )  # fmt: skip
            for row in out[:, ids.shape[1] :].tolist():
                tokens += row.index(eos) + 1 if eos in row else len(row)
    seconds = time.perf_counter() - t0
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds, "load_seconds": load}


def measure_scoring(kind: str, model: str, samples: str) -> dict[str, Any]:
    from rewardsmith.inference import InferenceOptions, ModelScores, load_inference
    from rewardsmith.jobs.bon import _distinct, read_samples_file

    prompts, responses = read_samples_file(Path(samples), 4)
    texts, _ = _distinct(prompts, responses)
    if kind == "bon":
        scores = ModelScores(InferenceOptions(), progress=False)
        scores.loaded[model] = load_inference(model)  # loaded before the clock, as for score below
        t0 = time.perf_counter()
        scores(model, texts)
    else:
        from rewardsmith.jobs.score import score_file

        rows = Path(samples).with_name("rows.jsonl")
        rows.write_text(
            "".join(
                json.dumps({"prompt": [{"role": t.role, "content": t.content} for t in p], "response": r}) + "\n"
                for p, r in texts
            )
        )
        result = score_file(model, rows, Path(samples).with_name("scored.jsonl"), progress=False, overwrite=True)
        seconds = float(result.metrics["score_seconds"])  # score's own clock: encoding and scoring, load apart
        return {"texts": len(texts), "seconds": seconds, "texts_per_s": len(texts) / seconds}
    seconds = time.perf_counter() - t0
    return {"texts": len(texts), "seconds": seconds, "texts_per_s": len(texts) / seconds}


def prepare(folder: Path, data_dir: str | None) -> tuple[Path, Path]:
    """A saved MiniLM reward model (seeded head) and a samples file of 64 prompts x 4 responses of HH pairs."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.models import build_reward_model
    from rewardsmith.models.factory import save_model

    cfg = ModelConfig(backbone="minilm", max_length=256, template="hh")
    model, tok = build_reward_model(cfg, seed=0)
    save_model(model, tok, folder / "model", cfg)
    pairs = load_dataset("hh-rlhf/helpful-base", data_dir=data_dir).pairs[:128]
    lines = []
    for a, b in zip(pairs[0::2], pairs[1::2], strict=True):
        prompt = [{"role": t.role, "content": t.content} for t in a.prompt]
        lines.append({"prompt": prompt, "responses": [a.chosen, a.rejected, b.chosen, b.rejected]})
    samples = folder / "samples.jsonl"
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder / "model", samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        what, kind, *rest = args.worker
        if what == "sampling":
            print(json.dumps(measure_sampling(kind, args.prompts, args.n, args.max_new_tokens, args.data_dir)))
        else:
            print(json.dumps(measure_scoring(kind, *rest)))
        return
    script = str(Path(__file__).resolve())
    common = ["--prompts", str(args.prompts), "--n", str(args.n), "--max-new-tokens", str(args.max_new_tokens)]
    common += ["--data-dir", args.data_dir] if args.data_dir else []
    runs: dict[str, list[dict[str, Any]]] = {
        "sampling:bon": [],
        "sampling:bare": [],
        "scoring:bon": [],
        "scoring:score": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        model, samples = prepare(Path(tmp), args.data_dir)
        for r in range(args.rounds):
            for kind in rotated(["bon", "bare"], r):
                runs[f"sampling:{kind}"].append(run_worker(script, [*common, "--worker", "sampling", kind], kind))
            for kind in rotated(["bon", "score"], r):
                worker = [*common, "--worker", "scoring", kind, str(model), str(samples)]
                runs[f"scoring:{kind}"].append(run_worker(script, worker, kind))
    sampling = [
        b["tokens_per_s"] / a["tokens_per_s"] for b, a in zip(runs["sampling:bon"], runs["sampling:bare"], strict=True)
    ]
    scoring = [
        b["texts_per_s"] / a["texts_per_s"] for b, a in zip(runs["scoring:bon"], runs["scoring:score"], strict=True)
    ]
    out = {
        "command": "python benchmarks/bench_bon.py " + " ".join(sys.argv[1:]),
        "settings": {
            "prompts": args.prompts,
            "n": args.n,
            "max_new_tokens": args.max_new_tokens,
            "temperature": TEMPERATURE,
            "top_p": TOP_P,
            "rounds": args.rounds,
        },
        "runs": runs,
        "sampling_ratio": spread(sampling),
        "scoring_ratio": spread(scoring),
    }
    rate = {
        k: statistics.median(x["tokens_per_s" if k.startswith("sampling") else "texts_per_s"] for x in v)
        for k, v in runs.items()
    }

    def ratio(name: str) -> str:
        r = out[f"{name}_ratio"]
        return with_range(r, unit="")

    table = (
        "| what | rewardsmith bon | reference | ratio (median, range) |\n|---|---:|---:|---|\n"
        f"| sampling, new tokens/s | {rate['sampling:bon']:.1f} | bare generate {rate['sampling:bare']:.1f} | "
        f"{ratio('sampling')} |\n"
        f"| scoring, texts/s | {rate['scoring:bon']:.1f} | rewardsmith score {rate['scoring:score']:.1f} | "
        f"{ratio('scoring')} |"
    )
    write_results(RESULTS, out, table)


if __name__ == "__main__":
    main()
