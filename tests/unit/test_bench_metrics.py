"""The benchmark metrics as pure functions, each against a value computed by hand."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from rewardsmith.bench.measures import STATISTICS
from rewardsmith.bench.metrics import (
    best_of_n_credit,
    conflict_pairs,
    oracle_best_of_k,
    resampled_spearman,
    reward_length_correlation,
    roc_auc,
    section_scores,
    strict_correct,
    ties_prompt_stats,
    ties_statistic,
    ties_units,
)
from rewardsmith.bench.suites.reward_bench import EXAMPLE_COUNTS, SUBSET_MAPPING
from rewardsmith.evaluate.best_of_n import best_of_n_curve as best_of_k_curve
from rewardsmith.evaluate.metrics import length_correlation
from rewardsmith.stats import bootstrap_indices, spearman


def test_strict_correct_counts_a_tie_as_wrong() -> None:
    assert strict_correct([0.5, 0.0, -1.0]).tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("rewards", "credit"),
    [
        ([3, 1, 2, 0], 1.0),  # the chosen completion alone at the top
        ([2, 2, 1, 2], 1 / 3),  # tied with two rejected at the maximum: 1/k with k = 3
        ([2, 2, 2, 2], 1 / 4),  # all four tied
        ([1, 2, 0, 0], 0.0),  # a rejected completion scores higher
        ([1, 1, 2, 0], 0.0),  # tied with one, but below the maximum
    ],
)
def test_best_of_n_credit_splits_ties_at_the_maximum(rewards: list[float], credit: float) -> None:
    assert best_of_n_credit(rewards) == pytest.approx(credit)


def test_ties_prompt_stats_by_hand() -> None:
    accurate, spread, gap = ties_prompt_stats([True, True, True, False, False], [10, 8, 9, 7, 2])
    assert accurate and spread == 2.0 and gap == 1.0
    accurate, spread, gap = ties_prompt_stats([True, False], [1, 2])
    assert not accurate and spread is None and gap == -1.0
    # No incorrect (or no correct) completion: not accurate, no spread, gap 0, as the official sample_stats says.
    assert ties_prompt_stats([True, True], [1, 2]) == (False, None, 0.0)


def test_ties_score_with_ref_and_tied_prompts_by_hand() -> None:
    ids = ["ref:1", "tied:1", "ref:2", "tied:2"]
    prompts, values = ties_units(ids, [1, 3, 1, 2], [[5, 3, 4], [10, 8, 9, 7, 2], [1, 2], [6, 5.5, 1]])
    assert prompts == ["1", "2"]
    expected = np.array(
        [[1.0, 1.0, 0.0, 0.0, math.tanh(1 / 2 - 1), 1.0], [0.0, 1.0, 1.0, 0.0, math.tanh(-1 / 0.5 - 1), 1.0]]
    )
    np.testing.assert_allclose(values, expected)
    score = 0.3 * 1.0 + 0.3 * 0.5 + 0.2 * 0.5 + 0.2 * 0.0 + 0.01 * (math.tanh(-0.5) + math.tanh(-3.0)) / 2
    assert ties_statistic(values) == pytest.approx(score)
    assert STATISTICS["ties"] is ties_statistic


def test_ties_margin_with_equal_correct_rewards_and_prompts_lacking_a_partner() -> None:
    # tied:1 has two correct responses of equal reward (spread 0): its preferred terms count (gap 1 > 0), its margin
    # does not (the official code keeps only spreads > 0, and the mean of none is 0); prompt 2 has only a ref row: its
    # accuracy counts, its margin terms do not. "tied:01" is prompt 1 (ids are matched by int()).
    prompts, values = ties_units(["ref:1", "tied:01", "ref:2"], [1, 2, 1], [[3, 1], [2, 2, 1], [0, 1]])
    assert prompts == ["1", "2"]
    np.testing.assert_array_equal(values[0], [1.0, 1.0, 1.0, 1.0, np.nan, 1.0])
    assert values[1, 0] == 0.0 and np.isnan(values[1, 1:5]).all() and values[1, 5] == 0.0
    assert ties_statistic(values) == pytest.approx(0.3 * 1.0 + 0.3 * 0.5 + 0.2 + 0.2 + 0.0)
    with pytest.raises(ValueError, match="ref:<id>"):
        ties_units(["other:1"], [1], [[1, 0]])


def test_section_scores_follow_the_leaderboard_weights() -> None:
    # The README example of allenai/reward-bench "Getting Leaderboard Section Scores", computed here by hand.
    subset = {
        "alpacaeval-easy": 0.5,
        "alpacaeval-hard": 0.7052631578947368,
        "alpacaeval-length": 0.5894736842105263,
        "mt-bench-easy": 0.5714285714285714,
        "mt-bench-med": 0.725,
        "math-prm": 0.2953020134228188,
        "hep-python": 0.5487804878048781,
    }
    chat = (0.5 * 100 + 0.7052631578947368 * 95 + 0.5894736842105263 * 95 + 0.5714285714285714 * 28 + 0.725 * 40) / (
        100 + 95 + 95 + 28 + 40
    )
    reasoning = (0.2953020134228188 * 984 + 0.5487804878048781 * 164) / (984 + 164)
    sections = section_scores(subset, EXAMPLE_COUNTS, SUBSET_MAPPING)
    assert set(sections) == {"Chat", "Reasoning"}  # sections without a subset present are left out
    assert sections["Chat"] == pytest.approx(chat)
    assert sections["Reasoning"] == pytest.approx(reasoning)


def _enumerated_best_of_k(rewards: list[float], correct: list[int], k: int) -> float:
    """Average over every K-subset of the expected correctness of its top pick (ties split evenly)."""
    total, count = 0.0, 0
    for subset in combinations(range(len(rewards)), k):
        top = max(rewards[i] for i in subset)
        tied = [correct[i] for i in subset if rewards[i] == top]
        total += sum(tied) / len(tied)
        count += 1
    return total / count


def test_best_of_k_curve_on_a_known_ranking() -> None:
    # Rewards 4 > 3 > 2 > 1 on correctness [0, 1, 0, 1]: K=1 half right; K=2 right only for {1,2}, {1,3} of six;
    # K=3 only for {1,2,3} of four; K=4 the top is the wrong one.
    curve = best_of_k_curve([4, 3, 2, 1], [0, 1, 0, 1], [1, 2, 3, 4])
    np.testing.assert_allclose(curve, [0.5, 2 / 6, 1 / 4, 0.0])
    np.testing.assert_allclose(oracle_best_of_k([0, 1, 0, 1], [1, 2, 3, 4]), [0.5, 5 / 6, 1.0, 1.0])


def test_best_of_k_curve_breaks_a_tie_at_the_top_at_random() -> None:
    rewards, correct = [1, 1, 0, 2, 1, 3], [1, 0, 0, 1, 1, 0]
    ks = list(range(1, 7))
    expected = [_enumerated_best_of_k(rewards, correct, k) for k in ks]
    np.testing.assert_allclose(best_of_k_curve(rewards, correct, ks), expected)
    np.testing.assert_allclose(best_of_k_curve([1, 1, 0, 2], [1, 0, 0, 1], [1, 2, 3, 4]), [0.5, 0.75, 0.875, 1.0])
    with pytest.raises(ValueError, match="n must lie"):
        best_of_k_curve([1, 2], [0, 1], [3])


def test_conflict_pairs_orient_correct_first_and_skip_non_conflicts() -> None:
    credit, margins, oriented = conflict_pairs([4, 3, 2, 1], [0, 1, 0, 1], [(0, 1), (2, 3), (0, 2)])
    assert oriented.tolist() == [[1, 0], [3, 2]]  # (0, 2) are both wrong: not a conflict
    assert margins.tolist() == [-1.0, -1.0] and credit.tolist() == [0.0, 0.0]
    credit, _, _ = conflict_pairs([1, 1, 0, 2], [1, 0, 0, 1], [(0, 1), (2, 3)])
    assert credit.tolist() == [0.5, 1.0]  # a tied reward counts 1/2
    with pytest.raises(ValueError, match="outside"):
        conflict_pairs([1, 2], [0, 1], [(0, 5)])


def test_roc_auc_counts_ties_half() -> None:
    # Positives 3, 1, 1, 2 against negatives 4, 2, 1, 0: 3 + 1.5 + 1.5 + 2.5 = 8.5 of 16 pairs.
    scores = [4, 3, 2, 1, 1, 1, 0, 2]
    positive = [False, True, False, True, True, False, False, True]
    assert roc_auc(scores, positive) == pytest.approx(8.5 / 16)
    assert roc_auc([1, 2, 3], [True, True, True]) != roc_auc([1, 2, 3], [True, True, True])  # NaN: one class


def test_reward_length_correlation_pairs_and_many_responses() -> None:
    rng = np.random.default_rng(3)
    rewards, lengths = rng.normal(size=(30, 2)), rng.integers(10, 200, size=(30, 2)).astype(float)
    ours = reward_length_correlation(list(rewards), list(lengths), n_boot=200, seed=1)
    shared = length_correlation(rewards[:, 0], rewards[:, 1], lengths[:, 0], lengths[:, 1], n_boot=200, seed=1)
    assert (ours.estimate, ours.low, ours.high) == (shared.estimate, shared.low, shared.high)
    rewards4, lengths4 = rng.normal(size=(20, 4)), rng.integers(10, 200, size=(20, 4)).astype(float)
    est = reward_length_correlation(list(rewards4), list(lengths4), n_boot=200, seed=0)
    assert est.estimate == pytest.approx(float(spearman(rewards4.ravel(), lengths4.ravel())))
    assert est.low <= est.estimate <= est.high and est.n == 20
    exact = reward_length_correlation(
        [np.array([1.0, 2, 3]), np.array([4.0, 5])], [np.array([1.0, 2, 3]), np.array([4.0, 5])], n_boot=50
    )
    assert exact.estimate == pytest.approx(1.0) and exact.low == pytest.approx(1.0)


def test_resampled_spearman_equals_ranking_each_resample() -> None:
    rng = np.random.default_rng(5)
    sizes = [3, 4, 2, 5, 3, 4]
    x = rng.integers(0, 5, size=sum(sizes)).astype(float)  # ties within and across rows
    y = rng.normal(size=sum(sizes))
    unit = np.repeat(np.arange(len(sizes)), sizes)
    idx = bootstrap_indices(len(sizes), 40, 11)
    expected = [
        spearman(np.concatenate([x[unit == i] for i in draw]), np.concatenate([y[unit == i] for i in draw]))
        for draw in idx
    ]
    np.testing.assert_allclose(resampled_spearman(x, y, unit, idx), expected)
