"""Per-rater calibration of reward-model scores: PEBS and its baselines, evaluation, forecaster.

Importing the package reads no file and loads nothing heavy: names resolve on first use (PEP 562), so
the command line can read the option help in calibrate.config without importing scikit-learn.
Estimators follow the scikit-learn contract (see estimators.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "CALIBRATORS": "estimators",
    "PEBS": "estimators",
    "AffineCalibrator": "estimators",
    "GroupAffine": "estimators",
    "MixedLMCalibrator": "estimators",
    "PerRaterOLS": "estimators",
    "PooledAffine": "estimators",
    "create_calibrator": "estimators",
    "Forecast": "forecast",
    "forecast_gain": "forecast",
    "forecast_mse": "forecast",
    "CalibrationMaps": "maps",
    "apply_calibration": "maps",
    "load_maps": "maps",
    "save_maps": "maps",
    "RaterStats": "stats",
    "affine_sse": "stats",
    "rater_stats": "stats",
    "stats_from_arrays": "stats",
    "rater_stats_duckdb": "readers",
    "CalibrateFitConfig": "config",
    "CalibrateRunConfig": "config",
    "EvalConfig": "config",
    "RatingsSource": "config",
    "evaluate_calibration": "run",
    "fit_calibration": "run",
}
__all__ = [
    "CALIBRATORS",
    "PEBS",
    "AffineCalibrator",
    "CalibrateFitConfig",
    "CalibrateRunConfig",
    "CalibrationMaps",
    "EvalConfig",
    "Forecast",
    "GroupAffine",
    "MixedLMCalibrator",
    "PerRaterOLS",
    "PooledAffine",
    "RaterStats",
    "RatingsSource",
    "affine_sse",
    "apply_calibration",
    "create_calibrator",
    "evaluate_calibration",
    "fit_calibration",
    "forecast_gain",
    "forecast_mse",
    "load_maps",
    "rater_stats",
    "rater_stats_duckdb",
    "save_maps",
    "stats_from_arrays",
]

if TYPE_CHECKING:
    from rewardsmith.calibrate.config import CalibrateFitConfig, CalibrateRunConfig, EvalConfig, RatingsSource
    from rewardsmith.calibrate.estimators import (
        CALIBRATORS,
        PEBS,
        AffineCalibrator,
        GroupAffine,
        MixedLMCalibrator,
        PerRaterOLS,
        PooledAffine,
        create_calibrator,
    )
    from rewardsmith.calibrate.forecast import Forecast, forecast_gain, forecast_mse
    from rewardsmith.calibrate.maps import CalibrationMaps, apply_calibration, load_maps, save_maps
    from rewardsmith.calibrate.readers import rater_stats_duckdb
    from rewardsmith.calibrate.run import evaluate_calibration, fit_calibration
    from rewardsmith.calibrate.stats import (
        RaterStats,
        affine_sse,
        rater_stats,
        stats_from_arrays,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rewardsmith.calibrate' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rewardsmith.calibrate.{module}"), name)
