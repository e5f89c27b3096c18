"""Per-rater affine calibrators (METHODS.md section 3), one scikit-learn style interface.

Every estimator maps the shared model score r to rater j's scale, s_hat = slope_j * r + intercept_j:

    est = PEBS(n_min=6).fit(ratings)          # RatingTable, DataFrame or RaterStats
    est.predict(rater_ids, model_scores)      # (N,) calibrated scores
    est.maps_                                 # CalibrationMaps: the learned per-rater maps

The math lives in private pure functions over per-rater sufficient statistics (stats.py); the classes
only store parameters, call them and keep the learned state (names ending in "_"). The random-slope
mixed model (MixedLMCalibrator) is the classical baseline and needs the raw ratings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal, TypeAlias

import numpy as np
import pandas as pd
from scipy import special
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from rewardsmith.calibrate.maps import CalibrationMaps, UnknownRater
from rewardsmith.calibrate.stats import RaterMoments, RaterStats, rater_moments, rater_stats
from rewardsmith.data.ratings import RatingTable
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.registry import Registry

Ratings: TypeAlias = RatingTable | pd.DataFrame | RaterStats
SlopeGuard = Literal["report", "population"]

# Floor of a rater's residual variance, as a fraction of the median rater's (see _per_rater_ols).
VAR_FLOOR_FRACTION = 0.01
# A shrunk slope at or below this fraction of the population slope, in the population slope's direction, counts as
# non-positive (a slope of 1e-16 is zero up to rounding and ties every prediction). The direction matters when the
# model score falls as the ratings rise (a harmlessness reward against harm ratings): every slope is then negative,
# and a map reverses the population's ranking when its slope is positive.
NONPOSITIVE_SLOPE_TOL = 1e-9

# status codes stored per rater in maps_.diagnostics["status"]
STATUS_FITTED, STATUS_SPARSE, STATUS_SINGLE_MODEL_SCORE, STATUS_GUARDED = 0, 1, 2, 3


# ----------------------------------------------------------------------------------------------
# Pure functions


@dataclass(frozen=True)
class AffineFit:
    """One affine least-squares fit per row (arrays (K,)): slope, intercept at r = 0, residual variance
    (dof-corrected: RSS / (n - 2)) and the residual sum of squares."""

    slope: np.ndarray
    intercept: np.ndarray
    resid_var: np.ndarray
    rss: np.ndarray


def _affine_least_squares(moments: RaterMoments) -> AffineFit:
    """Least-squares line of s on r for each row of the moments; rows with sxx = 0 get slope 0."""
    ok = ~moments.single_model_score
    slope = np.where(ok, moments.sxy / np.where(ok, moments.sxx, 1.0), 0.0)
    intercept = moments.mean_s - slope * moments.mean_r
    rss = np.maximum(moments.syy - slope * moments.sxy, 0.0)
    dof = np.maximum(moments.n - 2.0, 1.0)
    return AffineFit(slope, intercept, rss / dof, rss)


@dataclass(frozen=True)
class PerRaterOLS_:
    """Per-rater OLS in the coordinate where the intercept is the value at r = centre.

    theta: (J, 2) = (slope, intercept at centre); cov: (J, 2, 2) OLS sampling covariance V_j;
    resid_var: (J,) RSS_j / (n_j - 2); eligible: (J,) bool (n_j >= n_min and more than one model score).
    Rows that are not eligible hold NaN."""

    theta: np.ndarray
    cov: np.ndarray
    resid_var: np.ndarray
    eligible: np.ndarray


def _per_rater_ols(moments: RaterMoments, centre: float, n_min: int) -> PerRaterOLS_:
    """OLS (slope, intercept at `centre`) with sampling covariance per rater.

    With m_j = mean_r_j - centre and sigma_j^2 = RSS_j / (n_j - 2):
    Var(slope) = sigma^2 / Sxx, Var(intercept) = sigma^2 (1/n + m^2 / Sxx), Cov = -m sigma^2 / Sxx.
    sigma_j^2 is floored at VAR_FLOOR_FRACTION of the median rater's: a rater whose ratings are all equal
    (or exactly on a line) would otherwise get V_j = 0, full weight on its own fit and zero noise.
    """
    eligible = (moments.n >= n_min) & ~moments.single_model_score
    fit = _affine_least_squares(moments)
    sxx = np.where(eligible, moments.sxx, 1.0)
    n = np.where(eligible, moments.n, 1.0)
    m = moments.mean_r - centre
    s2 = fit.resid_var
    if eligible.any():
        s2 = np.maximum(s2, VAR_FLOOR_FRACTION * float(np.median(s2[eligible])))
    cov = np.empty((len(n), 2, 2))
    cov[:, 0, 0] = s2 / sxx
    cov[:, 1, 1] = s2 * (1.0 / n + m * m / sxx)
    cov[:, 0, 1] = cov[:, 1, 0] = -m * s2 / sxx
    theta = np.stack([fit.slope, fit.intercept + fit.slope * centre], axis=1)
    theta[~eligible] = np.nan
    cov[~eligible] = np.nan
    return PerRaterOLS_(theta, cov, np.where(eligible, s2, np.nan), eligible)


@dataclass(frozen=True)
class Shrinkage:
    """Empirical-Bayes shrinkage of per-rater (slope, intercept) estimates, arrays over J raters.

    theta: (J, 2) shrunk estimates (population values where the rater is not eligible).
    weight: (J, 2) weight on the rater's own OLS estimate (diagonal of W_j; 0 for sparse raters).
    risk: (J, 2, 2) Bayes risk of the shrunk estimate, W V W' + (I - W) T (I - W)' (T for sparse raters).
    population: (2,) population (mean) values. tau2: (2, 2) between-rater covariance used (clipped).
    tau2_raw: (2, 2) the method-of-moments estimate before clipping. clipped: (2,) bool, the variance of
    that parameter was clipped at 0 (joint: an eigenvalue clipped and the diagonal entry reduced).
    """

    theta: np.ndarray
    weight: np.ndarray
    risk: np.ndarray
    population: np.ndarray
    tau2: np.ndarray
    tau2_raw: np.ndarray
    clipped: np.ndarray


def _moment_tau2(theta: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Population mean (2,) and method-of-moments between-rater covariance (2, 2), not yet clipped:
    Cov_j(theta_j) - mean_j(V_j) over the eligible raters given (K, 2) and (K, 2, 2)."""
    mean = theta.mean(axis=0)
    spread = np.cov(theta, rowvar=False, ddof=1) if len(theta) > 1 else np.zeros((2, 2))
    return mean, spread - cov.mean(axis=0)


def _shrink(
    theta: np.ndarray, cov: np.ndarray, eligible: np.ndarray, joint: bool, fallback_population: np.ndarray
) -> Shrinkage:
    """Morris / James-Stein shrinkage of per-rater OLS estimates (METHODS.md 3, steps 2-3).

    theta (J, 2), cov (J, 2, 2): OLS estimates and sampling covariances (NaN where not eligible).
    Independent (joint=False): tau_k^2 = max(0, Var_j(theta_jk) - mean_j(V_jkk)) and
        w_jk = tau_k^2 / (tau_k^2 + V_jkk), theta_shrunk = w theta_OLS + (1 - w) theta_pop, per parameter.
    Joint (joint=True): T = the moment covariance with negative eigenvalues clipped at 0 and
        theta_shrunk = theta_pop + T (T + V_j)^-1 (theta_OLS - theta_pop), the normal posterior mean.
    Raters that are not eligible get theta_pop. With fewer than two eligible raters tau^2 = 0 and the
    population is `fallback_population` (2,).
    """
    n_raters = len(theta)
    elig_theta, elig_cov = theta[eligible], cov[eligible]
    if len(elig_theta) >= 2:
        population, tau2_raw = _moment_tau2(elig_theta, elig_cov)
    else:
        population, tau2_raw = np.asarray(fallback_population, float), np.zeros((2, 2))
    if joint:
        values, vectors = np.linalg.eigh((tau2_raw + tau2_raw.T) / 2)
        tau2 = (vectors * np.maximum(values, 0.0)) @ vectors.T
        # An eigenvalue clipped at 0 constrains both parameters: flag both.
        clipped = (np.diag(tau2_raw) <= 0) | bool(values.min() < 0)
    else:
        diag = np.maximum(np.diag(tau2_raw), 0.0)
        tau2 = np.diag(diag)
        clipped = np.diag(tau2_raw) <= 0
    eye = np.eye(2)
    weight_matrix = np.zeros((n_raters, 2, 2))
    if joint:
        total = tau2[None] + np.where(eligible[:, None, None], cov, 0.0)
        weight_matrix[eligible] = tau2[None] @ np.linalg.pinv(total[eligible])
    else:
        variances = np.diagonal(cov[eligible], axis1=1, axis2=2)
        tau_diag = np.diag(tau2)[None]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(tau_diag > 0, tau_diag / (tau_diag + variances), 0.0)
        weight_matrix[eligible, 0, 0] = w[:, 0]
        weight_matrix[eligible, 1, 1] = w[:, 1]
    deviation = np.where(eligible[:, None], theta - population[None], 0.0)
    shrunk = population[None] + np.einsum("jkl,jl->jk", weight_matrix, deviation)
    keep = eye[None] - weight_matrix
    own = np.where(eligible[:, None, None], cov, 0.0)
    risk = weight_matrix @ own @ weight_matrix.transpose(0, 2, 1) + keep @ tau2[None] @ keep.transpose(0, 2, 1)
    weight = np.diagonal(weight_matrix, axis1=1, axis2=2).copy()
    return Shrinkage(shrunk, weight, risk, population, tau2, tau2_raw, clipped)


def _moderated_variances(resid_var: np.ndarray, dof: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Empirical-Bayes moderation of per-rater residual variances (Smyth 2004, limma, section 6.2).

    resid_var, dof: (K,) sample variances s_j^2 and their degrees of freedom d_j.
    Returns (posterior variances (K,), prior variance s0^2, prior dof d0); the posterior is
    (d0 s0^2 + d_j s_j^2) / (d0 + d_j). d0 = inf (all variances equal s0^2) when the spread of
    log s_j^2 is no more than sampling noise.
    """
    if len(resid_var) == 0:
        return resid_var.copy(), float("nan"), float("inf")
    floor = 1e-8 * max(float(np.mean(resid_var)), np.finfo(float).tiny)
    s2 = np.maximum(resid_var, floor)
    half = dof / 2.0
    e = np.log(s2) - special.digamma(half) + np.log(half)
    e_mean = float(e.mean())
    e_var = float(e.var(ddof=1)) - float(special.polygamma(1, half).mean()) if len(e) > 1 else 0.0
    if e_var <= 0:
        prior_var = float(np.exp(e_mean))
        return np.full_like(s2, prior_var), prior_var, float("inf")
    prior_dof = 2.0 * _trigamma_inverse(e_var)
    prior_var = float(np.exp(e_mean + special.digamma(prior_dof / 2) - np.log(prior_dof / 2)))
    return (prior_dof * prior_var + dof * s2) / (prior_dof + dof), prior_var, prior_dof


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method as in limma's trigammaInverse)."""
    if x > 1e7:
        return 1.0 / np.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def _fit_status(eligible: np.ndarray, moments: RaterMoments) -> np.ndarray:
    """Status code per rater (J,): STATUS_FITTED where its own fit is used, else why it is not."""
    return np.where(
        eligible, STATUS_FITTED, np.where(moments.single_model_score, STATUS_SINGLE_MODEL_SCORE, STATUS_SPARSE)
    )


def _to_origin(theta: np.ndarray, risk: np.ndarray, centre: float) -> tuple[np.ndarray, ...]:
    """(slope, intercept at centre) with covariance -> (slope, intercept at 0, var_slope, var_int, cov).

    theta (J, 2), risk (J, 2, 2). intercept_0 = intercept_c - slope * centre.
    """
    slope, b_c = theta[:, 0], theta[:, 1]
    va, vb, cab = risk[:, 0, 0], risk[:, 1, 1], risk[:, 0, 1]
    return (slope, b_c - slope * centre, va, vb - 2 * centre * cab + centre**2 * va, cab - centre * va)


# ----------------------------------------------------------------------------------------------
# Estimators


class AffineCalibrator(BaseEstimator):
    """Shared interface: fit(ratings) -> self, predict / predict_var, maps_ (CalibrationMaps)."""

    name: ClassVar[str] = "affine"
    needs_rows: ClassVar[bool] = False
    group_columns_needed: ClassVar[tuple[str, ...]] = ()

    def fit(self, ratings: Ratings) -> AffineCalibrator:
        """Fits the per-rater maps; `ratings` is a RatingTable, a long DataFrame or RaterStats."""
        stats = ratings if isinstance(ratings, RaterStats) else rater_stats(ratings, self._group_columns())
        if stats.n_ratings < 3:
            raise DataError(f"{self.name}: at least 3 ratings are needed to fit, got {stats.n_ratings}")
        self.maps_ = self._fit_stats(stats)
        self.n_raters_ = stats.n_raters
        return self

    def _group_columns(self) -> tuple[str, ...]:
        return ()

    def _fit_stats(self, stats: RaterStats) -> CalibrationMaps:
        raise NotImplementedError

    def _maps(
        self,
        stats: RaterStats,
        slope: np.ndarray,
        intercept: np.ndarray,
        noise: np.ndarray,
        population: tuple[float, float, float],
        param_var: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        diagnostics: dict[str, np.ndarray] | None = None,
        info: dict[str, Any] | None = None,
    ) -> CalibrationMaps:
        """CalibrationMaps of this estimator for the raters of `stats`.

        slope, intercept, noise: (J,) per-rater maps; population: (slope, intercept, noise variance) for
        unseen raters; param_var: (var_slope, var_intercept, cov_slope_intercept), each (J,), or None
        where the method does not model parameter uncertainty (zeros).
        """
        var_slope, var_intercept, cov = param_var if param_var is not None else (None, None, None)
        return CalibrationMaps(
            self.name,
            stats.rater_ids,
            slope,
            intercept,
            noise,
            stats.n.copy(),
            *population,
            var_slope,
            var_intercept,
            cov,
            params=self.get_params(),
            diagnostics=diagnostics or {},
            info=info or {},
        )

    def predict(
        self,
        rater_ids: Sequence[str] | np.ndarray,
        model_scores: np.ndarray,
        unknown: UnknownRater = "population",
    ) -> np.ndarray:
        """Calibrated scores (N,) for raters (N,) at model scores (N,); unseen raters: the population map."""
        check_is_fitted(self, "maps_")
        return self.maps_.predict(rater_ids, model_scores, unknown)

    def predict_var(self, rater_ids: Sequence[str] | np.ndarray, model_scores: np.ndarray) -> np.ndarray:
        """Predictive variance (N,) of each calibrated score (for the Gaussian NLL)."""
        check_is_fitted(self, "maps_")
        return self.maps_.predict_var(rater_ids, model_scores)


def _pooled(stats: RaterStats) -> tuple[float, float, float]:
    """(slope, intercept, residual variance) of one least-squares line through all ratings."""
    fit = _affine_least_squares(rater_moments(stats.total()))
    return float(fit.slope[0]), float(fit.intercept[0]), float(fit.resid_var[0])


class PooledAffine(AffineCalibrator):
    """One population affine map for every rater (the baseline every gain is measured against)."""

    name = "pooled"

    def _fit_stats(self, stats: RaterStats) -> CalibrationMaps:
        slope, intercept, noise = _pooled(stats)
        j = stats.n_raters
        return self._maps(stats, np.full(j, slope), np.full(j, intercept), np.full(j, noise), (slope, intercept, noise))


class GroupAffine(AffineCalibrator):
    """One affine map per demographic group (raters grouped by `group_column`).

    group_column: the demographic column; min_group_ratings: groups with fewer ratings (or one model
    score) use the population map.
    """

    name = "group"

    def __init__(self, group_column: str | None = None, min_group_ratings: int = 10):
        self.group_column = group_column
        self.min_group_ratings = min_group_ratings

    def _group_columns(self) -> tuple[str, ...]:
        if not self.group_column:
            raise ConfigError("GroupAffine needs group_column (a demographic column of the ratings table)")
        return (self.group_column,)

    def _fit_stats(self, stats: RaterStats) -> CalibrationMaps:
        column = self._group_columns()[0]
        if column not in stats.groups:
            raise DataError(
                f"group column {column!r} not in the rater statistics; known: {', '.join(stats.groups) or '(none)'}"
            )
        labels = stats.groups[column]
        pop_slope, pop_intercept, pop_noise = _pooled(stats)
        j = stats.n_raters
        slope, intercept, noise = np.full(j, pop_slope), np.full(j, pop_intercept), np.full(j, pop_noise)
        group_fits: dict[str, Any] = {}
        for group in np.unique(labels):
            mask = labels == group
            sub = stats.select(mask)
            moments = rater_moments(sub.total())
            if sub.n_ratings < self.min_group_ratings or bool(moments.single_model_score[0]):
                group_fits[str(group)] = None
                continue
            fit = _affine_least_squares(moments)
            slope[mask], intercept[mask], noise[mask] = fit.slope[0], fit.intercept[0], fit.resid_var[0]
            group_fits[str(group)] = {
                "slope": float(fit.slope[0]),
                "intercept": float(fit.intercept[0]),
                "raters": int(mask.sum()),
            }
        return self._maps(
            stats,
            slope,
            intercept,
            noise,
            (pop_slope, pop_intercept, pop_noise),
            diagnostics={"group": labels},
            info={"groups": group_fits},
        )


class PerRaterOLS(AffineCalibrator):
    """Each rater's own least-squares map (no pooling); raters with fewer than `min_ratings` ratings or one
    distinct model score get the population map."""

    name = "ols"

    def __init__(self, min_ratings: int = 3):
        self.min_ratings = min_ratings

    def _fit_stats(self, stats: RaterStats) -> CalibrationMaps:
        if self.min_ratings < 3:
            raise ConfigError(
                f"min_ratings must be at least 3 (a residual variance needs n > 2), got {self.min_ratings}"
            )
        moments = rater_moments(stats)
        ols = _per_rater_ols(moments, 0.0, self.min_ratings)
        pop_slope, pop_intercept, pop_noise = _pooled(stats)
        ok = ols.eligible
        slope = np.where(ok, ols.theta[:, 0], pop_slope)
        intercept = np.where(ok, ols.theta[:, 1], pop_intercept)
        noise = np.where(ok, np.nan_to_num(ols.resid_var, nan=pop_noise), pop_noise)
        cov = np.where(ok[:, None, None], ols.cov, 0.0)
        status = _fit_status(ok, moments)
        return self._maps(
            stats,
            slope,
            intercept,
            noise,
            (pop_slope, pop_intercept, pop_noise),
            (cov[:, 0, 0], cov[:, 1, 1], cov[:, 0, 1]),
            diagnostics={"status": status},
            info={
                "n_fitted": int(ok.sum()),
                "n_population": int((~ok).sum()),
                "n_single_model_score": int(moments.single_model_score.sum()),
            },
        )


class PEBS(AffineCalibrator):
    """Per-rater empirical-Bayes shrinkage calibration (METHODS.md section 3).

    n_min: raters with at least this many ratings (and more than one distinct model score) get an OLS
        fit that is shrunk; the others get the population values.
    centre: fit with the intercept at the pooled mean model score instead of at r = 0. The uncentred
        slope and intercept are strongly correlated, so shrinking them separately moves each rater's map
        where the data are; centring makes the two nearly uncorrelated.
    joint: shrink (slope, intercept) jointly with their 2x2 between-rater covariance (matrix weights).
    slope_guard: what to do with a non-positive shrunk slope (its map would reverse the ranking):
        "report" keeps it and lists the rater in maps_.info["nonpositive_slope_raters"]; "population"
        replaces that rater's map by the population map.
    moderate_noise: per-rater residual variances (for the predictive variance) moderated by
        empirical Bayes (limma); otherwise the raw RSS / (n - 2).

    The default (joint=True, in centred coordinates) is the variant kept after the evaluation in
    docs/calibration.md: never worse than the separately shrunk variants on PluriHarms and DICES-350 and
    clearly better when raters' model scores have different means (then centring at the pooled mean
    does not remove the correlation). centre=False, joint=False is the form in METHODS.md.
    """

    name = "pebs"

    def __init__(
        self,
        n_min: int = 6,
        centre: bool = True,
        joint: bool = True,
        slope_guard: SlopeGuard = "report",
        moderate_noise: bool = True,
    ):
        self.n_min = n_min
        self.centre = centre
        self.joint = joint
        self.slope_guard = slope_guard
        self.moderate_noise = moderate_noise

    def _fit_stats(self, stats: RaterStats) -> CalibrationMaps:
        if self.n_min < 3:
            raise ConfigError(f"n_min must be at least 3 (OLS variances need n > 2), got {self.n_min}")
        if self.slope_guard not in ("report", "population"):
            raise ConfigError(f"slope_guard must be 'report' or 'population', got {self.slope_guard!r}")
        moments = rater_moments(stats)
        centre = float(stats.r_shift) if self.centre else 0.0  # r_shift is the pooled mean model score
        ols = _per_rater_ols(moments, centre, self.n_min)
        pop_slope, pop_intercept, pop_noise = _pooled(stats)
        shrink = _shrink(
            ols.theta,
            ols.cov,
            ols.eligible,
            self.joint,
            np.array([pop_slope, pop_intercept + pop_slope * centre]),
        )
        slope, intercept, var_a, var_b, cov_ab = _to_origin(shrink.theta, shrink.risk, centre)
        population_slope = float(shrink.population[0])
        population_intercept = float(shrink.population[1] - shrink.population[0] * centre)

        status = _fit_status(ols.eligible, moments)
        nonpositive = slope * np.sign(population_slope or 1.0) <= NONPOSITIVE_SLOPE_TOL * abs(population_slope)
        if self.slope_guard == "population" and nonpositive.any():
            slope = np.where(nonpositive, population_slope, slope)
            intercept = np.where(nonpositive, population_intercept, intercept)
            status = np.where(nonpositive, STATUS_GUARDED, status)

        # Residual variance per rater: from its own OLS fit, moderated; the prior for the others.
        eligible = ols.eligible
        dof = moments.n[eligible] - 2.0
        if self.moderate_noise and eligible.sum() >= 2:
            post, prior_var, prior_dof = _moderated_variances(ols.resid_var[eligible], dof)
        else:
            post = np.maximum(ols.resid_var[eligible], 1e-6 * pop_noise)
            prior_var, prior_dof = (float(np.mean(post)) if len(post) else pop_noise), 0.0
        noise = np.full(stats.n_raters, prior_var)
        noise[eligible] = post
        # An unseen rater at the pooled mean model score: noise plus the intercept spread there.
        population_noise = (
            prior_var + float(shrink.tau2[1, 1])
            if self.centre
            else prior_var
            + float(shrink.tau2[1, 1] + 2 * stats.r_shift * shrink.tau2[0, 1] + stats.r_shift**2 * shrink.tau2[0, 0])
        )

        ols_slope = ols.theta[:, 0]
        ols_intercept = ols.theta[:, 1] - ols.theta[:, 0] * centre
        info = {
            "centre": centre,
            "joint": bool(self.joint),
            "tau2_slope": float(shrink.tau2[0, 0]),
            "tau2_intercept": float(shrink.tau2[1, 1]),
            "tau2_cov": float(shrink.tau2[0, 1]),
            "tau2_raw_slope": float(shrink.tau2_raw[0, 0]),
            "tau2_raw_intercept": float(shrink.tau2_raw[1, 1]),
            "tau2_clipped_slope": bool(shrink.clipped[0]),
            "tau2_clipped_intercept": bool(shrink.clipped[1]),
            "population_slope": population_slope,
            "population_intercept_at_centre": float(shrink.population[1]),
            "n_shrunk": int(eligible.sum()),
            "n_sparse": int((status == STATUS_SPARSE).sum()),
            "n_single_model_score": int(moments.single_model_score.sum()),
            "nonpositive_slope_raters": [str(r) for r in stats.rater_ids[nonpositive]],
            "noise_prior_var": prior_var,
            "noise_prior_dof": prior_dof,
        }
        if info["tau2_clipped_slope"] or info["tau2_clipped_intercept"]:
            clipped = [k for k in ("slope", "intercept") if info[f"tau2_clipped_{k}"]]
            warnings.warn(
                f"PEBS: between-rater variance of the {' and '.join(clipped)} clipped at 0 "
                "(every rater gets the population value for it)",
                RuntimeWarning,
                stacklevel=3,
            )
        if nonpositive.any():
            warnings.warn(
                f"PEBS: {int(nonpositive.sum())} rater(s) with a non-positive shrunk slope "
                f"({'replaced by the population map' if self.slope_guard == 'population' else 'kept'})",
                RuntimeWarning,
                stacklevel=3,
            )
        return self._maps(
            stats,
            slope,
            intercept,
            noise,
            (population_slope, population_intercept, population_noise),
            (var_a, var_b, cov_ab),
            diagnostics={
                "status": status,
                "ols_slope": ols_slope,
                "ols_intercept": ols_intercept,
                "weight_slope": shrink.weight[:, 0],
                "weight_intercept": shrink.weight[:, 1],
            },
            info=info,
        )


def _offset_shrinkage(
    moments: RaterMoments, slope: float, n_min: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, float, bool]:
    """Per-rater intercepts under one shared slope, shrunk by Morris / James-Stein weights (pure).

    With the slope fixed, rater j's least-squares intercept is b_j = mean_s_j - slope * mean_r_j, its residual
    variance sigma_j^2 = (syy - 2 slope sxy + slope^2 sxx) / (n_j - 1) (floored at VAR_FLOOR_FRACTION of the
    median rater's) and its sampling variance V_j = sigma_j^2 / n_j. Raters with n_j >= n_min are eligible;
    tau^2 = max(0, Var_j(b_j) - mean_j(V_j)) over them, w_j = tau^2 / (tau^2 + V_j) and the shrunk intercept
    w_j b_j + (1 - w_j) b_pop (b_pop the mean of the eligible b_j); other raters get b_pop.
    Returns (intercept (J,), weight (J,), risk (J,) = w^2 V + (1 - w)^2 tau^2, sigma^2 (J,, NaN where not
    eligible), b_pop, tau^2, clipped).
    """
    n = moments.n.astype(np.float64)
    eligible = n >= n_min
    b = moments.mean_s - slope * moments.mean_r
    rss = np.maximum(moments.syy - 2.0 * slope * moments.sxy + slope**2 * moments.sxx, 0.0)
    s2 = rss / np.maximum(n - 1.0, 1.0)
    if eligible.any():
        s2 = np.maximum(s2, VAR_FLOOR_FRACTION * float(np.median(s2[eligible])))
    v = s2 / np.maximum(n, 1.0)
    if eligible.sum() >= 2:
        population = float(b[eligible].mean())
        tau2_raw = float(np.var(b[eligible], ddof=1) - v[eligible].mean())
    else:
        population, tau2_raw = float(b[eligible].mean()) if eligible.any() else 0.0, 0.0
    tau2 = max(tau2_raw, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(eligible & (tau2 > 0), tau2 / (tau2 + v), 0.0)
    intercept = np.where(eligible, w * b + (1.0 - w) * population, population)
    risk = np.where(eligible, w**2 * v + (1.0 - w) ** 2 * tau2, tau2)
    return intercept, w, risk, np.where(eligible, s2, np.nan), population, tau2, tau2_raw <= 0


class OffsetShrinkage(AffineCalibrator):
    """The offset-only baseline: the pooled slope for every rater and a per-rater intercept shrunk as PEBS shrinks
    its parameters (Morris / James-Stein weights from the method of moments). It asks how much of PEBS's gain a
    per-rater offset alone gives.

    n_min: raters with at least this many ratings get their own (shrunk) intercept; the others the population's.
    """

    name = "offset"

    def __init__(self, n_min: int = 6):
        self.n_min = n_min

    def _fit_stats(self, stats: RaterStats) -> CalibrationMaps:
        if self.n_min < 2:
            raise ConfigError(f"n_min must be at least 2 (a residual variance needs n > 1), got {self.n_min}")
        moments = rater_moments(stats)
        pop_slope, _, pop_noise = _pooled(stats)
        intercept, weight, risk, s2, population, tau2, clipped = _offset_shrinkage(moments, pop_slope, self.n_min)
        eligible = np.isfinite(s2)
        if eligible.sum() >= 2:
            post, prior_var, _ = _moderated_variances(s2[eligible], moments.n[eligible] - 1.0)
        else:
            post, prior_var = s2[eligible], pop_noise
        noise = np.full(stats.n_raters, prior_var)
        noise[eligible] = post
        j = stats.n_raters
        return self._maps(
            stats,
            np.full(j, pop_slope),
            intercept,
            noise,
            (pop_slope, population, prior_var + tau2),
            (np.zeros(j), risk, np.zeros(j)),
            diagnostics={"status": np.where(eligible, STATUS_FITTED, STATUS_SPARSE), "weight_intercept": weight},
            info={
                "tau2_intercept": tau2,
                "tau2_clipped_intercept": bool(clipped),
                "population_slope": pop_slope,
                "n_shrunk": int(eligible.sum()),
            },
        )


class MixedLMCalibrator(AffineCalibrator):
    """Random intercept and slope by rater (statsmodels MixedLM, REML): the classical baseline.

    Maps are the fixed effects plus each rater's predicted random effects (BLUPs); the model score is
    centred at its mean for the optimiser and the maps converted back. Needs the raw ratings.
    """

    name = "mixedlm"
    needs_rows = True

    def __init__(self, reml: bool = True, max_iter: int = 200):
        self.reml = reml
        self.max_iter = max_iter

    def fit(self, ratings: Ratings) -> MixedLMCalibrator:
        if isinstance(ratings, RaterStats):
            raise ConfigError("MixedLM fits from the ratings themselves, not from sufficient statistics")
        from statsmodels.regression.mixed_linear_model import MixedLM

        frame = ratings if isinstance(ratings, pd.DataFrame) else ratings.frame
        r = frame["model_score"].to_numpy(np.float64)
        s = frame["score"].to_numpy(np.float64)
        centre = float(r.mean())
        design = np.column_stack([np.ones_like(r), r - centre])
        groups = frame["rater_id"].astype(str).to_numpy()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = MixedLM(s, design, groups, exog_re=design)
            result = model.fit(reml=self.reml, method=["lbfgs"], maxiter=self.max_iter)
        fixed = np.asarray(result.fe_params, dtype=np.float64)
        ids = np.array(sorted(set(groups.tolist())))
        effects = np.array([np.asarray(result.random_effects[g], dtype=np.float64) for g in ids])
        cond_cov = np.array([np.asarray(result.random_effects_cov[g], dtype=np.float64) for g in ids])
        theta = np.column_stack([fixed[1] + effects[:, 1], fixed[0] + effects[:, 0]])  # (slope, int. at centre)
        risk = cond_cov[:, ::-1, ::-1]  # statsmodels order is (intercept, slope)
        slope, intercept, var_a, var_b, cov_ab = _to_origin(theta, risk, centre)
        n = pd.Series(groups).value_counts().reindex(ids).to_numpy(np.float64)
        noise = float(result.scale)
        re_cov = np.asarray(result.cov_re, dtype=np.float64)
        self.maps_ = CalibrationMaps(
            self.name,
            ids,
            slope,
            intercept,
            np.full(len(ids), noise),
            n,
            float(fixed[1]),
            float(fixed[0] - fixed[1] * centre),
            noise + float(re_cov[0, 0]),
            var_a,
            var_b,
            cov_ab,
            params=self.get_params(),
            info={
                "converged": bool(result.converged),
                "re_cov": re_cov.tolist(),
                "centre": centre,
                "warnings": sorted({str(w.message)[:120] for w in caught}),
            },
        )
        self.n_raters_ = len(ids)
        return self


# ----------------------------------------------------------------------------------------------
# Registry: the names configs and the command line use


CALIBRATORS: Registry[Callable[..., AffineCalibrator]] = Registry("calibrator")
CALIBRATORS.add("pooled", PooledAffine)
CALIBRATORS.add("group", GroupAffine)
CALIBRATORS.add("ols", PerRaterOLS)
CALIBRATORS.add("pebs", PEBS)
CALIBRATORS.add("pebs-uncentred", partial(PEBS, centre=False, joint=False))
CALIBRATORS.add("pebs-centred", partial(PEBS, centre=True, joint=False))
CALIBRATORS.add("pebs-joint", partial(PEBS, centre=True, joint=True))  # = the default "pebs"
CALIBRATORS.add("offset", OffsetShrinkage)
CALIBRATORS.add("mixedlm", MixedLMCalibrator)


def create_calibrator(name: str, **params: Any) -> AffineCalibrator:
    """The registered calibrator `name` with `params` set; a parameter it does not have is a ConfigError
    (use shared_params to pass settings that apply to some calibrators only)."""
    estimator = CALIBRATORS.get(name)()
    known = estimator.get_params()
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ConfigError(f"calibrator {name!r} has no parameter {unknown[0]!r} (has: {', '.join(sorted(known))})")
    return estimator.set_params(**{k: v for k, v in params.items() if v is not None})


def shared_params(name: str, **settings: Any) -> dict[str, Any]:
    """The run-wide settings (n_min, group_column, ...) that calibrator `name` takes; the others do not apply
    to it (the pooled map has no n_min)."""
    known = CALIBRATORS.get(name)().get_params()
    return {k: v for k, v in settings.items() if k in known}
