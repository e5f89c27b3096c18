"""The two calibration computations the jobs run (rewardsmith.jobs.calibrate writes their files):

evaluate_calibration(config): ratings -> within-rater hold-out of every method (plus a sweep of smaller fit
sizes) and PEBS fitted on all ratings -> the metrics dict and the fitted maps.
fit_calibration(config): ratings -> one calibrator fitted on all ratings -> its maps. The ratings are read by
the engine `config.source.engine` names (calibrate.readers.ENGINES): in memory, or as per-rater statistics
computed by DuckDB or Spark, which every calibrator but MixedLM fits from.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from rewardsmith.calibrate.config import CalibrateFitConfig, CalibrateRunConfig, RatingsSource
from rewardsmith.calibrate.estimators import create_calibrator, shared_params
from rewardsmith.calibrate.evaluate import evaluate_holdout, summarise
from rewardsmith.calibrate.maps import CalibrationMaps, model_identity
from rewardsmith.calibrate.readers import ENGINES
from rewardsmith.calibrate.stats import RaterStats, model_score_location, rater_moments, rater_stats
from rewardsmith.config import to_dict
from rewardsmith.data.ratings import RatingTable
from rewardsmith.errors import ConfigError, DataError

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


def require_model_score_spread(ratings: RatingTable | RaterStats, name: str, path: str | None = None) -> None:
    """DataError (one line) when every rating carries the same model score (to the tolerance that marks a rater's
    single model score): a constant model score carries no information to fit a slope on, so every map's slope
    (and the mixed model) would be undetermined. No ratings: nothing to say here (require_ratings says it)."""
    if isinstance(ratings, RatingTable) and ratings.n_ratings == 0:
        return
    stats = ratings if isinstance(ratings, RaterStats) else rater_stats(ratings)
    n = int(stats.n.sum())
    if n == 0 or not bool(rater_moments(stats.total()).single_model_score[0]):
        return
    mean, _ = model_score_location(stats)
    raise DataError(
        f"all {n} ratings of {name} have the same model score ({mean:g}): a constant model score carries no "
        "information to fit a slope on",
        path=path or None,
    )


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
    require_model_score_spread(table, table.name, table.source)
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
    pebs.maps_.info = {**pebs.maps_.info, **score_scale(table), **fitted_on(config.source, table)}
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
    where = data.ratings.source if isinstance(data.ratings, RatingTable) else config.source.ratings
    require_model_score_spread(data.ratings, data.name, where)
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
        **fitted_on(config.source, data.ratings),
    }
    return maps


def fitted_on(source: RatingsSource, ratings: RatingTable | RaterStats) -> dict[str, Any]:
    """What maps are fitted on, recorded in their info so that scoring says when they meet rewards they were not
    fitted on (CalibrationMaps.provenance_note, scale_line): the ratings file or source, the range of its scores,
    the model whose rewards are the model scores (calibrate.maps.model_identity; None: the scores that came with the
    ratings) and a description of those scores."""
    table = ratings if isinstance(ratings, RatingTable) else None
    where = (table.source if table is not None else "") or source.ratings
    if source.model is not None:
        scores = f"rewards of {source.model}"
    elif table is not None and table.notes.get("model_score"):
        scores = table.notes["model_score"]
    elif source.model_scores is not None:
        scores = f"the model scores of {source.model_scores}"
    else:
        scores = f"the model_score column of {where}"
    out: dict[str, Any] = {
        "ratings_source": where,
        "model": model_identity(source.model) if source.model is not None else None,
        "model_scores": scores,
    }
    if table is not None and table.n_ratings:
        out["rating_range"] = [float(table.frame["score"].min()), float(table.frame["score"].max())]
    elif source.score_min is not None and source.score_max is not None:
        out["rating_range"] = [float(source.score_min), float(source.score_max)]
    return out


def score_scale(ratings: Any) -> dict[str, float]:
    """The model-score scale the maps are fitted on (mean and SD), so that scoring can warn when maps meet the
    scores of another model's scale (CalibrationMaps.range_note)."""
    stats = ratings if isinstance(ratings, RaterStats) else rater_stats(ratings)
    mean, sd = model_score_location(stats)
    return {"model_score_mean": mean, "model_score_sd": sd}
