"""The two calibration jobs the CLI calls: a full evaluation run and fitting maps for later use.

run_calibration(config): ratings -> within-rater hold-out of every method (plus a sweep of smaller fit
sizes) -> metrics.json, report.md, plots/, maps.json (PEBS fitted on all ratings), config.json.
fit_calibration(source, out): ratings -> one calibrator fitted on all ratings -> maps file (.json/.parquet).
"""

from __future__ import annotations

import json
import platform
import subprocess
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.calibrate.config import CalibrateRunConfig, RatingsSource
from rewardsmith.calibrate.estimators import create_calibrator
from rewardsmith.calibrate.evaluate import evaluate_holdout, summarise
from rewardsmith.calibrate.maps import CalibrationMaps, _jsonable, save_maps
from rewardsmith.calibrate.report import write_report

SWEEP_KEYS = (
    "rmse",
    "gain_vs_pooled_pct",
    "gain_vs_pooled_ci",
    "p_value",
    "gain_vs_ols_pct",
    "p_value_vs_ols",
    "pair_accuracy",
)


def _environment() -> dict[str, Any]:
    import scipy
    import statsmodels

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "statsmodels": statsmodels.__version__,
    }
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
            check=False,
        ).stdout.strip()
        env["git_commit"] = commit or None
    except (OSError, subprocess.SubprocessError):
        env["git_commit"] = None
    return env


def pebs_summary(maps: CalibrationMaps) -> dict[str, Any]:
    """The PEBS facts a reader checks: tau^2 and its clipping, population map, sparse and guarded raters."""
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
    out = {k: info.get(k) for k in keys}
    out["population_intercept"] = maps.population_intercept
    out["nonpositive_slope_raters"] = list(info.get("nonpositive_slope_raters", []))
    return out


def run_calibration(config: CalibrateRunConfig) -> dict[str, Any]:
    """Runs the evaluation described in the module docstring; returns the metrics written to metrics.json."""
    table = config.source.load()
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    evaluation = config.evaluation
    main = summarise(evaluate_holdout(table, evaluation))
    from dataclasses import replace

    sweep = {}
    min_fit = float(main["flat"]["fit_ratings_per_rater_mean"])
    for size in config.fit_sizes:
        if size >= min_fit:
            continue  # capping at or above the actual fit size would repeat the main run
        sweep[int(size)] = summarise(evaluate_holdout(table, replace(evaluation, fit_per_rater=int(size))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pebs = create_calibrator("pebs", n_min=evaluation.n_min).fit(table)
    save_maps(pebs.maps_, out / "maps.json")

    metrics: dict[str, Any] = dict(main["flat"])
    for size, summ in sweep.items():
        for key, value in summ["flat"].items():
            if key.split(".")[0] in SWEEP_KEYS or key.startswith("forecast_gain"):
                metrics[f"fit_size.{size}.{key}"] = value
    quality = table.quality_counts()
    metrics.update({f"data.{k}": v for k, v in quality.items()})
    metrics["data"] = quality
    metrics["ratings"] = {
        "name": table.name,
        "source": table.source,
        "notes": table.notes,
        "score_range": table.score_range,
        "demographic_columns": list(table.demographic_columns),
    }
    metrics["pebs_full_fit"] = pebs_summary(pebs.maps_)
    metrics["config"] = {
        **asdict(evaluation),
        "fit_sizes": list(config.fit_sizes),
        "group_column_used": main["tables"].get("group_column"),
        "source": asdict(config.source),
    }
    metrics["tables"] = {"main": main["tables"], "fit_size": {str(k): v["tables"] for k, v in sweep.items()}}
    metrics["environment"] = _environment()
    metrics = _jsonable(metrics)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    (out / "config.json").write_text(json.dumps(_jsonable(metrics["config"]), indent=1))
    write_report(out, metrics, main, sweep, pebs.maps_)
    return metrics


def fit_calibration(
    source: RatingsSource,
    out: str | Path,
    method: str = "pebs",
    n_min: int = 6,
    group_column: str | None = None,
) -> CalibrationMaps:
    """Fits `method` on all ratings of `source` and saves its per-rater maps to `out` (.json or .parquet)."""
    table = source.load()
    if method == "group" and not group_column:
        group_column = table.demographic_columns[0] if table.demographic_columns else None
    estimator = create_calibrator(method, n_min=n_min, group_column=group_column)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        estimator.fit(table)
    maps = estimator.maps_
    maps.method = method
    maps.info = {**maps.info, "data": table.quality_counts(), "ratings": table.name}
    save_maps(maps, out)
    return maps
