"""Known answers and invariances of the pure evaluation metrics."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rewardsmith.evaluate.metrics import (
    brier_score,
    evaluate_margins,
    expected_calibration_error,
    hypervolume_2d,
    length_controlled_accuracy,
    length_rule_accuracy,
    pairwise_accuracy,
    pairwise_correct,
    pareto_front,
    prefers_longer_rate,
    reliability_curve,
    soft_label_accuracy,
)
from rewardsmith.evaluate.rmbench import rmbench_accuracy
from rewardsmith.stats import Interval, interval_verdict, sigmoid

# ---------------------------------------------------------------------------------------------- accuracy


def test_pairwise_accuracy_counts_ties_as_half() -> None:
    est = pairwise_accuracy([1.0, -1.0, 0.0, 2.0], n_boot=200)
    assert est.estimate == pytest.approx(62.5)  # (1 + 0 + 0.5 + 1) / 4
    assert est.n == 4
    np.testing.assert_array_equal(pairwise_correct([3.0, -0.1, 0.0]), [1.0, 0.0, 0.5])


@pytest.mark.parametrize("scale", [1e-3, 0.5, 7.0])
def test_accuracy_and_ci_unchanged_by_positive_scaling(scale: float) -> None:
    margins = np.random.default_rng(1).normal(0.2, 1.0, 300)
    assert pairwise_accuracy(margins * scale, seed=3) == pairwise_accuracy(margins, seed=3)


def test_ci_contains_estimate_narrows_with_n_and_is_seeded() -> None:
    rng = np.random.default_rng(0)
    small = pairwise_accuracy(rng.normal(0.3, 1.0, 100), seed=0)
    large = pairwise_accuracy(rng.normal(0.3, 1.0, 10_000), seed=0)
    for est in (small, large):
        assert est.low <= est.estimate <= est.high
    assert (large.high - large.low) < (small.high - small.low) / 5
    margins = rng.normal(size=200)
    assert pairwise_accuracy(margins, seed=5) == pairwise_accuracy(margins, seed=5)
    assert pairwise_accuracy(margins, seed=5).ci != pairwise_accuracy(margins, seed=6).ci


def test_interval_to_dict_is_json_ready() -> None:
    est = Interval(50.0, float("nan"), 60.0, 3)
    assert est.to_dict() == {"estimate": 50.0, "low": None, "high": 60.0, "n": 3}
    assert pairwise_accuracy([1.0, -1.0], n_boot=0).ci == [None, None]


def test_soft_label_accuracy_ignores_half_labels() -> None:
    margins = [1.0, 1.0, -1.0, 2.0, 0.5]
    labels = [0.9, 0.2, 0.3, 0.5, 1.0]
    # pair 1: rejected preferred but scored lower -> wrong; pair 2: rejected preferred and scored
    # higher -> right; pair 3 (label 0.5) is ignored.
    est = soft_label_accuracy(margins, labels, n_boot=100)
    assert est.estimate == pytest.approx(75.0)
    assert est.n == 4
    with pytest.raises(ValueError):
        soft_label_accuracy([1.0], [1.5])


# ------------------------------------------------------------------------------------------ length rules


def test_length_rule_accuracy_known_answer() -> None:
    est = length_rule_accuracy([10, 5, 7, 3], [5, 10, 7, 1], n_boot=100)
    assert est.estimate == pytest.approx(62.5)  # 1 + 0 + 0.5 (equal length) + 1


def test_length_controlled_accuracy_hand_case() -> None:
    margins = [1, 1, -1, 1, -1, 1]
    chosen_len = [10, 10, 10, 2, 2, 5]
    rejected_len = [5, 5, 5, 8, 8, 5]
    lc = length_controlled_accuracy(margins, chosen_len, rejected_len, n_boot=300)
    # chosen longer: pairs 0-2, 2 of 3 right; chosen shorter: pairs 3-4, 1 of 2; pair 5 equal, excluded.
    assert lc.chosen_longer.estimate == pytest.approx(200 / 3)
    assert lc.chosen_longer.n == 3
    assert lc.chosen_shorter.estimate == pytest.approx(50.0)
    assert lc.chosen_shorter.n == 2
    assert lc.n_equal == 1
    assert lc.value.estimate == pytest.approx((200 / 3 + 50) / 2)
    assert lc.value.n == 5
    assert lc.value.low <= lc.value.estimate <= lc.value.high


def test_length_follower_scores_fifty_length_controlled_whatever_the_balance() -> None:
    rng = np.random.default_rng(2)
    chosen_len = rng.integers(50, 400, 500)
    rejected_len = np.where(rng.random(500) < 0.8, chosen_len - 20, chosen_len + 20)  # 80% chosen longer
    margins = (chosen_len - rejected_len).astype(float)
    assert pairwise_accuracy(margins, n_boot=0).estimate == pytest.approx(80.0, abs=5)
    lc = length_controlled_accuracy(margins, chosen_len, rejected_len, n_boot=100)
    assert lc.value.estimate == pytest.approx(50.0)


def test_length_metrics_invariant_to_swapping_sides_with_flipped_labels() -> None:
    rng = np.random.default_rng(4)
    margins = rng.normal(size=50)
    lc_len, lr_len = rng.integers(1, 100, 50), rng.integers(1, 100, 50)
    swap = rng.random(50) < 0.5
    m2 = np.where(swap, -margins, margins)
    c2, r2 = np.where(swap, lr_len, lc_len), np.where(swap, lc_len, lr_len)
    labels = np.where(swap, 0.0, 1.0)
    plain = evaluate_margins(margins, lc_len, lr_len, n_boot=50)
    swapped = evaluate_margins(m2, c2, r2, labels=labels, n_boot=50)
    for key in (
        "accuracy",
        "length_rule_accuracy",
        "length_controlled_accuracy",
        "prefers_longer_rate",
        "ece",
        "brier",
    ):
        assert swapped[key] == pytest.approx(plain[key]), key


def test_prefers_longer_rate_known_answer() -> None:
    est = prefers_longer_rate([1, 1, -1, 0], [10, 2, 2, 5], [5, 8, 8, 5], n_boot=50)
    # pair 0: longer (chosen) scored higher; pair 1: longer (rejected) scored lower; pair 2: longer
    # (rejected) scored higher; pair 3: equal lengths, excluded.
    assert est.estimate == pytest.approx(200 / 3)
    assert est.n == 3


# ------------------------------------------------------------------------------------------- calibration


def test_ece_top_label_constructed_case() -> None:
    probs = [0.8] * 5 + [0.3] * 2
    outcomes = [1, 1, 1, 1, 0, 0, 1]
    # p = 0.8 bin: confidence 0.8, accuracy 4/5 -> gap 0. p = 0.3: confidence 0.7, predicted side
    # (rejected) right once of twice -> gap 0.2, weight 2/7.
    assert expected_calibration_error(probs, outcomes) == pytest.approx(0.2 * 2 / 7)


def test_ece_probability_mode_and_perfect_calibration() -> None:
    ece = expected_calibration_error([0.2, 0.2, 0.8, 0.8], [0, 1, 1, 1], n_bins=2, mode="probability")
    assert ece == pytest.approx(0.5 * 0.3 + 0.5 * 0.2)
    calibrated = ([0.75] * 4, [1, 1, 1, 0])
    assert expected_calibration_error(*calibrated) == pytest.approx(0.0)
    assert expected_calibration_error(*calibrated, mode="probability") == pytest.approx(0.0)


def test_calibration_is_symmetric_in_pair_order() -> None:
    rng = np.random.default_rng(5)
    p, y = rng.random(200), rng.random(200)
    assert expected_calibration_error(1 - p, 1 - y) == pytest.approx(expected_calibration_error(p, y))
    assert brier_score(1 - p, 1 - y) == pytest.approx(brier_score(p, y))


def test_brier_known_answer_and_default_outcomes() -> None:
    assert brier_score([0.8, 0.3], [1, 0.5]) == pytest.approx(0.04)
    assert brier_score([0.9, 0.6]) == pytest.approx((0.01 + 0.16) / 2)


def test_reliability_curve_counts_and_json() -> None:
    probs = sigmoid(np.random.default_rng(6).normal(size=300))
    curve = reliability_curve(probs, n_bins=5)
    assert curve.counts.sum() == 300
    assert curve.edges[0] == 0.5 and curve.edges[-1] == 1.0
    json.dumps(curve.to_dict(), allow_nan=False)
    assert curve.ece() == pytest.approx(expected_calibration_error(probs, n_bins=5))


def test_preference_probabilities_are_stable() -> None:
    p = sigmoid([-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(p, [0.0, 0.5, 1.0])
    assert np.all(np.isfinite(p))


# ----------------------------------------------------------------------------------------- hypervolume


def test_hypervolume_of_staircase() -> None:
    staircase = [(1, 3), (2, 2), (3, 1)]
    assert hypervolume_2d(staircase) == pytest.approx(6.0)  # 3x1 + 2x1 + 1x1
    assert hypervolume_2d(staircase, reference=(0.5, 0.5)) == pytest.approx(2.5 * 0.5 + 1.5 + 0.5)
    assert hypervolume_2d([]) == 0.0


def test_hypervolume_unchanged_by_dominated_and_out_of_range_points() -> None:
    staircase = [(1, 3), (2, 2), (3, 1)]
    extra = [(1, 1), (0.5, 2.5), (2, 2), (2.9, 0.9), (-1, 10), (10, -1)]
    assert hypervolume_2d(staircase + extra) == pytest.approx(hypervolume_2d(staircase))


def test_pareto_front_filters_dominated_points() -> None:
    front = pareto_front([(1, 3), (2, 2), (3, 1), (1, 1), (2, 2), (0.5, 3), (2, 1.5)])
    np.testing.assert_array_equal(front, [[1, 3], [2, 2], [3, 1]])


# ---------------------------------------------------------------------------- comparisons and seeds


def test_evaluate_margins_block() -> None:
    rng = np.random.default_rng(8)
    margins = rng.normal(0.3, 1.0, 400)
    chosen_len, rejected_len = rng.integers(10, 300, 400), rng.integers(10, 300, 400)
    block = evaluate_margins(margins, chosen_len, rejected_len, n_boot=200)
    json.dumps(block, allow_nan=False)
    assert block["accuracy"] == pytest.approx(pairwise_accuracy(margins, n_boot=0).estimate)
    for key in ("accuracy", "length_rule_accuracy", "length_controlled_accuracy", "prefers_longer_rate"):
        low, high = block[f"{key}_ci"]
        assert low <= block[key] <= high
    assert block["chosen_longer_n"] + block["chosen_shorter_n"] + block["equal_length_n"] == 400
    assert block["n"] == 400 and block["n_ignored"] == 0
    assert 0 <= block["ece"] <= 0.5 and 0 <= block["brier"] <= 1
    labelled = evaluate_margins(margins, chosen_len, rejected_len, labels=np.r_[np.full(399, 0.9), 0.5], n_boot=50)
    assert labelled["n"] == 399 and labelled["n_ignored"] == 1


# ------------------------------------------------------------------------------------------- RM-Bench


def test_rmbench_matrix_known_answer() -> None:
    chosen = [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]
    rejected = [[0.0, 1.5, 2.5], [1.0, 1.0, 1.0]]
    result = rmbench_accuracy(chosen, rejected, n_boot=100)
    # Prompt 1: chosen_i beats rejected_j for (0,0), (1,0), (1,1), (2,*); prompt 2 never.
    np.testing.assert_allclose(result["matrix"], [[50, 0, 0], [50, 50, 0], [50, 50, 50]])
    assert result["normal"] == pytest.approx(50.0)
    assert result["hard"] == pytest.approx(0.0)  # upper triangle: chosen less styled than rejected
    assert result["easy"] == pytest.approx(50.0)
    assert result["avg"] == pytest.approx(300 / 9)
    assert result["n"] == 2
    json.dumps(result, allow_nan=False)


def test_rmbench_style_biased_model_fails_hard() -> None:
    style = np.tile([0.0, 1.0, 2.0], (20, 1))
    result = rmbench_accuracy(style + 0.1, style, n_boot=50)  # style dominates a small substance gap
    assert (result["easy"], result["normal"], result["hard"]) == (100.0, 100.0, 0.0)


def test_rmbench_ties() -> None:
    same = np.ones((4, 3))
    assert rmbench_accuracy(same, same, n_boot=0)["avg"] == 0.0
    assert rmbench_accuracy(same, same, n_boot=0, tie_credit=0.5)["avg"] == 50.0


def test_interval_verdict() -> None:
    assert interval_verdict(0.1, 2.0) == "held"
    assert interval_verdict(-2.0, -0.1) == "not held"
    assert interval_verdict(-1.0, 1.0) == "inconclusive"
    assert interval_verdict(2.8, 6.9, bar=8.0) == "not held"  # a stated bar instead of 0
    assert interval_verdict(None, 1.0) is None
    assert interval_verdict(float("nan"), 1.0) is None
