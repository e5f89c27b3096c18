"""Gao et al. 2022's functional forms of the gold against d = sqrt(KL), fitted by least squares (no intercept: the
gain over n = 1, or over step 0, is 0 at d = 0), with percentile bootstrap CIs over prompts.

- best-of-n: gold(d) = d (alpha - beta d); its peak d* = alpha / (2 beta) (where beta > 0);
- RL: gold(d) = d (alpha - beta log d).

The fit describes the curve; the data-based verdict (bon/metrics.py) decides "over-optimised".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.stats import Interval, bootstrap_indices, percentile_interval

FloatArray = NDArray[np.float64]
FORMS: dict[str, Callable[[FloatArray], FloatArray]] = {
    # the two regressors of each form: gold(d) = alpha * x1 - beta * x2
    "bon": lambda d: np.stack([d, d * d], axis=1),
    "rl": lambda d: np.stack([d, d * np.log(np.maximum(d, 1e-12))], axis=1),
}


def fit_form(d: ArrayLike, gain: ArrayLike, form: str) -> tuple[float, float]:
    """(alpha, beta) of gain (K,) at d (K,) under `form` ("bon" | "rl"), least squares over the points with d > 0."""
    d_arr, g = np.asarray(d, dtype=np.float64), np.asarray(gain, dtype=np.float64)
    keep = (d_arr > 0) & np.isfinite(g)
    x = FORMS[form](d_arr[keep])
    coef, *_ = np.linalg.lstsq(x, g[keep], rcond=None)
    return float(coef[0]), float(-coef[1])


def predict(d: ArrayLike, alpha: float, beta: float, form: str) -> FloatArray:
    """The form's gold gain at d."""
    x = FORMS[form](np.asarray(d, dtype=np.float64))
    return np.asarray(alpha * x[:, 0] - beta * x[:, 1], dtype=np.float64)


def peak(alpha: float, beta: float) -> float:
    """The best-of-n form's peak d* = alpha / (2 beta); inf when beta <= 0 (no peak: the curve keeps rising)."""
    return alpha / (2 * beta) if beta > 0 else float("inf")


def inverse_peak(alpha: float, beta: float) -> float:
    """1 / d* = 2 beta / alpha: 0 or below where the curve has no peak (beta <= 0), smaller as the peak moves right."""
    return 2.0 * beta / alpha if alpha > 0 else float("nan")


def fit_with_ci(
    d: ArrayLike, per_prompt_gain: ArrayLike, form: str, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The form fitted to the mean over prompts of per_prompt_gain (P, K) at d (K,), and refitted to each bootstrap
    resample of the prompts: alpha, beta and (best-of-n) the peak d*, each an Interval's dict; the fit's residuals
    (K,) on the mean curve."""
    gains = np.asarray(per_prompt_gain, dtype=np.float64)
    d_arr = np.asarray(d, dtype=np.float64)
    mean = np.nanmean(gains, axis=0)
    alpha, beta = fit_form(d_arr, mean, form)
    reps = [
        fit_form(d_arr, np.nanmean(gains[idx], axis=0), form) for idx in bootstrap_indices(len(gains), n_boot, seed)
    ]
    a_reps = np.array([r[0] for r in reps])
    b_reps = np.array([r[1] for r in reps])

    def interval(value: float, values: FloatArray) -> dict[str, Any]:
        low, high = percentile_interval(values[np.isfinite(values)]) if len(values) else (float("nan"), float("nan"))
        return Interval(value, low, high, len(gains)).to_dict()

    out = {
        "alpha": interval(alpha, a_reps),
        "beta": interval(beta, b_reps),
        "residuals": [float(r) for r in mean - predict(d_arr, alpha, beta, form)],
        "d": [float(x) for x in d_arr],
        "mean_gain": [float(x) for x in mean],
    }
    if form == "bon":
        out["peak_d"] = interval(peak(alpha, beta), np.array([peak(a, b) for a, b in reps]))
    return out
