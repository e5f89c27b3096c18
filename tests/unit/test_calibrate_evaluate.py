"""Within-rater hold-out protocol, its statistics, and the `rewardsmith calibrate` commands."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from rewardsmith.calibrate.evaluate import (
    EvalConfig,
    bootstrap_gain_ci,
    cap_per_rater,
    evaluate_holdout,
    paired_tests,
    summarise,
    within_rater_split,
)
from rewardsmith.calibrate.synthetic import simulate_parameters, simulate_ratings
from rewardsmith.cli.calibrate import app
from rewardsmith.errors import ConfigError

FAST = ("pooled", "group", "ols", "pebs", "pebs-centred", "pebs-uncentred")


@pytest.fixture(scope="module")
def table():
    params = simulate_parameters(60, slope=1.0, slope_sd=0.4, intercept_sd=0.8, seed=21)
    counts = np.random.default_rng(0).integers(8, 60, size=60)
    tab = simulate_ratings(params, counts, seed=22)
    groups = np.where(tab.frame.rater_id < "r000030", "young", "old")
    tab.frame["age"] = groups
    tab.demographic_columns = ("age",)
    return tab


def test_within_rater_split_holds_out_the_fraction_of_every_rater(table):
    frame = table.frame
    held = within_rater_split(frame, 0.25, seed=3)
    per_rater = pd.DataFrame({"rater": frame.rater_id, "held": held}).groupby("rater")["held"].agg(["sum", "size"])
    np.testing.assert_array_equal(per_rater["sum"], np.clip(np.round(0.25 * per_rater["size"]), 1, None))
    assert (per_rater["size"] - per_rater["sum"] >= 1).all()
    np.testing.assert_array_equal(held, within_rater_split(frame, 0.25, seed=3))
    assert (held != within_rater_split(frame, 0.25, seed=4)).any()
    capped = cap_per_rater(frame, 10, seed=0)
    assert capped.groupby("rater_id").size().max() == 10


def test_holdout_metrics_show_the_pebs_gain(table):
    cfg = EvalConfig(seeds=2, methods=FAST, bootstrap=200, pilot_per_rater=8)
    flat = summarise(evaluate_holdout(table, cfg))["flat"]
    for method in FAST:
        for key in ("rmse", "gain_vs_pooled_pct", "p_value", "pair_accuracy"):
            assert f"{key}.{method}" in flat
    assert flat["gain_vs_pooled_pct.pooled"] == 0.0
    assert flat["gain_vs_pooled_pct.pebs"] > 5
    assert flat["p_value.pebs"] < 0.01
    assert flat["rmse.pebs"] <= flat["rmse.ols"]
    low, high = flat["gain_vs_pooled_ci.pebs"]
    assert low < flat["gain_vs_pooled_pct.pebs"] < high
    assert "forecast_gain_pct" in flat
    # Positive-slope maps cannot change a rater's pair accuracy: pooled = group = raw model score.
    assert flat["pair_accuracy.pooled"] == pytest.approx(flat["pair_accuracy.model_score"])


def test_summary_tables_cover_sizes_and_groups(table):
    cfg = EvalConfig(seeds=1, methods=("pooled", "ols", "pebs"), bootstrap=50, pilot_per_rater=0)
    summary = summarise(evaluate_holdout(table, cfg))
    tables = summary["tables"]
    assert sum(row["raters"] for row in tables["by_sample_size"]) == 60
    assert {row["group"] for row in tables["audit"]["by_group"]} == {"young", "old"}
    assert tables["audit"]["hardest_shrunk"][0]["shrink_slope"] >= tables["audit"]["hardest_shrunk"][-1]["shrink_slope"]
    assert tables["methods"]["pebs"]["pair_accuracy_invariant"]


def test_paired_tests_and_bootstrap_known_answers():
    same = np.ones(10)
    assert paired_tests(same, same)["wilcoxon_p"] == 1.0
    better = np.linspace(1, 2, 20)
    out = paired_tests(better * 0.8, better)
    assert out["wilcoxon_p"] < 1e-3 and out["raters_better"] == 20
    low, high = bootstrap_gain_ci(np.full(30, 0.81), np.ones(30), resamples=100, confidence=0.95)
    assert low == pytest.approx(10.0) and high == pytest.approx(10.0)  # 1 - sqrt(0.81) = 10 %


def test_protocol_rejects_bad_options(table):
    with pytest.raises(ConfigError, match="holdout"):
        evaluate_holdout(table, EvalConfig(holdout=1.5))
    with pytest.raises(ConfigError, match="pooled"):
        evaluate_holdout(table, EvalConfig(methods=("pebs",)))


# ---------------------------------------------------------------------------------------------- CLI


def _ratings_csv(tmp_path, table) -> str:
    path = tmp_path / "ratings.csv"
    frame = table.frame.copy()
    frame.loc[0, "score"] = np.nan  # one bad row: counted, not fatal
    frame.to_csv(path, index=False)
    return str(path)


def test_calibrate_command_writes_metrics_report_and_maps(tmp_path, table):
    ratings = _ratings_csv(tmp_path, table)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "--ratings",
            ratings,
            "--out",
            str(out),
            "--seeds",
            "2",
            "--methods",
            "pooled,ols,pebs",
            "--fit-sizes",
            "10",
            "--bootstrap",
            "100",
            "--pilot-per-rater",
            "8",
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    for key in (
        "rmse.pebs",
        "gain_vs_pooled_pct.pebs",
        "p_value.pebs",
        "forecast_gain_pct",
        "pair_accuracy.pebs",
        "fit_size.10.rmse.pebs",
    ):
        assert key in metrics, key
    assert metrics["data"]["dropped_nonfinite_score"] == 1
    assert "dropped nonfinite_score: 1" in result.output  # said on the terminal too
    assert (out / "report.md").read_text().startswith("# Calibration report")
    assert (out / "plots" / "slopes_before_after.png").exists()
    assert (out / "plots" / "rmse_by_fit_size.png").exists()
    assert (out / "maps.json").exists()


def test_calibrate_fit_then_apply(tmp_path, table):
    from rewardsmith.calibrate import apply_calibration

    ratings = _ratings_csv(tmp_path, table)
    maps = tmp_path / "maps.parquet"
    result = CliRunner().invoke(app, ["fit", "--ratings", ratings, "--out", str(maps)])
    assert result.exit_code == 0, result.output
    assert apply_calibration(maps, "r000001", [0.0, 1.0]).shape == (2,)


def test_calibrate_errors_are_one_line_with_exit_code_2(tmp_path, table):
    ratings = _ratings_csv(tmp_path, table)
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--ratings", ratings, "--out", str(tmp_path / "x"), "--holdout", "2"])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error:") and len(result.output.strip().splitlines()) == 1
    result = runner.invoke(app, ["fit", "--ratings", ratings, "--out", str(tmp_path / "maps.txt")])
    assert result.exit_code == 2 and ".json or .parquet" in result.output
    result = runner.invoke(app, ["run", "--ratings", ratings, "--out", str(tmp_path / "y"), "--on-bad-row", "error"])
    assert result.exit_code == 2 and "row 1" in result.output


def test_split_and_rater_interval_known_cases():
    from rewardsmith.calibrate.evaluate import split_rater_gain_ci

    base = np.full((4, 10), 4.0)
    # A method with a quarter of the squared error everywhere: RMSE halves, gain 50 % in every replicate.
    low, high = split_rater_gain_ci(base / 4, base, 200, 0.95)
    assert low == pytest.approx(50.0) and high == pytest.approx(50.0)
    # Splits that disagree widen the interval although every split has the same raters: 0 % on two splits,
    # 50 % on the other two.
    method = np.vstack([base[:2], base[2:] / 4])
    low, high = split_rater_gain_ci(method, base, 500, 0.95)
    assert low < 15.0 and high > 40.0
    # Raters that disagree widen it as much with 30 splits as with one: the raters are the same in every split
    # (a crossed design), so more splits do not shrink the raters' share of the interval.
    raters = np.where(np.arange(10) < 5, 1.0, 4.0)  # half the raters gain 50 %, half nothing
    one = split_rater_gain_ci(np.full((1, 10), 4.0) / 4 * raters, np.full((1, 10), 4.0), 2000, 0.95, seed=3)
    many = split_rater_gain_ci(np.full((30, 10), 4.0) / 4 * raters, np.full((30, 10), 4.0), 2000, 0.95, seed=3)
    assert many[1] - many[0] == pytest.approx(one[1] - one[0], rel=0.1)


def test_heteroscedasticity_sign():
    from rewardsmith.calibrate.evaluate import residual_heteroscedasticity

    rng = np.random.default_rng(0)
    r = rng.uniform(-1, 1, size=4000)
    raters = np.repeat(np.arange(40), 100).astype(str)
    flat = 2 * r + rng.normal(0, 1, size=r.size)
    quiet_ends = 2 * r + rng.normal(0, 1, size=r.size) * (1.2 - np.abs(r))  # less noise at the extreme scores
    frame = pd.DataFrame({"rater_id": raters, "model_score": r})
    assert abs(residual_heteroscedasticity(frame.assign(score=flat))) < 0.05
    assert residual_heteroscedasticity(frame.assign(score=quiet_ends)) < -0.2
