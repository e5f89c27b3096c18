"""PEBS on the real corpora with the issue's protocol (20 % within-rater hold-out, 5 seeds).

PluriHarms uses prompts.csv Harm_Level as the model score; DICES-350 uses the unsafe rate of a disjoint
reference panel of raters. Skipped when the data directory is absent.
"""

from __future__ import annotations

import json

import pytest

from rewardsmith.calibrate.config import CalibrateRunConfig, RatingsSource
from rewardsmith.jobs.calibrate import run_calibrate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pluriharms_metrics(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("pluriharms") / "run"
    result = run_calibrate(CalibrateRunConfig(RatingsSource("pluriharms", data_dir=str(data_dir))), out)
    assert "read 14725 ratings from 100 raters on 150 items" in result.summary
    return result.metrics, out


def test_pebs_beats_pooled_by_at_least_8_percent(pluriharms_metrics):
    metrics, out = pluriharms_metrics
    assert metrics["data"]["ratings_kept"] == 14725 and metrics["data"]["raters"] == 100
    assert metrics["gain_vs_pooled_pct.pebs"] >= 8.0
    assert metrics["p_value.pebs"] < 1e-6
    low, _ = metrics["gain_vs_pooled_ci.pebs"]
    assert low > 5.0
    for key in (
        "rmse.pebs",
        "gain_vs_pooled_pct.mixedlm",
        "p_value.ols",
        "forecast_gain_pct",
        "pair_accuracy.pebs",
    ):
        assert key in json.loads((out / "metrics.json").read_text())


@pytest.mark.parametrize("size", [25, 18])
def test_kept_variant_beats_pooled_and_ols_with_few_ratings(pluriharms_metrics, size):
    metrics, _ = pluriharms_metrics
    prefix = f"fit_size.{size}."
    assert metrics[prefix + "rmse.pebs"] < metrics[prefix + "rmse.pooled"]
    assert metrics[prefix + "rmse.pebs"] < metrics[prefix + "rmse.ols"]
    assert metrics[prefix + "p_value_vs_ols.pebs"] < 0.01
    assert metrics[prefix + "p_value.pebs"] < 0.01


def test_positive_slope_maps_keep_pair_accuracy(pluriharms_metrics):
    metrics, _ = pluriharms_metrics
    for name, row in metrics["tables"]["main"]["methods"].items():
        assert row["pair_accuracy_invariant"], name


def test_dices_panel_model_score(data_dir, tmp_path):
    cfg = CalibrateRunConfig(RatingsSource("dices-350", data_dir=str(data_dir)), fit_sizes=[25])
    metrics = run_calibrate(cfg, tmp_path / "run").metrics
    assert metrics["data"]["dropped_unsure"] == 2694
    assert metrics["gain_vs_pooled_pct.pebs"] > 0
    assert metrics["fit_size.25.rmse.pebs"] < metrics["fit_size.25.rmse.ols"]
