"""Per-unit values, their bootstrap and the paired comparison of two models: known values, and a constructed case
whose difference has a known sign."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_bench_fixtures import TableScore, write_parquet

from rewardsmith.bench.compare import compare_models, compare_units, verdict
from rewardsmith.bench.measures import (
    Composite,
    Units,
    interval,
    key_seed,
    measure_replicates,
    measure_value,
    paired_difference,
    units_from_dict,
)
from rewardsmith.bench.metrics import pooled_auc
from rewardsmith.bench.runner import load_suites, run_suites
from rewardsmith.bench.suite import EvalOptions
from rewardsmith.stats import bootstrap_indices


def test_units_statistics_and_composites() -> None:
    measures = {
        "a::acc": Units(("1", "2", "3", "4"), [1.0, 0.0, 1.0, 1.0]),
        "b::acc": Units(("5", "6"), [[1.0, 2.0], [0.0, 2.0]], statistic="ratio"),
        "all::acc": Composite({"a::acc": 3.0, "b::acc": 1.0}),
    }
    assert measure_value(measures, "a::acc") == pytest.approx(75.0)
    assert measure_value(measures, "b::acc") == pytest.approx(25.0)
    assert measure_value(measures, "all::acc") == pytest.approx((3 * 75 + 25) / 4)
    reps = measure_replicates(measures, "all::acc", 300, seed=2)
    # A composite's replicate is the weighted mean of its parts' replicates, each resampled on its own.
    parts = [measure_replicates(measures, k, 300, seed=2) for k in ("a::acc", "b::acc")]
    np.testing.assert_allclose(reps, (3 * parts[0] + parts[1]) / 4)
    low, high = interval(measures, "a::acc", 300, seed=2)
    assert 0.0 <= low <= 75.0 <= high <= 100.0
    with pytest.raises(ValueError, match="unknown statistic"):
        Units(("1",), [1.0], statistic="median")


def test_pooled_auc_replicates_match_recomputing_each_draw() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.integers(0, 4, size=(12, 3)).astype(float)  # many ties
    labels = rng.integers(0, 2, size=(12, 3)).astype(float)
    labels[0, 2] = np.nan  # an absent response
    units = Units(tuple(map(str, range(12))), np.concatenate([rewards, labels], axis=1), "pooled_auc", scale=1.0)
    idx = bootstrap_indices(12, 25, 7)
    expected = [pooled_auc(units.values[row]) for row in idx]
    np.testing.assert_allclose(units.replicates(idx), expected)


def test_units_round_trip_with_nan() -> None:
    units = Units(("p1", "p2"), [[1.0, np.nan], [0.0, 1.0]], statistic="ratio", scale=100.0)
    back = units_from_dict(units.to_dict())
    assert isinstance(back, Units) and back.ids == units.ids
    np.testing.assert_array_equal(back.values, units.values)
    assert units_from_dict(Composite({"a": 1.0}).to_dict()) == Composite({"a": 1.0})


def test_paired_difference_has_the_constructed_sign() -> None:
    ids = tuple(f"r{i}" for i in range(60))
    base = {"s::acc": Units(ids, np.r_[np.ones(30), np.zeros(30)])}
    # The candidate gets 12 more rows right and none wrong that the baseline had right: +20 points.
    better = {"s::acc": Units(ids, np.r_[np.ones(42), np.zeros(18)])}
    diff = paired_difference(better, base, "s::acc", n_boot=500, seed=0)
    assert diff.estimate == pytest.approx(20.0) and diff.n == 60
    assert 0 < diff.low <= 20.0 <= diff.high
    assert verdict(diff) == "better"
    worse = paired_difference(base, better, "s::acc", n_boot=500, seed=0)
    assert worse.estimate == pytest.approx(-20.0) and verdict(worse) == "worse"
    same = paired_difference(base, base, "s::acc", n_boot=200, seed=0)
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0) and verdict(same) == "inconclusive"


def test_paired_difference_uses_the_rows_both_have_with_the_same_draws() -> None:
    a = {"s::acc": Units(("x", "y", "z"), [1.0, 1.0, 0.0])}
    b = {"s::acc": Units(("z", "y", "w"), [1.0, 0.0, 1.0])}  # other order, one row each of its own
    diff = paired_difference(a, b, "s::acc", n_boot=100, seed=4)
    assert diff.n == 2 and diff.estimate == pytest.approx(100 * ((1 + 0) / 2 - (0 + 1) / 2))
    # Same indices for both: the replicate differences are those of the aligned per-row differences.
    idx = bootstrap_indices(2, 100, key_seed(4, "s::acc"))
    per_row = np.array([1.0, -1.0]) * 100  # y: 1 - 0, z: 0 - 1 (candidate order y, z)
    assert diff.low == pytest.approx(np.quantile(per_row[idx].mean(axis=1), 0.025))


def test_compare_models_on_suites(tmp_path: Path) -> None:
    rows = [
        {"prompt": f"p{i}", "chosen": f"c{i}", "rejected": f"r{i}", "subset": "hep-go" if i % 2 else "hep-js", "id": i}
        for i in range(80)
    ]
    write_parquet(tmp_path / "reward-bench" / "data" / "filtered-00000-of-00001.parquet", rows)
    loaded, _ = load_suites(tmp_path, ["reward-bench"])
    rng = np.random.default_rng(1)
    noise = {f"{side}{i}": float(rng.normal()) for i in range(80) for side in "cr"}
    weak = run_suites(loaded, TableScore(noise), EvalOptions(n_boot=300))
    strong_rewards = dict(noise, **{f"c{i}": noise[f"c{i}"] + 3.0 for i in range(80)})
    strong = run_suites(loaded, TableScore(strong_rewards), EvalOptions(n_boot=300))
    comparisons = compare_models({"weak": weak, "strong": strong}, baseline="weak", n_boot=300)
    records = {r["key"]: r for r in comparisons["strong vs weak"]}
    assert set(records) == {"overall::accuracy", "Reasoning::accuracy", "hep-go::accuracy", "hep-js::accuracy"}
    for record in records.values():
        assert record["difference"] > 0 and record["verdict"] == "better" and record["difference_ci"][0] > 0
    assert records["overall::accuracy"]["n"] == 80 and records["overall::accuracy"]["level"] == "overall"
    reverse = compare_units(weak.units, strong.units, n_boot=300)
    assert {r["verdict"] for r in reverse} == {"worse"}
    assert compare_models({"only": weak}) == {}
