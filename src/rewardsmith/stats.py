"""Small statistics shared by every capability, each defined once: a stable logistic sigmoid, bootstrap
resampling (over units, paired, and hierarchical over seeds then units), percentile intervals and the verdict
an interval gives a claim, rank correlation and the length-controlled accuracy (numpy, and scipy where it has the
function)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


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


def interval_verdict(low: float | None, high: float | None, bar: float = 0.0) -> str | None:
    """A claim's verdict from the interval of its estimate: "held" when the interval lies above `bar`, "not
    held" below it, "inconclusive" when it covers it; None when an end is missing or not finite."""
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return None
    return "held" if low > bar else "not held" if high < bar else "inconclusive"


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
