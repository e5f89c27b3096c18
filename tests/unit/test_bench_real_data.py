"""The RM-Bench and local suites on the real data (a few rows each) with a scorer whose reward is the response's
length: its scores must equal each measure's length rule, its length-controlled accuracy must be 50 and its
reward-length correlation 1, whatever the data. Skips without the data folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rewardsmith.bench.runner import load_suites, run_suites
from rewardsmith.bench.schema import Text
from rewardsmith.bench.suite import EvalOptions


def length_score(texts: Sequence[Text]) -> np.ndarray:
    return np.array([len(response) for _, response in texts], dtype=np.float64)


def test_length_scorer_reproduces_the_length_rule_on_real_data(data_dir: Path) -> None:
    loaded, missing = load_suites(data_dir, ["rm-bench", "local"], limit=40)
    assert {d.suite for d in loaded} == {"rm-bench", "local"}, [str(m) for m in missing]
    result = run_suites(loaded, length_score, EvalOptions(n_boot=100))
    assert result.texts["requested"] == sum(len(r.responses) for d in loaded for r in d.rows)
    checked = 0
    for suite in ("rm-bench", "local"):
        for m in result.suites[suite]["measures"]:
            assert m["score"] == pytest.approx(m["length_rule"]), (suite, m["subset"], m["metric"])
            if m.get("length_controlled") is not None:
                assert m["length_controlled"] == pytest.approx(50.0)
            if m.get("length_correlation") is not None:
                assert m["length_correlation"] == pytest.approx(1.0)
                checked += 1
    assert checked >= 5
    rm = {(m["subset"], m["metric"]): m for m in result.suites["rm-bench"]["measures"]}
    # Detailed variants are longer than concise ones, so a length scorer loses most hard comparisons.
    assert rm[("overall", "hard")]["score"] < rm[("overall", "easy")]["score"]
    assert rm[("overall", "hard - easy")]["score"] == pytest.approx(
        rm[("overall", "hard")]["score"] - rm[("overall", "easy")]["score"]
    )
    assert result.suites["local"]["summary"]["subsets"]["hh-rlhf/harmless-base"] == 40
