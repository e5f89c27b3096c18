"""The answer gold of MATH-500: 1 when the response's final answer equals the reference answer by math-verify
(HuggingFace's maintained checker: it parses LaTeX and plain expressions and compares them symbolically), else
0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardsmith.bon.gold import FloatArray, Gold, GoldContext
from rewardsmith.bon.prompts import BonPrompt
from rewardsmith.errors import ConfigError


def _checker() -> tuple[Any, Any]:
    try:
        from math_verify import parse, verify
    except ImportError:  # pragma: no cover - a dependency
        raise ConfigError("the math gold needs the `math-verify` package: pip install math-verify") from None
    return parse, verify


def correct(response: str, answer: str) -> float:
    """1.0 when math-verify finds the reference answer in the response (its last answer), else 0.0."""
    parse, verify = _checker()
    gold = parse("$" + answer + "$")
    return float(bool(gold) and bool(verify(gold, parse(response))))


def score(_: str, prompts: Sequence[BonPrompt], responses: Sequence[Sequence[str]], __: GoldContext) -> FloatArray:
    out = np.full((len(prompts), max((len(r) for r in responses), default=0)), np.nan)
    for p, (prompt, answers) in enumerate(zip(prompts, responses, strict=True)):
        for k, answer in enumerate(answers):
            out[p, k] = correct(answer, prompt.meta["answer"])
    return out


GOLD = Gold("math", "final answer equal to MATH-500's reference (math-verify)", "answer", score)
