"""The two calibration computations the jobs run (rewardsmith.jobs.calibrate writes their files):

evaluate_calibration(config): ratings -> within-rater hold-out of every method (plus a sweep of smaller fit
sizes) and PEBS fitted on all ratings -> the metrics dict and the fitted maps.
fit_calibration(config): ratings -> one calibrator fitted on all ratings -> its maps. The ratings are read by
the engine `config.source.engine` names (calibrate.engines.ENGINES): in memory, or as per-rater statistics
computed by DuckDB or Spark, which every calibrator but MixedLM fits from.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from rewardsmith.calibrate.config import CalibrateFitConfig, CalibrateRunConfig
from rewardsmith.calibrate.engines import ENGINES
from rewardsmith.calibrate.estimators import create_calibrator, shared_params
from rewardsmith.calibrate.evaluate import evaluate_holdout, summarise
from rewardsmith.calibrate.maps import CalibrationMaps
from rewardsmith.calibrate.stats import RaterStats, model_score_location, rater_stats
from rewardsmith.config import to_dict
from rewardsmith.data.ratings import RatingTable
from rewardsmith.errors import ConfigError

SWEEP_KEYS = (
    "rmse",
    "gain_vs_pooled_pct",
    "gain_vs_pooled_ci",
    "p_value",
    "gain_vs_ols_pct",
    "p_value_vs_ols",
    "pair_accuracy",
)
_MAX_SLOPE_POINTS = 5000  # the slopes plot shows at most this many raters (a seeded sample)


def pebs_summary(maps: CalibrationMaps) -> dict[str, Any]:
    """The PEBS facts a reader checks: tau^2 and its clipping, population map, sparse and guarded raters, and
    the per-rater slopes before and after shrinkage (for the report's plot)."""
    info = maps.info
    keys = (
        "tau2_slope",
        "tau2_intercept",
        "tau2_cov",
        "tau2_clipped_slope",
        "tau2_clipped_intercept",
        "population_slope",
        "centre",
        "n_shrunk",
        "n_sparse",
        "n_single_model_score",
        "noise_prior_dof",
    )
    out: dict[str, Any] = {k: info.get(k) for k in keys}
    out["population_intercept"] = maps.population_intercept
    out["raters_with_nonpositive_shrunk_slope"] = [str(r) for r in info.get("nonpositive_slope_raters", [])]
    if "ols_slope" in maps.diagnostics:
        keep = np.arange(maps.n_raters)
        if keep.size > _MAX_SLOPE_POINTS:
            keep = np.sort(np.random.default_rng(0).choice(keep, _MAX_SLOPE_POINTS, replace=False))
        out["slopes"] = {
            "ols": np.asarray(maps.diagnostics["ols_slope"], dtype=float)[keep],
            "shrunk": maps.slope[keep],
            "n_ratings": maps.n_ratings[keep],
        }
    return out


def evaluate_calibration(
    config: CalibrateRunConfig, progress: bool = False, table: RatingTable | None = None
) -> tuple[dict[str, Any], CalibrationMaps]:
    """The hold-out evaluation described in the module docstring (progress: a bar over each run's split seeds) on
    `table` (default: config.source.load()). Returns (metrics, PEBS maps on all ratings)."""
    if not ENGINES.get(config.source.engine).keeps_rows:
        raise ConfigError(
            f"calibrate run evaluates on the ratings themselves (pair accuracy, NLL, the forecaster's "
            f"pilot, MixedLM), so it reads them into memory: use --engine {config.source.engine} with "
            "calibrate fit, or evaluate on a sample of the raters (docs/scale.md)"
        )
    table = table if table is not None else config.source.load()
    evaluation = config.evaluation
    main = summarise(evaluate_holdout(table, evaluation, "calibrate" if progress else None))
    sweep = {}
    min_fit = float(main["flat"]["fit_ratings_per_rater_mean"])
    for size in config.fit_sizes:
        if size >= min_fit:
            continue  # capping at or above the actual fit size would repeat the main run
        sweep[int(size)] = summarise(
            evaluate_holdout(
                table, replace(evaluation, fit_per_rater=int(size)), f"calibrate, fit size {size}" if progress else None
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pebs = create_calibrator("pebs", n_min=evaluation.n_min).fit(table)
    metrics: dict[str, Any] = dict(main["flat"])
    for size, summ in sweep.items():
        for key, value in summ["flat"].items():
            if key.split(".")[0] in SWEEP_KEYS or key.startswith("forecast_gain"):
                metrics[f"fit_size.{size}.{key}"] = value
    quality = table.quality_counts()
    metrics["data"] = quality
    metrics["ratings"] = {
        "name": table.name,
        "source": table.source,
        "notes": table.notes,
        "score_range": table.score_range,
        "demographic_columns": list(table.demographic_columns),
    }
    pebs.maps_.info = {**pebs.maps_.info, **score_scale(table)}
    metrics["pebs_full_fit"] = pebs_summary(pebs.maps_)
    metrics["config"] = {**to_dict(config), "group_column_used": main["tables"].get("group_column")}
    metrics["tables"] = {
        "main": main["tables"],
        "fit_size": {str(k): v["tables"] for k, v in sweep.items()},
        "fit_size_flat": {str(k): v["flat"] for k, v in sweep.items()},
    }
    return metrics, pebs.maps_


def fit_calibration(config: CalibrateFitConfig, table: RatingTable | None = None) -> CalibrationMaps:
    """Fits `config.method` on all ratings of `config.source` (or on `table`, already read) and returns its
    per-rater maps."""
    reader = ENGINES.get(config.source.engine if table is None else "memory")
    estimator = create_calibrator(config.method)
    if estimator.needs_rows and not reader.keeps_rows:
        raise ConfigError(
            f"calibrator {config.method!r} fits from the ratings themselves, not from per-rater "
            f"statistics: use --engine memory, or another method with --engine {config.source.engine}"
        )
    wants_group = "group_column" in estimator.get_params()
    data = reader.read(config.source, config.group_column, wants_group, table)
    estimator = create_calibrator(
        config.method, **shared_params(config.method, n_min=config.n_min, group_column=data.group_column)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        estimator.fit(data.ratings)
    maps = estimator.maps_
    maps.method = config.method
    maps.info = {
        **maps.info,
        "data": data.quality,
        "ratings": data.name,
        "engine": config.source.engine,
        **score_scale(data.ratings),
    }
    return maps


def score_scale(ratings: Any) -> dict[str, float]:
    """The model-score scale the maps are fitted on (mean and SD), so that scoring can warn when maps meet the
    scores of another model's scale (CalibrationMaps.range_note)."""
    stats = ratings if isinstance(ratings, RaterStats) else rater_stats(ratings)
    mean, sd = model_score_location(stats)
    return {"model_score_mean": mean, "model_score_sd": sd}
