"""The pure math of per-rater affine calibration (METHODS.md section 3), over per-rater sufficient statistics
(stats.py): least-squares fits per rater, the method-of-moments prior and the shrinkage of each rater's
parameters towards it (PEBS), moderated residual variances, and the offset-only shrinkage under one shared slope.
Functions of arrays returning arrays; the estimators (estimators.py) only store parameters, call these and keep
the learned state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from rewardsmith.calibrate.stats import RaterMoments

# Floor of a rater's residual variance, as a fraction of the median rater's (see _per_rater_ols).
VAR_FLOOR_FRACTION = 0.01
# A shrunk slope at or below this fraction of the population slope, in the population slope's direction, counts as
# non-positive (a slope of 1e-16 is zero up to rounding and ties every prediction). The direction matters when the
# model score falls as the ratings rise (a harmlessness reward against harm ratings): every slope is then negative,
# and a map reverses the population's ranking when its slope is positive.
NONPOSITIVE_SLOPE_TOL = 1e-9

# status codes stored per rater in maps_.diagnostics["status"]
STATUS_FITTED, STATUS_SPARSE, STATUS_SINGLE_MODEL_SCORE, STATUS_GUARDED = 0, 1, 2, 3


@dataclass(frozen=True)
class AffineFit:
    """One affine least-squares fit per row (arrays (K,)): slope, intercept at r = 0, residual variance
    (dof-corrected: RSS / (n - 2)) and the residual sum of squares."""

    slope: np.ndarray
    intercept: np.ndarray
    resid_var: np.ndarray
    rss: np.ndarray


def affine_least_squares(moments: RaterMoments) -> AffineFit:
    """Least-squares line of s on r for each row of the moments; rows with sxx = 0 get slope 0."""
    ok = ~moments.single_model_score
    slope = np.where(ok, moments.sxy / np.where(ok, moments.sxx, 1.0), 0.0)
    intercept = moments.mean_s - slope * moments.mean_r
    rss = np.maximum(moments.syy - slope * moments.sxy, 0.0)
    dof = np.maximum(moments.n - 2.0, 1.0)
    return AffineFit(slope, intercept, rss / dof, rss)


@dataclass(frozen=True)
class OLSFits:
    """Per-rater OLS in the coordinate where the intercept is the value at r = centre.

    theta: (J, 2) = (slope, intercept at centre); cov: (J, 2, 2) OLS sampling covariance V_j;
    resid_var: (J,) RSS_j / (n_j - 2); eligible: (J,) bool (n_j >= n_min and more than one model score).
    Rows that are not eligible hold NaN."""

    theta: np.ndarray
    cov: np.ndarray
    resid_var: np.ndarray
    eligible: np.ndarray


def per_rater_ols(moments: RaterMoments, centre: float, n_min: int) -> OLSFits:
    """OLS (slope, intercept at `centre`) with sampling covariance per rater.

    With m_j = mean_r_j - centre and sigma_j^2 = RSS_j / (n_j - 2):
    Var(slope) = sigma^2 / Sxx, Var(intercept) = sigma^2 (1/n + m^2 / Sxx), Cov = -m sigma^2 / Sxx.
    sigma_j^2 is floored at VAR_FLOOR_FRACTION of the median rater's: a rater whose ratings are all equal
    (or exactly on a line) would otherwise get V_j = 0, full weight on its own fit and zero noise.
    """
    eligible = (moments.n >= n_min) & ~moments.single_model_score
    fit = affine_least_squares(moments)
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
    return OLSFits(theta, cov, np.where(eligible, s2, np.nan), eligible)


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


def moment_tau2(theta: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Population mean (2,) and method-of-moments between-rater covariance (2, 2), not yet clipped:
    Cov_j(theta_j) - mean_j(V_j) over the eligible raters given (K, 2) and (K, 2, 2)."""
    mean = theta.mean(axis=0)
    spread = np.cov(theta, rowvar=False, ddof=1) if len(theta) > 1 else np.zeros((2, 2))
    return mean, spread - cov.mean(axis=0)


def shrink(
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
        population, tau2_raw = moment_tau2(elig_theta, elig_cov)
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


def moderated_variances(resid_var: np.ndarray, dof: np.ndarray) -> tuple[np.ndarray, float, float]:
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
    prior_dof = 2.0 * trigamma_inverse(e_var)
    prior_var = float(np.exp(e_mean + special.digamma(prior_dof / 2) - np.log(prior_dof / 2)))
    return (prior_dof * prior_var + dof * s2) / (prior_dof + dof), prior_var, prior_dof


def trigamma_inverse(x: float) -> float:
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


def fit_status(eligible: np.ndarray, moments: RaterMoments) -> np.ndarray:
    """Status code per rater (J,): STATUS_FITTED where its own fit is used, else why it is not."""
    return np.where(
        eligible, STATUS_FITTED, np.where(moments.single_model_score, STATUS_SINGLE_MODEL_SCORE, STATUS_SPARSE)
    )


def to_origin(theta: np.ndarray, risk: np.ndarray, centre: float) -> tuple[np.ndarray, ...]:
    """(slope, intercept at centre) with covariance -> (slope, intercept at 0, var_slope, var_int, cov).

    theta (J, 2), risk (J, 2, 2). intercept_0 = intercept_c - slope * centre.
    """
    slope, b_c = theta[:, 0], theta[:, 1]
    va, vb, cab = risk[:, 0, 0], risk[:, 1, 1], risk[:, 0, 1]
    return (slope, b_c - slope * centre, va, vb - 2 * centre * cab + centre**2 * va, cab - centre * va)


def offset_shrinkage(
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
