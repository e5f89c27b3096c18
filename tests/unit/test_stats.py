"""rewardsmith.stats: the one record of an estimate with its interval (Interval), its verdict and the minimum of
units behind one, the mean of per-unit values with its bootstrap interval (over units, or seeds then units), and
paired differences on known answers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rewardsmith.stats import (
    MIN_UNITS,
    Interval,
    bootstrap_indices,
    interval_verdict,
    mean_interval,
    paired_difference,
)


def test_mean_interval_over_units_is_the_percentile_bootstrap_of_the_mean() -> None:
    values = np.random.default_rng(0).normal(size=200)
    est = mean_interval(values, 500, 3, scale=100.0)
    reps = values[bootstrap_indices(200, 500, 3)].mean(axis=1) * 100.0
    assert est.estimate == pytest.approx(100.0 * values.mean())
    assert (est.low, est.high) == (pytest.approx(np.quantile(reps, 0.025)), pytest.approx(np.quantile(reps, 0.975)))
    assert (est.n, est.level) == (200, 0.95)
    assert mean_interval(values, 500, 3) == mean_interval(values, 500, 3)  # a function of the seed


def test_nan_units_are_left_out_and_no_units_is_all_nan() -> None:
    values = np.array([1.0, np.nan, 3.0, np.nan, 5.0] * 4)
    est = mean_interval(values, 200, 0)
    assert est.estimate == pytest.approx(3.0) and est.n == 12
    assert 1.0 <= est.low <= est.high <= 5.0
    empty = mean_interval(np.full(5, np.nan), 100, 0)
    assert empty.n == 0 and np.isnan([empty.estimate, empty.low, empty.high]).all()
    no_boot = mean_interval(values, 0, 0)
    assert no_boot.estimate == pytest.approx(3.0) and no_boot.ci == [None, None]


def test_hierarchical_interval_sees_the_seeds() -> None:
    """Seeds far apart: the interval over (seeds, units) spans the seeds' spread; one seed gives the plain one."""
    rng = np.random.default_rng(1)
    values = np.array([[0.2], [0.5], [0.8]]) + 0.01 * rng.standard_normal((3, 100))
    est = mean_interval(values, 500, 0)
    assert est.estimate == pytest.approx(values.mean()) and est.n == 100
    assert est.high - est.low > 0.2
    one = mean_interval(values[:1], 500, 0)
    assert one.high - one.low < 0.01


def test_paired_difference_of_a_constant_shift_is_degenerate_over_units_and_over_seeds() -> None:
    rng = np.random.default_rng(2)
    b = rng.random(150)
    diff = paired_difference(b + 0.25, b, 300, 0)
    assert (diff.estimate, diff.low, diff.high) == (pytest.approx(0.25), pytest.approx(0.25), pytest.approx(0.25))
    # Seeds shared by the two models (row s of each from the same seed): paired over seeds and units alike.
    seeds = np.array([[0.1], [0.5], [0.9]]) + 0.05 * rng.standard_normal((3, 150))
    diff = paired_difference(seeds + 0.1, seeds, 300, 0, scale=100.0)
    assert diff.ci == [pytest.approx(10.0), pytest.approx(10.0)]
    unpaired = mean_interval(seeds + 0.1, 300, 0, scale=100.0)
    assert unpaired.high - unpaired.low > 30.0  # each model alone spans its seeds
    with pytest.raises(ValueError, match="one shape"):
        paired_difference(seeds, seeds[:2], 10, 0)


def test_shared_indices_pair_intervals_of_several_arrays() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=80), rng.normal(size=80)
    idx = bootstrap_indices(80, 400, 9)
    via_indices = paired_difference(a, b, indices=idx)
    reps = (a - b)[idx].mean(axis=1)
    assert via_indices.low == pytest.approx(np.quantile(reps, 0.025))
    assert mean_interval(a, indices=idx).low == pytest.approx(np.quantile(a[idx].mean(axis=1), 0.025))
    with pytest.raises(ValueError, match="indices"):
        mean_interval(np.ones((2, 80)), indices=idx)


def test_verdicts_and_the_minimum_of_units() -> None:
    assert Interval(1.0, 0.1, 2.0, 50).verdict() == "held"
    assert Interval(-1.0, -2.0, -0.1, 50).verdict() == "not held"
    assert Interval(0.0, -1.0, 1.0, 50).verdict() == "inconclusive"
    assert Interval(5.0, 2.8, 6.9, 50).verdict(bar=8.0) == "not held"
    assert Interval(1.0, float("nan"), 2.0, 50).verdict() is None
    # One prompt: every replicate is the estimate, a zero-width interval that would "hold" any claim above 0.
    one = mean_interval([0.7], 100, 0)
    assert (one.low, one.high) == (0.7, 0.7)
    assert one.verdict(unit="prompts") == "too few prompts"
    assert Interval(1.0, 0.5, 1.5, MIN_UNITS - 1).verdict() == "too few units"
    assert Interval(1.0, 0.5, 1.5, MIN_UNITS).verdict() == "held"
    assert interval_verdict(0.5, 1.5) == "held"  # without a count the rule cannot apply the minimum


def test_interval_records() -> None:
    est = Interval(2.0, 1.0, float("inf"), 12)
    assert est.to_dict() == {"estimate": 2.0, "low": 1.0, "high": None, "n": 12}
    assert est.ci == [1.0, None]
    moved = Interval(2.0, 1.0, 3.0, 12).shifted(0.5)
    assert (moved.estimate, moved.low, moved.high, moved.n) == (1.5, 0.5, 2.5, 12)


def test_stats_imports_without_torch() -> None:
    code = "import sys, rewardsmith.stats; assert 'torch' not in sys.modules, 'torch imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
