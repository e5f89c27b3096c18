"""The learned gold: any reward model `score` takes (a rewardsmith folder, TRL, OpenRLHF, a LoRA adapter, a hub id
where the network allows), e.g. a stronger model trained on more data than the proxies. Its reward is the gold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rewardsmith.rollouts.gold import LEARNED, FloatArray, Gold, GoldContext
from rewardsmith.rollouts.prompt import BonPrompt


def score(spec: str, prompts: Sequence[BonPrompt], responses: Sequence[Sequence[str]], ctx: GoldContext) -> FloatArray:
    n = max((len(r) for r in responses), default=0)
    texts = [(prompt.turns, answer) for prompt, answers in zip(prompts, responses, strict=True) for answer in answers]
    rewards = ctx.score_with_model(spec, texts)
    return np.asarray(rewards, dtype=np.float64).reshape(len(prompts), n)


GOLD = Gold(LEARNED, "a reward model's reward", None, score)
