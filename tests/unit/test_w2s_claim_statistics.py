"""rewardsmith.w2s.metrics.claim_statistics: the paired contrasts of the ANCHOR claims on correctness arrays whose
accuracies are set by hand, so every point estimate is known."""

from __future__ import annotations

import numpy as np
import pytest

from rewardsmith.w2s.config import AnchorSettings, MethodConfig, ShiftConfig
from rewardsmith.w2s.metrics import anchor_selection, claim_statistics


def _correct(acc: float, n: int = 200, seeds: int = 3) -> np.ndarray:
    """(seeds, n) correctness with exactly acc * n correct pairs in every seed."""
    k = round(acc * n)
    return np.tile(np.r_[np.ones(k), np.zeros(n - k)], (seeds, 1))


def _anchor(name: str, weight: float, depth: float = 1.0) -> MethodConfig:
    return MethodConfig(name, "anchor", anchor=AnchorSettings(weight=weight, layers=[depth], normalise=True))


@pytest.fixture
def setup() -> tuple[ShiftConfig, dict[str, dict[str, np.ndarray]]]:
    methods = [
        MethodConfig("naive", "naive"),
        MethodConfig("seam", "naive", refiner="seam"),
        _anchor("anchor-0.1", 0.1),
        _anchor("anchor-1000", 1000.0),
        _anchor("anchor-0.1-mid", 0.1, 0.5),
    ]
    cfg = ShiftConfig(methods=methods)
    acc = {  # (ID, t1, t2)
        "teacher": (0.55, 0.50, 0.60),
        "naive": (0.60, 0.52, 0.50),
        "seam": (0.59, 0.53, 0.55),
        "anchor-0.1": (0.58, 0.57, 0.52),
        "anchor-1000": (0.50, 0.50, 0.60),
        "anchor-0.1-mid": (0.60, 0.55, 0.50),
        "ceiling": (0.62, 0.58, 0.45),
    }
    correct = {
        m: {
            split: _correct(a, seeds=1 if m == "teacher" else 3) for split, a in zip(("id", "t1", "t2"), v, strict=True)
        }
        for m, v in acc.items()
    }
    return cfg, correct


def test_contrasts_have_the_hand_computed_points(setup) -> None:
    cfg, correct = setup
    validation = {
        "anchor-0.1": {"accuracy": 60.0},
        "anchor-1000": {"accuracy": 50.0},
        "anchor-0.1-mid": {"accuracy": 59.0},
    }
    selection = anchor_selection(cfg, validation)
    stats = claim_statistics(cfg, correct, selection, n_boot=200, confidence=0.95)
    # (a) naive: WRG 5, AOG(t1) 2, AOG(t2) -10
    assert stats["gain_lost"]["t1"]["value"] == pytest.approx(3.0)
    assert stats["gain_lost"]["t2"]["value"] == pytest.approx(15.0)
    # (b) ANCHOR at lambda* = 0.1 (validation), NTS = AOG (it beats the teacher in domain): t1 7 against the best of
    # naive 2 and SEAM 3; t2 -8 against SEAM's -5
    assert stats["anchor"] == {"method": "anchor-0.1", "weight": 0.1}
    assert stats["anchor_vs_best_other"]["others"] == ["naive", "seam"]
    assert stats["anchor_vs_best_other"]["t1"]["value"] == pytest.approx(4.0)
    assert stats["anchor_vs_best_other"]["t2"]["value"] == pytest.approx(-3.0)
    # (c) lambda_max = 1000 loses 5 points in domain (NTS penalty 5): NTS t1 = 0 - 5, t2 = 0 - 5
    assert stats["anchor_grid"]["strongest"] == "anchor-1000"
    assert stats["too_strong"]["id"]["value"] == pytest.approx(-10.0)
    assert stats["trade_off"]["t1"]["value"] == pytest.approx(min(7 - 2, 7 - (-5)))
    assert stats["trade_off"]["t2"]["value"] == pytest.approx(min(-8 - (-10), -8 - (-5)))
    # (d) last minus middle layer at 0.1: t1 7 - 5
    assert stats["last_minus_middle"]["middle"] == "anchor-0.1-mid"
    assert stats["last_minus_middle"]["t1"]["value"] == pytest.approx(2.0)
    for rec in stats["anchor_vs_best_other"]["t1"], stats["trade_off"]["t2"]:
        low, high = rec["ci"]
        assert low <= rec["value"] <= high


def test_without_anchor_only_claim_a(setup) -> None:
    cfg, correct = setup
    cfg = ShiftConfig(methods=[MethodConfig("naive", "naive"), MethodConfig("seam", "naive", refiner="seam")])
    stats = claim_statistics(cfg, {k: correct[k] for k in ("teacher", "naive", "seam")}, [], 50, 0.95)
    assert set(stats) == {"gain_lost"}
