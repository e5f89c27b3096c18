"""The answer gold of MATH-500: 1 when the response's final answer equals the reference answer by math-verify
(HuggingFace's maintained checker: it parses LaTeX and plain expressions and compares them symbolically), else
0; NaN (not checked, left out of every estimate and counted in bon's summary) when math-verify's comparison timed
out, rather than its bare "Timeout during comparison" on stderr and a silent 0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardsmith.errors import ConfigError
from rewardsmith.rollouts.gold import FloatArray, Gold, GoldContext
from rewardsmith.rollouts.prompt import BonPrompt


def _checker() -> tuple[Any, Any]:
    try:
        from math_verify import parse, verify
    except ImportError:  # pragma: no cover - a dependency
        raise ConfigError("the math gold needs the `math-verify` package: pip install math-verify") from None
    return parse, verify


def correct(response: str, answer: str) -> float:
    """1.0 when math-verify finds the reference answer in the response (its last answer), 0.0 when it does not or
    cannot compare them, NaN when the comparison timed out."""
    parse, verify = _checker()
    from math_verify.errors import TimeoutException

    gold = parse("$" + answer + "$")
    if not gold:
        return 0.0
    try:
        return float(bool(verify(gold, parse(response), raise_on_error=True)))
    except TimeoutException:
        return float("nan")
    except Exception:  # an expression math-verify cannot compare: not shown equal, as its own default says
        return 0.0


def score(_: str, prompts: Sequence[BonPrompt], responses: Sequence[Sequence[str]], __: GoldContext) -> FloatArray:
    out = np.full((len(prompts), max((len(r) for r in responses), default=0)), np.nan)
    for p, (prompt, answers) in enumerate(zip(prompts, responses, strict=True)):
        for k, answer in enumerate(answers):
            out[p, k] = correct(answer, prompt.meta["answer"])
    return out


GOLD = Gold("math", "final answer equal to MATH-500's reference (math-verify)", "answer", score)
