"""Per-rater calibration of reward-model scores: PEBS and its baselines, evaluation, forecaster.

Importing this package reads no file; estimators follow the scikit-learn contract (see estimators.py).
"""

from rewardkit.calibrate.estimators import (
    CALIBRATORS,
    PEBS,
    AffineCalibrator,
    GroupAffine,
    MixedLMCalibrator,
    PerRaterOLS,
    PooledAffine,
    create_calibrator,
)
from rewardkit.calibrate.forecast import Forecast, forecast_gain, forecast_mse
from rewardkit.calibrate.maps import CalibrationMaps, apply_calibration, load_maps, save_maps
from rewardkit.calibrate.stats import (
    RaterStats,
    affine_sse,
    rater_stats,
    rater_stats_duckdb,
    stats_from_arrays,
)

__all__ = [
    "CALIBRATORS",
    "PEBS",
    "AffineCalibrator",
    "CalibrationMaps",
    "Forecast",
    "GroupAffine",
    "MixedLMCalibrator",
    "PerRaterOLS",
    "PooledAffine",
    "RaterStats",
    "affine_sse",
    "apply_calibration",
    "create_calibrator",
    "forecast_gain",
    "forecast_mse",
    "load_maps",
    "rater_stats",
    "rater_stats_duckdb",
    "save_maps",
    "stats_from_arrays",
]
