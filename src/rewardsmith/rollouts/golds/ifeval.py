"""The verifiable gold: the share of a prompt's attached instructions a response follows (IFEval's
instruction-level strict accuracy, checked by if-verifiable; rollouts/instructions.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rewardsmith.rollouts.gold import FloatArray, Gold, GoldContext
from rewardsmith.rollouts.instructions import fraction_followed
from rewardsmith.rollouts.prompt import BonPrompt


def score(_: str, prompts: Sequence[BonPrompt], responses: Sequence[Sequence[str]], __: GoldContext) -> FloatArray:
    out = np.full((len(prompts), max((len(r) for r in responses), default=0)), np.nan)
    for p, (prompt, answers) in enumerate(zip(prompts, responses, strict=True)):
        text = prompt.turns[-1].content
        for k, answer in enumerate(answers):
            out[p, k] = fraction_followed(answer, prompt.meta["instructions"], text)
    return out


GOLD = Gold("ifeval", "share of the attached instructions followed (IFEval checkers, strict)", "instructions", score)
