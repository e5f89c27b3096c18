"""Sufficient statistics (numpy and DuckDB agree), fitted-map files, and the forecaster against simulation."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardsmith.calibrate import (
    PEBS,
    affine_sse,
    apply_calibration,
    create_calibrator,
    forecast_gain,
    forecast_mse,
    load_maps,
    rater_stats,
    rater_stats_duckdb,
    save_maps,
)
from rewardsmith.calibrate.estimators import shared_params
from rewardsmith.calibrate.evaluate import cap_per_rater, within_rater_split
from rewardsmith.calibrate.synthetic import simulate_parameters, simulate_ratings
from rewardsmith.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def table():
    params = simulate_parameters(50, slope=2.0, intercept=10.0, slope_sd=0.5, seed=1)
    return simulate_ratings(params, 20, r_mean=100.0, r_sd=3.0, seed=2)  # a large offset tests the shift


def test_duckdb_and_numpy_statistics_agree(tmp_path, table):
    frame = table.frame.assign(group=lambda f: np.where(f.rater_id < "r000025", "x", "y"))
    bad = frame.iloc[:3].assign(score=[np.nan, np.inf, 1.0], model_score=[1.0, 1.0, np.nan])
    pd.concat([frame, bad], ignore_index=True).to_parquet(tmp_path / "ratings.parquet")
    from_db, counts = rater_stats_duckdb(tmp_path / "ratings.parquet", group_columns=["group"])
    in_memory = rater_stats(frame, group_columns=["group"])
    assert counts == {"rows_read": len(frame) + 3, "dropped_nonfinite": 3}
    assert from_db.rater_ids.tolist() == in_memory.rater_ids.tolist()
    assert from_db.groups["group"].tolist() == in_memory.groups["group"].tolist()
    mdb, mnp = from_db.moments(), in_memory.moments()
    for name in ("n", "mean_r", "mean_s", "sxx", "sxy", "syy"):
        np.testing.assert_allclose(getattr(mdb, name), getattr(mnp, name), rtol=1e-9, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(PEBS().fit(from_db).maps_.slope, PEBS().fit(in_memory).maps_.slope, rtol=1e-8)


def test_duckdb_missing_column_is_a_data_error(tmp_path, table):
    table.frame.drop(columns="score").to_parquet(tmp_path / "r.parquet")
    with pytest.raises(DataError, match="missing column"):
        rater_stats_duckdb(tmp_path / "r.parquet")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-50, 50), st.floats(-50, 50)), min_size=1, max_size=30),
    st.floats(-5, 5),
    st.floats(-20, 20),
)
def test_affine_sse_from_statistics_equals_direct_sum(points, slope, intercept):
    r = np.array([p[0] for p in points])
    s = np.array([p[1] for p in points])
    stats = rater_stats(pd.DataFrame({"rater_id": "a", "item_id": range(len(r)), "score": s, "model_score": r}))
    direct = np.sum((s - slope * r - intercept) ** 2)
    got = affine_sse(stats, np.array([slope]), np.array([intercept]))[0]
    assert got == pytest.approx(direct, rel=1e-7, abs=1e-6)


# ---------------------------------------------------------------------------------------------- files


@pytest.mark.parametrize("suffix", [".json", ".parquet"])
def test_maps_round_trip_and_apply_calibration(tmp_path, table, suffix):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        est = PEBS().fit(table)
    path = save_maps(est.maps_, tmp_path / f"maps{suffix}")
    loaded = load_maps(path)
    np.testing.assert_allclose(loaded.slope, est.maps_.slope)
    np.testing.assert_allclose(loaded.diagnostics["weight_slope"], est.maps_.diagnostics["weight_slope"])
    assert loaded.info["tau2_slope"] == pytest.approx(est.maps_.info["tau2_slope"])
    rid = str(est.maps_.rater_ids[3])
    scores = np.array([99.0, 100.0, 101.5])
    np.testing.assert_allclose(apply_calibration(path, rid, scores), est.predict([rid] * 3, scores))
    pop = apply_calibration(path, None, scores)
    np.testing.assert_allclose(pop, est.maps_.population_slope * scores + est.maps_.population_intercept)
    with pytest.raises(ConfigError, match="not in the calibration"):
        apply_calibration(path, "nobody", scores)
    np.testing.assert_allclose(apply_calibration(path, "nobody", scores, unknown="population"), pop)


def test_bad_calibration_files_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_maps(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"format": "something-else"}')
    with pytest.raises(DataError, match="format"):
        load_maps(tmp_path / "other.json")
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(DataError, match="not a rewardsmith calibration"):
        load_maps(tmp_path / "plain.parquet")


# ---------------------------------------------------------------------------------------------- forecaster


def _realised_gains(n_raters: int, fit_n: int, seed: int, joint: bool) -> tuple[float, float, object]:
    params = simulate_parameters(
        n_raters, slope=1.0, slope_sd=0.4, intercept_sd=0.6, correlation=0.5, centre=0.5, seed=seed
    )
    frame = simulate_ratings(params, 2 * fit_n, r_mean=0.5, r_sd=1.0, seed=seed + 100).frame
    held = within_rater_split(frame, 0.5, seed)
    fit, test = frame.loc[~held], frame.loc[held]
    mse = {}
    for name in ("pooled", "pebs"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            est = create_calibrator(name, **shared_params(name, joint=joint)).fit(fit)
        mse[name] = np.mean((est.predict(test.rater_id.to_numpy(), test.model_score.to_numpy()) - test.score) ** 2)
    return 100 * (1 - np.sqrt(mse["pebs"] / mse["pooled"])), float(mse["pooled"]), fit


@pytest.mark.parametrize("joint", [True, False])
def test_closed_form_forecast_matches_simulation(joint):
    realised, mse_pooled, fit = _realised_gains(2000, 20, seed=0, joint=joint)
    tau2 = np.array([[0.16, 0.12], [0.12, 0.36]])  # slope sd 0.4, intercept sd 0.6, correlation 0.5
    mse = forecast_mse(np.ones(2000), tau2, np.full(2000, 20.0), r_offset=0.0, r_var=1.0, joint=joint)
    forecast = 100 * (1 - np.sqrt(mse["pebs"] / mse["pooled"]))
    assert forecast == pytest.approx(realised, abs=0.8)
    assert mse["pooled"] == pytest.approx(mse_pooled, rel=0.03)
    # From a 10-rating pilot of the same raters (everything estimated) the forecast stays close.
    pilot = cap_per_rater(fit, 10, seed=1)
    assert forecast_gain(pilot, 20, joint=joint).gain_pct == pytest.approx(realised, abs=1.5)


def test_forecast_is_zero_without_between_rater_spread_and_needs_raters():
    mse = forecast_mse(np.ones(10), np.zeros((2, 2)), np.full(10, 30.0), 0.0, 1.0)
    assert mse["pebs"] == pytest.approx(mse["pooled"])
    assert mse["ols"] > mse["pooled"]
    tiny = pd.DataFrame({"rater_id": "a", "item_id": range(8), "score": range(8), "model_score": range(8)})
    with pytest.raises(DataError, match="at least 2 pilot raters"):
        forecast_gain(tiny)
