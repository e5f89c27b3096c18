"""Small statistics shared by every capability, each defined once: a stable logistic sigmoid; the record of an
estimate with its bootstrap interval (Interval) and the verdict an interval gives a claim; bootstrap resampling
(over units, and hierarchical over seeds then units), the mean of per-unit values with its interval and the paired
difference of two models on the same units; rank correlation and the length-controlled accuracy (numpy, and scipy
where it has the function)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

# Below this many resampled units a percentile bootstrap interval is no basis for a verdict: with one unit every
# replicate equals the estimate (an interval of zero width, which "excludes" every bar the estimate is not on), and
# with a handful the replicates take only a few values, so the ends are the sample's extremes and the interval covers
# far less often than its level says. Below it the verdict is "too few <units>", never held or not held.
MIN_UNITS = 10

HELD, NOT_HELD, INCONCLUSIVE, TOO_FEW = "held", "not held", "inconclusive", "too few"


def json_float(value: float) -> float | None:
    """`value` as a Python float, or None when it is NaN or infinite (JSON has neither)."""
    value = float(value)
    return value if math.isfinite(value) else None


def interval_verdict(
    low: float | None, high: float | None, bar: float = 0.0, *, n: int | None = None, unit: str = "units"
) -> str | None:
    """A claim's verdict from the interval of its estimate: "too few <unit>" when it rests on fewer than MIN_UNITS
    units (n given), else "held" when the interval lies above `bar`, "not held" below it, "inconclusive" when it
    covers it; None when an end is missing or not finite."""
    if n is not None and n < MIN_UNITS:
        return f"{TOO_FEW} {unit}"
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return None
    return HELD if low > bar else NOT_HELD if high < bar else INCONCLUSIVE


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided percentile bootstrap interval, in the measure's unit.

    low and high are NaN without replicates (n_boot 0), all three NaN without a unit; n is the number of units
    resampled (prompts, pairs; of seeds x units, the units per seed); level is the interval's confidence.
    """

    estimate: float
    low: float
    high: float
    n: int
    level: float = 0.95

    @property
    def ci(self) -> list[float | None]:
        """[low, high], NaN written as None (JSON-ready)."""
        return [json_float(self.low), json_float(self.high)]

    def verdict(self, bar: float = 0.0, unit: str = "units") -> str | None:
        """The verdict of interval_verdict: held above `bar`, not held below, inconclusive across it, "too few
        <unit>" below MIN_UNITS units, None without a finite interval."""
        return interval_verdict(self.low, self.high, bar, n=self.n, unit=unit)

    def shifted(self, by: float) -> Interval:
        """The estimate minus an exact constant (the interval moves with it)."""
        return Interval(self.estimate - by, self.low - by, self.high - by, self.n, self.level)

    def to_dict(self) -> dict[str, Any]:
        """{"estimate", "low", "high", "n"}, NaN written as None (JSON-ready)."""
        return {
            "estimate": json_float(self.estimate),
            "low": json_float(self.low),
            "high": json_float(self.high),
            "n": int(self.n),
        }


def sigmoid(x: ArrayLike) -> FloatArray:
    """1 / (1 + exp(-x)) elementwise, without overflow for large |x| (scipy's expit). Returns float64 of x's
    shape."""
    from scipy import special  # imported on use: importing rewardsmith stays free of scipy

    return np.asarray(special.expit(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def logit(p: ArrayLike, eps: float = 1e-6) -> FloatArray:
    """log(p / (1 - p)) with p clipped to [eps, 1 - eps]."""
    q = np.clip(np.asarray(p, dtype=np.float64), eps, 1.0 - eps)
    return np.log(q) - np.log1p(-q)


def bootstrap_indices(n: int, n_boot: int, seed: int | np.random.Generator) -> NDArray[np.int64]:
    """Resampling indices for `n_boot` replicates of `n` units: shape (n_boot, n)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return rng.integers(0, n, size=(max(n_boot, 0), n))


def percentile_interval(replicates: ArrayLike, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (n_boot,), ignoring NaN ones; (nan, nan) if none is finite."""
    reps = np.asarray(replicates, dtype=np.float64)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(reps, [alpha, 1.0 - alpha])
    return float(low), float(high)


def hierarchical_indices(
    n_seeds: int, n_units: int, n_boot: int, seed: int | np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Two-stage resampling for results over seeds x units (e.g. student seeds x test pairs).

    Each replicate draws n_seeds seeds with replacement, then, within each drawn seed, n_units units with
    replacement. Returns (seed_idx (n_boot, n_seeds), unit_idx (n_boot, n_seeds, n_units)). With one seed
    the first stage is trivial and this is the ordinary bootstrap over units.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    seeds = rng.integers(0, n_seeds, size=(max(n_boot, 0), n_seeds))
    units = rng.integers(0, n_units, size=(max(n_boot, 0), n_seeds, n_units))
    return seeds, units


def hierarchical_replicates(
    values: ArrayLike,
    n_boot: int,
    seed: int | np.random.Generator,
    statistic: Callable[[FloatArray], FloatArray] | None = None,
) -> FloatArray:
    """Replicates of a statistic of a (S, N) array (S seeds x N units) under hierarchical resampling.

    statistic maps a (n_boot, S, N) resampled array to (n_boot,); default: the grand mean. Every row of a
    replicate uses the same unit indices across the arrays resampled with the same `seed`, so calling this
    with equal seeds on two models' arrays gives paired replicates.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[None, :]
    s, n = v.shape
    seed_idx, unit_idx = hierarchical_indices(s, n, n_boot, seed)
    resampled = v[seed_idx[..., None], unit_idx]  # (n_boot, S, N)
    if statistic is None:
        return np.asarray(resampled.mean(axis=(1, 2)), dtype=np.float64)
    return np.asarray(statistic(resampled), dtype=np.float64)


def replicate_interval(
    estimate: float, replicates: ArrayLike, n: int, confidence: float = 0.95, *, scale: float = 1.0
) -> Interval:
    """An estimate with the percentile interval of its bootstrap replicates (n_boot,) (NaN ones ignored), both
    times `scale`; n: the units resampled."""
    low, high = percentile_interval(np.asarray(replicates, dtype=np.float64) * scale, confidence)
    return Interval(float(estimate) * scale, low, high, int(n), confidence)


def _nan_mean(values: FloatArray, axis: int | tuple[int, ...]) -> FloatArray:
    """Mean over `axis` with NaN left out (NaN where every value is NaN); the plain mean when none is NaN."""
    if not np.isnan(values).any():
        return np.asarray(values.mean(axis=axis), dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN slice is NaN: left out of the interval
        return np.asarray(np.nanmean(values, axis=axis), dtype=np.float64)


def mean_interval(
    values: ArrayLike,
    n_boot: int = 1000,
    seed: int | np.random.Generator = 0,
    *,
    confidence: float = 0.95,
    scale: float = 1.0,
    indices: NDArray[np.int64] | None = None,
) -> Interval:
    """The mean of per-unit values with its percentile bootstrap interval, times `scale`.

    values: (N,) one value per unit, units resampled with replacement (bootstrap_indices); or (S, N), S seeds x N
    units, resampled hierarchically (hierarchical_indices: seed rows, then units within each drawn row). NaN values
    (a unit a measure cannot score) are left out of the estimate and of each replicate's mean. indices: (n_boot, N)
    resampling indices of a (N,) array drawn by the caller, so that several arrays over the same units share one
    draw (paired intervals); n_boot and seed are then unused. Returns Interval(mean, low, high, n = the units with a
    value (of an (S, N) array: N), level = confidence); low and high NaN without replicates, all NaN without units.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2):
        raise ValueError(f"values must be (units,) or (seeds, units), got shape {v.shape}")
    if v.ndim == 2 and indices is not None:
        raise ValueError("indices resample a (units,) array; (seeds, units) values draw their own hierarchical ones")
    n = int(np.isfinite(v).any(axis=0).sum()) if v.ndim == 2 else int(np.isfinite(v).sum())
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, confidence)
    estimate = float(np.nanmean(v))
    if v.ndim == 2:
        s, units = v.shape
        seed_idx, unit_idx = hierarchical_indices(s, units, n_boot, seed)
        resampled = v[seed_idx[..., None], unit_idx]  # (n_boot, S, N)
        reps = _nan_mean(resampled, (1, 2))
    else:
        idx = indices if indices is not None else bootstrap_indices(v.size, n_boot, seed)
        reps = _nan_mean(v[idx], 1)
    if reps.size == 0:
        return Interval(estimate * scale, float("nan"), float("nan"), n, confidence)
    return replicate_interval(estimate, reps, n, confidence, scale=scale)


def paired_difference(
    a: ArrayLike,
    b: ArrayLike,
    n_boot: int = 1000,
    seed: int | np.random.Generator = 0,
    *,
    confidence: float = 0.95,
    scale: float = 1.0,
    indices: NDArray[np.int64] | None = None,
) -> Interval:
    """Mean of a minus b over units the two share, with its paired bootstrap interval (times `scale`).

    a, b: (N,) values of two models (arms, selectors) on the same N units, same index = same unit; or (S, N), same
    row = same seed (seed s of each trained from the same seed and data). The difference is taken per unit (and
    seed) before resampling, so every replicate draws the same units, and the same seeds then the same units
    within each, for both: the interval holds only the variation of the difference, not of either model's level.
    NaN where either has no value. Returns mean_interval(a - b) (see it for n, indices and the NaN rule).
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired values must have one shape (same units, same seeds), got {x.shape} and {y.shape}")
    return mean_interval(x - y, n_boot, seed, confidence=confidence, scale=scale, indices=indices)


def length_controlled_value(correct: ArrayLike, longer: ArrayLike) -> FloatArray:
    """Mean of the two subgroup accuracies along the last axis, as fractions; NaN where a group is empty.

    correct: (..., K) per-pair correctness of pairs of unequal length; longer: (..., K) bool, True where the
    preferred response is the longer one. Returns (...,).
    """
    c = np.asarray(correct, dtype=np.float64)
    lg = np.asarray(longer, dtype=bool)
    sh = ~lg
    n_long, n_short = lg.sum(axis=-1), sh.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_long = np.where(n_long > 0, (c * lg).sum(axis=-1) / n_long, np.nan)
        acc_short = np.where(n_short > 0, (c * sh).sum(axis=-1) / n_short, np.nan)
    return np.asarray((acc_long + acc_short) / 2.0, dtype=np.float64)


def spearman(x: ArrayLike, y: ArrayLike) -> FloatArray:
    """Spearman rank correlation of x and y along the last axis (..., n) -> (...,); NaN where either is constant."""
    from scipy import stats

    rx = stats.rankdata(np.asarray(x, dtype=np.float64), axis=-1)  # average ranks: ties share their mean rank
    ry = stats.rankdata(np.asarray(y, dtype=np.float64), axis=-1)
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=-1) * (ry**2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(den > 0, (rx * ry).sum(axis=-1) / den, np.nan), dtype=np.float64)


def require_finite(values: ArrayLike, what: str = "reward") -> FloatArray:
    """`values` (N,) as float64 when every one is finite; else NonFiniteReward naming the first that is not. The one
    check of every scored text: a NaN must never pass as a result, or count as a tie."""
    from rewardsmith.errors import NonFiniteReward

    out = np.asarray(values, dtype=np.float64)
    if out.size and not np.isfinite(out).all():
        k = int(np.flatnonzero(~np.isfinite(out.ravel()))[0])
        raise NonFiniteReward(k, float(out.ravel()[k]), what)
    return out
