"""Forecast of the held-out RMSE gain of PEBS over the pooled map from a short pilot sample.

Normal hierarchical model (METHODS.md section 3): rater j's parameters theta_j = (slope, intercept at the
centre c) ~ N(theta_pop, T); with n_j ratings its OLS estimate has sampling covariance V_j; residual
variance sigma_j^2. For a held-out rating at model score r, with x = (r - c, 1), the expected squared error
of a map whose parameter error has covariance M is sigma_j^2 + x' M x, so averaged over the distribution of
r it is sigma_j^2 + trace(M E[x x']). M is
    pooled:    T                                   (the full between-rater spread)
    PEBS:      W_j V_j W_j' + (I - W_j) T (I - W_j)'  (W_j the shrinkage weights; = posterior covariance
                                                    T (T + V_j)^-1 V_j for joint weights)
    OLS:       V_j
and the forecast gain is 1 - sqrt(MSE_shrunk / MSE_pooled), MSE averaged over raters weighted by their
held-out ratings (proportional to n_j). The pilot supplies sigma_j^2 (moderated), T (moments) and the
distribution of r; the planned n_j is the number of ratings each rater will contribute to the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rewardsmith.calibrate.shrinkage import moderated_variances, moment_tau2, per_rater_ols
from rewardsmith.calibrate.stats import RaterStats, rater_moments, rater_stats
from rewardsmith.data.ratings import RatingTable
from rewardsmith.errors import DataError


@dataclass(frozen=True)
class Forecast:
    """Forecast RMSE gains (percent; positive = lower RMSE than pooled) and the inputs they came from."""

    gain_pct: float
    gain_ols_pct: float
    mse_pooled: float
    mse_pebs: float
    mse_ols: float
    tau2: list[list[float]]
    noise_var: float
    pilot_raters: int
    pilot_ratings: int

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _ols_sampling_cov(noise_var: np.ndarray, n: np.ndarray, r_offset: float, r_var: float) -> np.ndarray:
    """(J, 2, 2) OLS covariance of (slope, intercept at c) for n_j ratings whose model scores have mean
    c + r_offset and variance r_var: sigma^2 / n * [[1/v, -m/v], [-m/v, 1 + m^2/v]]."""
    scale = noise_var / n
    cov = np.empty((len(n), 2, 2))
    cov[:, 0, 0] = scale / r_var
    cov[:, 0, 1] = cov[:, 1, 0] = -scale * r_offset / r_var
    cov[:, 1, 1] = scale * (1 + r_offset**2 / r_var)
    return cov


def forecast_mse(
    noise_var: np.ndarray,
    tau2: np.ndarray,
    planned_n: np.ndarray,
    r_offset: float,
    r_var: float,
    n_min: int = 6,
    joint: bool = False,
    sampling_noise_var: np.ndarray | None = None,
) -> dict[str, float]:
    """Expected held-out MSE of the pooled, PEBS and per-rater OLS maps under the normal model (pure).

    noise_var, planned_n: (J,) per-rater residual variance and fit size; tau2: (2, 2) between-rater
    covariance of (slope, intercept at c); r_offset, r_var: mean (minus c) and variance of model scores.
    sampling_noise_var: (J,) residual variances behind each rater's OLS covariance V_j and weights
    (default noise_var; a moderated estimate is steadier per rater, an unbiased one averages right).
    Returns {"pooled", "pebs", "ols"} MSEs averaged over raters with weights planned_n.
    """
    planned_n = np.asarray(planned_n, dtype=np.float64)
    noise_var = np.broadcast_to(np.asarray(noise_var, dtype=np.float64), planned_n.shape)
    design_var = noise_var if sampling_noise_var is None else np.broadcast_to(sampling_noise_var, planned_n.shape)
    second = np.array([[r_var + r_offset**2, r_offset], [r_offset, 1.0]])  # E[x x'], x = (r - c, 1)
    cov = _ols_sampling_cov(design_var, np.maximum(planned_n, 3.0), r_offset, r_var)
    eye = np.eye(2)
    if joint:
        weights = tau2[None] @ np.linalg.pinv(tau2[None] + cov)
    else:
        diag_t = np.diag(tau2)[None]
        diag_v = np.diagonal(cov, axis1=1, axis2=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(diag_t > 0, diag_t / (diag_t + diag_v), 0.0)
        weights = np.zeros_like(cov)
        weights[:, 0, 0], weights[:, 1, 1] = w[:, 0], w[:, 1]
    eligible = planned_n >= n_min
    weights[~eligible] = 0.0
    keep = eye[None] - weights
    risk_pebs = weights @ cov @ weights.transpose(0, 2, 1) + keep @ tau2[None] @ keep.transpose(0, 2, 1)
    risk_ols = np.where((planned_n >= 3)[:, None, None], cov, tau2[None])

    def mse(risk: np.ndarray) -> float:
        per_rater = noise_var + np.einsum("jkl,kl->j", risk, second)
        return float(np.average(per_rater, weights=planned_n))

    return {"pooled": mse(np.broadcast_to(tau2, cov.shape)), "pebs": mse(risk_pebs), "ols": mse(risk_ols)}


def forecast_gain(
    pilot: RatingTable | pd.DataFrame | RaterStats,
    planned_n: int | np.ndarray | None = None,
    n_min: int = 6,
    centre: bool = True,
    joint: bool = False,
) -> Forecast:
    """Forecasts the RMSE gain of PEBS (and per-rater OLS) over pooled from pilot ratings.

    planned_n: ratings per rater in the full fit, an int, a (J,) array aligned with the pilot's raters
    (sorted ids), or None (the pilot's own sizes). The model-score distribution is the pilot's pooled one.
    """
    stats = pilot if isinstance(pilot, RaterStats) else rater_stats(pilot)
    moments = rater_moments(stats)
    centre_value = float(stats.r_shift) if centre else 0.0
    ols = per_rater_ols(moments, centre_value, n_min)
    if ols.eligible.sum() < 2:
        raise DataError(
            f"a forecast needs at least 2 pilot raters with >= {n_min} ratings and more than one "
            f"model score; got {int(ols.eligible.sum())}"
        )
    _, tau2_raw = moment_tau2(ols.theta[ols.eligible], ols.cov[ols.eligible])
    values, vectors = np.linalg.eigh((tau2_raw + tau2_raw.T) / 2)
    tau2 = (vectors * np.maximum(values, 0.0)) @ vectors.T
    if not joint:  # independent shrinkage clips each variance separately; keep the covariance for the risk
        diag = np.maximum(np.diag(tau2_raw), 0.0)
        corr_cov = (
            tau2_raw[0, 1] if diag.prod() > tau2_raw[0, 1] ** 2 else np.sign(tau2_raw[0, 1]) * np.sqrt(diag.prod())
        )
        tau2 = np.array([[diag[0], corr_cov], [corr_cov, diag[1]]])
    dof = moments.n[ols.eligible] - 2.0
    post, prior_var, _ = moderated_variances(ols.resid_var[ols.eligible], dof)
    moderated = np.full(stats.n_raters, prior_var)
    moderated[ols.eligible] = post
    # The MSE averages sigma_j^2 over raters: the unbiased RSS / (n - 2) averages right; the moderated
    # values (shrunk on the log scale) are used only inside each rater's V_j.
    noise = np.full(stats.n_raters, float(np.mean(ols.resid_var[ols.eligible])))
    noise[ols.eligible] = ols.resid_var[ols.eligible]
    total_n = float(moments.n.sum())
    r_mean = float((moments.mean_r * moments.n).sum() / total_n)
    r_var = float((moments.sxx.sum() + (moments.n * (moments.mean_r - r_mean) ** 2).sum()) / total_n)
    if planned_n is None:
        planned = moments.n.copy()
    else:
        planned = np.broadcast_to(np.asarray(planned_n, dtype=np.float64), (stats.n_raters,)).copy()
    mse = forecast_mse(noise, tau2, planned, r_mean - centre_value, r_var, n_min, joint, moderated)
    if not mse["pooled"] > 0:
        raise DataError(
            "a forecast needs ratings that vary: the pilot's pooled map already fits every rating "
            "exactly (all scores the same, or no residual spread)"
        )
    gain = 100 * (1 - np.sqrt(mse["pebs"] / mse["pooled"]))
    gain_ols = 100 * (1 - np.sqrt(mse["ols"] / mse["pooled"]))
    return Forecast(
        float(gain),
        float(gain_ols),
        mse["pooled"],
        mse["pebs"],
        mse["ols"],
        tau2.tolist(),
        float(np.average(noise, weights=planned)),
        stats.n_raters,
        stats.n_ratings,
    )
