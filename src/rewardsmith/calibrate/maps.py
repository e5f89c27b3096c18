"""Fitted per-rater affine maps: prediction, predictive variance, JSON / Parquet files, apply_calibration.

A map sends the shared model score r to rater j's scale: s_hat = slope_j * r + intercept_j. Raters not in
the file get the population map when `unknown="population"`, or an error naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from rewardsmith.errors import ConfigError, DataError
from rewardsmith.io.atomic import atomic_write_bytes
from rewardsmith.io.jsonsafe import json_ready, to_json

FORMAT = "rewardsmith.calibration/1"
UnknownRater = Literal["population", "error"]
# The per-rater (J,) arrays of CalibrationMaps besides rater_ids, in the column order of the saved files.
PER_RATER_FIELDS = (
    "slope",
    "intercept",
    "noise_var",
    "n_ratings",
    "var_slope",
    "var_intercept",
    "cov_slope_intercept",
)


@dataclass
class CalibrationMaps:
    """Per-rater affine maps; every array has shape (J,), aligned with `rater_ids` (sorted).

    slope, intercept: the map s_hat = slope * r + intercept (intercept at r = 0).
    noise_var: residual variance of the rater's scores around the map.
    var_slope, var_intercept, cov_slope_intercept: uncertainty of the map's parameters (0 where the method
        does not model it); the predictive variance at r is
        noise_var + var_slope r^2 + 2 cov r + var_intercept.
    n_ratings: ratings the map was fitted on. diagnostics: method-specific (J,) arrays (shrinkage weights,
    OLS estimates, status codes). info: method-level scalars (tau^2, clipping flags, ...).
    """

    method: str
    rater_ids: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray
    noise_var: np.ndarray
    n_ratings: np.ndarray
    population_slope: float
    population_intercept: float
    population_noise_var: float
    var_slope: np.ndarray | None = None
    var_intercept: np.ndarray | None = None
    cov_slope_intercept: np.ndarray | None = None
    params: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rater_ids = np.asarray(self.rater_ids).astype(str)
        zeros = np.zeros(len(self.rater_ids))
        self.var_slope = zeros if self.var_slope is None else self.var_slope
        self.var_intercept = zeros.copy() if self.var_intercept is None else self.var_intercept
        self.cov_slope_intercept = zeros.copy() if self.cov_slope_intercept is None else self.cov_slope_intercept
        order = np.argsort(self.rater_ids, kind="stable")
        if not np.array_equal(order, np.arange(len(order))):
            for name in ("rater_ids", *PER_RATER_FIELDS):
                setattr(self, name, np.asarray(getattr(self, name))[order])
            self.diagnostics = {k: np.asarray(v)[order] for k, v in self.diagnostics.items()}

    @property
    def n_raters(self) -> int:
        return len(self.rater_ids)

    def index_of(
        self,
        rater_ids: Sequence[str] | np.ndarray,
        unknown: UnknownRater = "population",
    ) -> np.ndarray:
        """Row of each rater in the maps (N,), -1 for a rater not fitted."""
        ids = np.asarray(rater_ids).astype(str)
        pos = np.searchsorted(self.rater_ids, ids)
        pos = np.clip(pos, 0, max(self.n_raters - 1, 0))
        found = (self.rater_ids[pos] == ids) if self.n_raters else np.zeros(len(ids), bool)
        if unknown == "error" and not found.all():
            missing = sorted(set(ids[~found].tolist()))
            raise ConfigError(
                f"rater(s) not in the calibration: {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else "")
            )
        return np.where(found, pos, -1)

    def predict(
        self,
        rater_ids: Sequence[str] | np.ndarray,
        model_scores: np.ndarray,
        unknown: UnknownRater = "population",
    ) -> np.ndarray:
        """Calibrated scores (N,) of model scores (N,) for the given raters (N,)."""
        idx = self.index_of(rater_ids, unknown)
        slope = np.where(idx >= 0, self.slope[idx], self.population_slope)
        intercept = np.where(idx >= 0, self.intercept[idx], self.population_intercept)
        return slope * np.asarray(model_scores, dtype=np.float64) + intercept

    def apply(self, rater_id: str, model_scores: Sequence[float] | np.ndarray) -> tuple[np.ndarray, bool]:
        """One rater's calibrated scores (N,) of model scores (N,), and whether the rater was fitted (an unknown
        rater gets the population map, as PEBS does for raters it has not seen)."""
        scores = np.asarray(model_scores, dtype=np.float64)
        known = bool(self.index_of([str(rater_id)])[0] >= 0)
        return self.predict(np.full(len(scores), str(rater_id)), scores), known

    def range_note(self, model_scores: np.ndarray, width: float = 4.0) -> str | None:
        """A warning when most scores lie more than `width` SDs from the mean of the model scores the maps were
        fitted on (maps of one model's scale applied to another's); None when they fit, or when the fit's scale was
        not recorded (maps written before it was)."""
        mean, sd = self.info.get("model_score_mean"), self.info.get("model_score_sd")
        scores = np.asarray(model_scores, dtype=np.float64)
        if not (
            isinstance(mean, int | float)
            and isinstance(sd, int | float)
            and np.isfinite([mean, sd]).all()
            and scores.size
        ):
            return None
        low, high = mean - width * max(sd, 1e-12), mean + width * max(sd, 1e-12)
        outside = float(np.mean((scores < low) | (scores > high)))
        if outside <= 0.5:
            return None
        return (
            f"warning: {100 * outside:.0f}% of the rewards lie outside the model-score scale the calibration was "
            f"fitted on (mean {mean:.3g}, SD {sd:.3g}): the maps may belong to another model's scale"
        )

    def scale_line(self, rater: str) -> str:
        """One summary line saying what scale calibrated rewards are on: the rater's, in the ratings the maps were
        fitted on (their name and range, where the maps record them)."""
        ratings = self.info.get("ratings_source") or self.info.get("ratings") or "the calibration's ratings"
        low_high = self.info.get("rating_range")
        scale = f"{low_high[0]:g} to {low_high[1]:g}; " if isinstance(low_high, list) and len(low_high) == 2 else ""
        return f"calibrated: rewards mapped onto rater {rater}'s rating scale in {ratings} ({scale}{self.method} maps)"

    def provenance_note(self, model: str | Path) -> str | None:
        """A warning when the maps were not fitted on the rewards of `model` (the model being scored): fitted on the
        model scores that came with the ratings, or on another model's rewards; then each rater's map reads these
        rewards on a scale it was not fitted on (another model, another task). None when they were fitted on
        `model`, or when the maps do not record it (written before they did)."""
        if "model" not in self.info:
            return None
        fitted, here = self.info["model"], model_identity(model)
        if fitted == here:
            return None
        refit = f"fit them on its rewards: rewardsmith calibrate fit --model {model} --ratings ..."
        if fitted is None:
            scores = self.info.get("model_scores") or "the model scores that came with the ratings"
            return (
                f"warning: the calibration was fitted on {scores}, not on rewards of {model}: its maps read these "
                f"rewards on a scale they were not fitted on; {refit}"
            )
        return f"warning: the calibration was fitted on rewards of {fitted}, not of {model}; {refit}"

    def predict_var(
        self,
        rater_ids: Sequence[str] | np.ndarray,
        model_scores: np.ndarray,
        unknown: UnknownRater = "population",
    ) -> np.ndarray:
        """Predictive variance (N,) of each calibrated score: noise plus parameter uncertainty."""
        assert self.var_slope is not None and self.var_intercept is not None
        assert self.cov_slope_intercept is not None
        idx = self.index_of(rater_ids, unknown)
        r = np.asarray(model_scores, dtype=np.float64)
        known = idx >= 0
        param = self.var_slope[idx] * r * r + 2 * self.cov_slope_intercept[idx] * r + self.var_intercept[idx]
        return np.where(known, self.noise_var[idx] + param, self.population_noise_var)

    def to_frame(self) -> pd.DataFrame:
        """One row per rater: rater_id, slope, intercept, noise_var, n_ratings, parameter variances and
        diagnostics."""
        frame = pd.DataFrame({"rater_id": self.rater_ids, **{name: getattr(self, name) for name in PER_RATER_FIELDS}})
        for key, values in self.diagnostics.items():
            frame[key] = values
        return frame

    def header(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "method": self.method,
            "params": json_ready(self.params),
            "population": {
                "slope": self.population_slope,
                "intercept": self.population_intercept,
                "noise_var": self.population_noise_var,
            },
            "info": json_ready(self.info),
        }


def model_identity(model: str | Path) -> str:
    """How maps record the model whose rewards they were fitted on: a local folder by its resolved path (the same
    folder named from anywhere), anything else (a hub id) as given."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else str(model)


def maps_bytes(maps: CalibrationMaps, suffix: str) -> bytes:
    """The bytes of a maps file: JSON (`.json`) or Parquet (`.parquet`, header in the schema metadata)."""
    frame = maps.to_frame()
    if suffix.lower() == ".json":
        return to_json({**maps.header(), "raters": frame.to_dict(orient="list")}).encode("utf-8")
    if suffix.lower() in (".parquet", ".pq"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[b"rewardsmith.calibration"] = json.dumps(json_ready(maps.header())).encode()
        sink = pa.BufferOutputStream()
        pq.write_table(table.replace_schema_metadata(meta), sink)
        return bytes(sink.getvalue().to_pybytes())
    raise ConfigError(f"calibration file must end in .json or .parquet, got suffix {suffix!r}")


def save_maps(maps: CalibrationMaps, path: str | Path) -> Path:
    """Writes the maps file (maps_bytes) atomically."""
    path = Path(path)
    data = maps_bytes(maps, path.suffix)
    return atomic_write_bytes(path, lambda fh: fh.write(data))


_CORE = ("rater_id", *PER_RATER_FIELDS)


def _finite(value: Any, name: str, path: Path) -> float:
    """A header number of a maps file; DataError naming the file and the field when it is not a finite number (a
    NaN map would turn every reward into null)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise DataError(f"must be a finite number, got {value!r}", path=path, field=name)
    return float(value)


def load_maps(path: str | Path) -> CalibrationMaps:
    """Reads maps written by save_maps; a DataError names the file when it is not one."""
    path = Path(path)
    if not path.exists():
        raise DataError("calibration file not found", path=path)
    try:
        if path.suffix.lower() == ".json":
            header = json.loads(path.read_text())
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                found = header.get("format") if isinstance(header, dict) else None
                raise DataError(f"unknown calibration format {found!r} (expected {FORMAT})", path=path)
            frame = pd.DataFrame(header["raters"])
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            raw = (table.schema.metadata or {}).get(b"rewardsmith.calibration")
            if raw is None:
                raise DataError("not a rewardsmith calibration file (no header in the Parquet metadata)", path=path)
            header = json.loads(raw)
            frame = table.to_pandas()
        if header.get("format") != FORMAT:
            raise DataError(f"unknown calibration format {header.get('format')!r} (expected {FORMAT})", path=path)
        pop = header["population"]
    except (KeyError, ValueError, OSError) as exc:
        raise DataError(f"not a readable calibration file ({exc})", path=path) from None
    missing = [c for c in ("rater_id", "slope", "intercept") if c not in frame.columns]
    if missing:
        raise DataError(f"missing column(s) {', '.join(missing)}", path=path)
    if not isinstance(pop, dict):
        raise DataError("must be an object with slope and intercept", path=path, field="population")
    population = {key: _finite(pop.get(key), f"population.{key}", path) for key in ("slope", "intercept")}
    pop_noise = 0.0 if pop.get("noise_var") is None else _finite(pop["noise_var"], "population.noise_var", path)
    rater_ids = frame["rater_id"].astype(str).to_numpy()

    def col(name: str, default: float = 0.0) -> np.ndarray:
        if name not in frame.columns:
            return np.full(len(frame), default)
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            k = int(bad[0])
            found = frame[name].iloc[k]
            found = float(found) if isinstance(found, float | np.floating) else found
            raise DataError(
                f"must be a finite number, got {found!r} for rater {rater_ids[k]!r}"
                + (f" (and {bad.size - 1} more raters)" if bad.size > 1 else ""),
                path=path,
                field=f"raters.{name}",
            )
        return values

    return CalibrationMaps(
        method=str(header.get("method", "")),
        rater_ids=rater_ids,
        slope=col("slope"),
        intercept=col("intercept"),
        noise_var=col("noise_var", pop_noise),
        n_ratings=col("n_ratings"),
        population_slope=population["slope"],
        population_intercept=population["intercept"],
        population_noise_var=pop_noise,
        var_slope=col("var_slope"),
        var_intercept=col("var_intercept"),
        cov_slope_intercept=col("cov_slope_intercept"),
        params=dict(header.get("params", {})),
        diagnostics={c: frame[c].to_numpy() for c in frame.columns if c not in _CORE},
        info=dict(header.get("info", {})),
    )


def apply_calibration(
    path: str | Path,
    rater_id: str | None,
    model_scores: Sequence[float] | np.ndarray,
    unknown: UnknownRater = "error",
) -> np.ndarray:
    """Maps model scores (N,) onto one rater's scale with the maps saved at `path`; returns (N,) floats.

    rater_id=None applies the population map. A rater not in the file raises ConfigError unless
    unknown="population" (then the population map is used, as PEBS does for raters it has not seen).
    """
    maps = load_maps(path)
    scores = np.asarray(model_scores, dtype=np.float64)
    if rater_id is None:
        return maps.population_slope * scores + maps.population_intercept
    return maps.predict(np.full(len(scores), str(rater_id)), scores, unknown=unknown)
