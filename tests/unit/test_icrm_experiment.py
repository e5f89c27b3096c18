"""The ICRM summary statistics (rewardsmith.icrm.summary, what experiments/icrm.py summarise writes): paired
hierarchical intervals, ECE and the reliability over seeds, the hypervolume resampled from per-pair correctness,
RM-Bench's weightings, and seeds that scored different pairs refused."""

from __future__ import annotations

import numpy as np
import pytest

from rewardsmith.errors import DataError
from rewardsmith.icrm import summary
from rewardsmith.stats import mean_interval, paired_difference


def test_paired_difference_interval() -> None:
    rng = np.random.default_rng(0)
    bt = rng.integers(0, 2, size=(3, 200)).astype(float)
    icrm = np.clip(bt + (rng.random((3, 200)) < 0.3), 0, 1)  # BT's correct pairs plus 30% of the others
    est = summary.record(paired_difference(100 * icrm, 100 * bt, 500))
    assert est["mean"] == pytest.approx(100 * (icrm - bt).mean(), abs=1e-4)
    assert 0 < est["ci"][0] < est["mean"] < est["ci"][1]
    # An array constant over seeds and pairs has a degenerate interval at its value.
    assert summary.record(mean_interval(np.full((2, 50), 7.0), 200)) == {"mean": 7.0, "ci": [7.0, 7.0]}


def test_ece_and_reliability_over_seeds_known_answers() -> None:
    rates = np.array([0.0, 0.5, 1.0])  # demonstrated preference rates 1, 0.5, 0
    perfect = np.tile(1.0 - rates, (40, 1))  # (K, R): mu equals the demonstrated rate
    ece = summary.ece_statistic(rates)
    assert ece(perfect) == pytest.approx(0.0)
    # One constant forecast: a single bin whose mean outcome is the average rate 0.5, so ECE is |0.75 - 0.5|,
    # while the mean absolute error sees every rate: (0.25 + 0.25 + 0.75) / 3.
    flat = np.full((40, 3), 0.75)
    assert ece(flat) == pytest.approx(0.25)
    assert summary.per_pair_mae(flat[None], rates).mean() == pytest.approx((0.25 + 0.25 + 0.75) / 3)
    assert summary.record(summary.statistic_interval([perfect, perfect], ece, 50)) == {"mean": 0.0, "ci": [0.0, 0.0]}
    # The reliability tells them apart: slope 1 and MAE 0 for the tracking forecast, slope 0 for the constant.
    slope, mae = summary.reliability_statistic(rates, "slope"), summary.reliability_statistic(rates, "mae")
    assert (slope(perfect), mae(perfect)) == (pytest.approx(1.0), pytest.approx(0.0))
    assert (slope(flat), mae(flat)) == (pytest.approx(0.0), pytest.approx((0.25 + 0.25 + 0.75) / 3))


def _calibration_pairs(mu_by_n: dict[str, np.ndarray], rates: np.ndarray) -> dict:
    return {
        "pair_ids": list(range(mu_by_n["0"].shape[0])),
        "flip_rates": rates.tolist(),
        "icrm_mu": {n: m.T.tolist() for n, m in mu_by_n.items()},
        "bt_mu": [0.6] * mu_by_n["0"].shape[0],
    }


def test_calibration_summary_against_a_constant() -> None:
    rates = np.linspace(0.0, 1.0, 11)
    tracking = np.tile(1.0 - rates, (30, 1))
    constant = np.full((30, 11), 0.5)
    pairs = [_calibration_pairs({"0": constant, "8": constant, "64": tracking}, rates)] * 2
    metrics = [{"n_values": [0, 8, 64], "test_pairs": 30}] * 2
    out = summary.summarise_calibration(metrics, pairs, 100)
    assert out["constant"]["reliability_mae"] == pytest.approx(3 / 11, abs=1e-4)
    assert out["by_n"]["64"]["reliability_slope"]["mean"] == pytest.approx(1.0)
    assert out["mae_high_minus_constant"]["mean"] == pytest.approx(-3 / 11, abs=1e-4)
    assert out["mae_low_minus_high"] == {
        "mean": pytest.approx(3 / 11, abs=1e-4),
        "ci": [pytest.approx(3 / 11, abs=1e-4)] * 2,
    }
    assert out["bt"]["reliability_slope"]["mean"] == pytest.approx(0.0)  # BT cannot see the demonstrations


def test_hypervolume_replicates_from_per_pair_correctness() -> None:
    # Two weights: (respond, refuse) accuracies (1, 0.5) and (0.5, 1): hypervolume 0.75 in every seed.
    respond = np.array([[1.0] * 4, [1.0, 1.0, 0.0, 0.0]])
    refuse = np.array([[1.0, 0.0] * 2, [1.0] * 4])
    point, reps = summary.hv_replicates([respond, respond], [refuse, refuse], 200)
    assert point == pytest.approx(0.75)
    assert reps.shape == (200,) and reps.min() >= 0.0 and reps.max() <= 1.0
    # BT's single point (0.5, 0.5): its hypervolume is the product of its accuracies.
    one, _ = summary.hv_replicates([respond[1:]], [refuse[:1]], 10)
    assert one == pytest.approx(0.5 * 0.5)


def test_rmbench_change_per_subset_and_its_weightings() -> None:
    subsets = ["a"] * 3 + ["b"]
    low = {"easy": [0.0] * 4, "normal": [0.0] * 4, "hard": [0.0] * 4, "avg": [0.0] * 4}
    high = {**low, "avg": [100.0, 100.0, 100.0, 0.0]}  # subset a gains 100 points, b nothing
    pairs = [{"prompt_ids": list(range(4)), "subset": subsets, "icrm": {"1": low, "64": high}}] * 2
    out = summary.summarise_rmbench([{"n_values": [1, 64]}] * 2, pairs, 100)
    assert out["change"]["a"]["mean"] == pytest.approx(100.0) and out["change"]["b"]["mean"] == pytest.approx(0.0)
    assert out["change"]["overall"]["mean"] == pytest.approx(75.0)  # every prompt alike
    assert out["change"]["mean of subsets"]["mean"] == pytest.approx(50.0)  # every subset alike
    assert out["prompts"] == {"overall": 4, "a": 3, "b": 1}


def test_seeds_that_scored_different_pairs_are_refused() -> None:
    metrics = [{"n_values": [0], "test_pairs": 2}] * 2
    pairs = [{"pair_ids": [1, 2], "standards": {}}, {"pair_ids": [1, 3], "standards": {}}]
    with pytest.raises(DataError, match="steerability: the seeds scored different target pairs"):
        summary.summarise_steerability(metrics, pairs, 10, {})
