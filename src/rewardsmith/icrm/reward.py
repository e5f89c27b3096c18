"""A reward for RL from the ICRM's utility u and confidence s (METHODS.md section 2, RLVR).

For completion i of a prompt, with b a baseline utility (the mean u of the prompt's completions, i.e. the
group GRPO samples, or 0):
    reward_i = (2 sigmoid(u_i - b) - 1) * kappa_i,   kappa_i = e_i / (1 + e_i),   e_i = softplus(s_i)
The first factor is directional (the sign says whether the completion is preferred to the baseline under
the demonstrated standard, in (-1, 1)); kappa in (0, 1) is the completion's share of Beta evidence, so a
completion the model is unsure about moves the policy less.

ICRMReward is a callable with the signature TRL's GRPOTrainer passes to custom reward functions:
reward(prompts=..., completions=..., **kwargs) -> list[float].
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardsmith.data.adapters._common import chat_turns
from rewardsmith.data.adapters.generic import parse_prompt
from rewardsmith.data.schema import PreferencePair, message_text
from rewardsmith.icrm.scoring import ICRMScorer

BASELINES = ("group", "zero")


def directional_reward(utility: np.ndarray, confidence: np.ndarray, baseline: np.ndarray | float = 0.0) -> np.ndarray:
    """(2 sigmoid(u - b) - 1) * softplus(s) / (1 + softplus(s)); all arrays (M,). Returns (M,) in (-1, 1)."""
    u = np.asarray(utility, dtype=np.float64)
    evidence = np.logaddexp(0.0, np.asarray(confidence, dtype=np.float64))
    direction = np.tanh((u - baseline) / 2.0)  # = 2 sigmoid(u - b) - 1
    return direction * evidence / (1.0 + evidence)


class ICRMReward:
    """GRPO reward function: scores each (prompt, completion) under fixed demonstrations.

    baseline: "group" subtracts the mean utility of the completions that share a prompt; "zero" does not.
    """

    def __init__(self, scorer: ICRMScorer, demos: Sequence[PreferencePair] = (), baseline: str = "group"):
        if baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
        self.scorer = scorer
        self.demos = list(demos)
        self.baseline = baseline
        self.__name__ = "icrm_reward"  # TRL logs reward functions by name

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        prompt_texts = [message_text(p) for p in prompts]
        # A conversational prompt (a message list) keeps its turns; a text prompt is read as the model's template
        # reads one (a chat-templated string, an HH transcript, or one user message).
        read = getattr(self.scorer.encoder, "parse_prompt", None) or (lambda text: parse_prompt(text, "prompt"))
        items = [
            (chat_turns(p) if isinstance(p, list) else read(str(p)), message_text(c))
            for p, c in zip(prompts, completions, strict=True)
        ]
        u, s = self.scorer.score_texts(items, self.demos)
        base = np.zeros_like(u)
        if self.baseline == "group":
            groups: dict[str, list[int]] = defaultdict(list)
            for i, p in enumerate(prompt_texts):
                groups[p].append(i)
            for idx in groups.values():
                base[idx] = u[idx].mean()
        return [float(r) for r in directional_reward(u, s, base)]
