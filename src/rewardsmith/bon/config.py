"""The settings of `rewardsmith bon` (typed; the command-line flags are generated from these fields)."""

from __future__ import annotations

from dataclasses import dataclass

from rewardsmith.config import MAX_SEED, option


@dataclass
class BonConfig:
    policy: str | None = option(
        None,
        "the policy that samples: `smollm2` (SmolLM2-135M-Instruct, embedded) or a local causal LM folder; give this "
        "or --samples",
    )
    samples: str | None = option(
        None,
        "completions made elsewhere (vLLM, an RL rollout dump): JSONL, one prompt a line: {prompt: text or chat "
        "messages, responses: [text, ...]} (+ instructions / answer for the golds that need them); give this or "
        "--policy",
    )
    prompts: str | None = option(
        None,
        "what the policy answers: math-500 | ifeval/<dataset> (a dataset's prompts with verifiable instructions "
        "attached) | a dataset name | a JSONL file of {prompt, instructions?, answer?}",
    )
    prompts_limit: int | None = option(None, "answer at most this many prompts (a stable hash picks them)", min=1)
    proxies: list[str] = option([], "reward models that choose the best of n (any model `score` takes)")
    golds: list[str] = option(
        [],
        "what judges the choice: ifeval (instructions followed) | math (MATH-500 answer) | a reward model the proxies "
        "are not",
    )
    n: int = option(16, "samples per prompt: the largest n of best-of-n", min=2, max=256)
    temperature: float = option(1.0, "sampling temperature", min=0.0, min_exclusive=True)
    top_p: float = option(
        1.0,
        "nucleus sampling: keep the smallest set of tokens of this total probability",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )
    max_new_tokens: int = option(96, "longest completion, in tokens (a longer one is cut and counted)", min=1)
    seed: int = option(
        0, "seed of every sample (with the prompt and the sample's index) and of the bootstrap", min=0, max=MAX_SEED
    )
    sample_batch_size: int = option(
        16, "completions sampled per forward pass (one prompt's at a time)", min=1, volatile=True
    )
    n_boot: int = option(1000, "bootstrap replicates over prompts of every 95% CI", min=0)
    data_dir: str | None = option(
        None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)", volatile=True
    )
