"""The settings of `rewardsmith bon` (typed; the command-line flags are generated from these fields): the sampling
settings of `rewardsmith sample` (rollouts.sampling.SampleConfig), plus what chooses and judges."""

from __future__ import annotations

from dataclasses import dataclass

from rewardsmith.config import option
from rewardsmith.rollouts.sampling import SampleConfig


@dataclass
class BonConfig(SampleConfig):
    samples: str | None = option(
        None,
        "completions made elsewhere (vLLM, an RL rollout dump, `rewardsmith sample`): JSONL, one prompt a line: "
        "{prompt: text or chat messages, responses: [text, ...]} (+ instructions / answer for the golds that need "
        "them); give this or --policy",
    )
    proxies: list[str] = option([], "reward models that choose the best of n (any model `score` takes)")
    golds: list[str] = option(
        [],
        "what judges the choice: ifeval (instructions followed) | math (MATH-500 answer) | a reward model the proxies "
        "are not",
    )
    n_boot: int = option(1000, "bootstrap replicates over prompts of every 95% CI", min=0)
