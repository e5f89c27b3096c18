"""PEBS against the oracle that knows the true between-rater variance and the true population mean, by simulation
(the paper's oracle inequality, worded for the variance: the empirical-Bayes risk is within a factor 1 + c/J of the
oracle's).

Per replicate, J raters draw (slope, intercept) from the normal hierarchical model (rewardsmith.calibrate.synthetic),
10-39 ratings each with model scores r ~ N(0, 1) and unit noise; each rater's OLS fit and its sampling covariance
V_j come from rewardsmith.calibrate.shrinkage.per_rater_ols, exactly as the estimators fit them. Two shrinkage rules
then estimate every rater's (slope, intercept at 0):

- PEBS in the paper's form (rewardsmith.calibrate.shrinkage.shrink, independent per parameter): the population
  mean and tau^2 estimated by the method of moments from the J fits;
- the oracle: the same weights w_jk = tau_k^2 / (tau_k^2 + V_jkk) with the true population mean and tau_k^2.

The risk is the mean over raters of the squared parameter error summed over slope and intercept; the ratio is the
mean PEBS risk over the mean oracle risk across replicates, with a percentile CI from resampling replicates. Pure
numpy: no rating table is built (the per-rater moments are computed directly).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rewardsmith.calibrate.shrinkage import per_rater_ols, shrink
from rewardsmith.calibrate.stats import RaterMoments
from rewardsmith.calibrate.synthetic import simulate_parameters
from rewardsmith.stats import bootstrap_indices, percentile_interval

# The raters' prior: the same design as the variant study (experiments/calibration_variants.py).
PRIOR = {"slope": 1.0, "intercept": 0.0, "slope_sd": 0.4, "intercept_sd": 0.8, "correlation": 0.5, "noise_sd": 1.0}
COUNTS = (10, 40)  # ratings per rater, uniform on [10, 40)
N_MIN = 6


@dataclass(frozen=True)
class OracleRatio:
    """One J: PEBS's and the oracle's mean risk, their ratio with its CI, and J (ratio - 1)."""

    raters: int
    replicates: int
    pebs_risk: float
    oracle_risk: float
    ratio: float
    ratio_ci: tuple[float, float]

    @property
    def scaled_excess(self) -> float:
        """J (ratio - 1): flat in J when the excess risk falls as 1/J."""
        return self.raters * (self.ratio - 1.0)


def _moments(slope: np.ndarray, intercept: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> RaterMoments:
    codes = np.repeat(np.arange(len(counts)), counts)
    r = rng.standard_normal(len(codes))
    s = slope[codes] * r + intercept[codes] + PRIOR["noise_sd"] * rng.standard_normal(len(codes))
    n = counts.astype(float)
    mean_r = np.bincount(codes, r) / n
    mean_s = np.bincount(codes, s) / n
    dr, ds = r - mean_r[codes], s - mean_s[codes]
    sxx = np.bincount(codes, dr * dr)
    return RaterMoments(
        n, mean_r, mean_s, sxx, np.bincount(codes, dr * ds), np.bincount(codes, ds * ds), sxx <= 1e-12 * n
    )


def replicate_risks(raters: int, replicate: int, seed: int = 0) -> tuple[float, float]:
    """(PEBS risk, oracle risk) of one simulated panel of `raters` raters."""
    rng = np.random.default_rng([seed, raters, replicate])
    params = simulate_parameters(raters, seed=int(rng.integers(2**31)), **PRIOR)
    counts = rng.integers(*COUNTS, size=raters)
    fits = per_rater_ols(_moments(params.slope, params.intercept, counts, rng), centre=0.0, n_min=N_MIN)
    truth = np.stack([params.slope, params.intercept], axis=1)
    pebs = shrink(fits.theta, fits.cov, fits.eligible, joint=False, fallback_population=truth.mean(axis=0))
    tau2 = np.array([PRIOR["slope_sd"] ** 2, PRIOR["intercept_sd"] ** 2])
    variances = np.diagonal(fits.cov, axis1=1, axis2=2)
    weight = tau2[None] / (tau2[None] + variances)
    population = np.array([PRIOR["slope"], PRIOR["intercept"]])
    oracle = population[None] + weight * (fits.theta - population[None])
    keep = fits.eligible
    pebs_loss = ((pebs.theta[keep] - truth[keep]) ** 2).sum(axis=1).mean()
    oracle_loss = ((oracle[keep] - truth[keep]) ** 2).sum(axis=1).mean()
    return float(pebs_loss), float(oracle_loss)


def _ratios(raters: int, replicates: int, seed: int, n_boot: int) -> tuple[OracleRatio, np.ndarray]:
    risks = np.array([replicate_risks(raters, d, seed) for d in range(replicates)])
    idx = bootstrap_indices(replicates, n_boot, np.random.default_rng([seed, raters, 10**6]))
    boot = risks[idx, 0].mean(axis=1) / risks[idx, 1].mean(axis=1)
    pebs, oracle = risks.mean(axis=0)
    ratio = OracleRatio(raters, replicates, float(pebs), float(oracle), float(pebs / oracle), percentile_interval(boot))
    return ratio, boot


def oracle_ratio(raters: int, replicates: int, seed: int = 0, n_boot: int = 2000) -> OracleRatio:
    """PEBS's risk over the oracle's at `raters` raters, over `replicates` simulated panels."""
    return _ratios(raters, replicates, seed, n_boot)[0]


@dataclass(frozen=True)
class OracleStudy:
    """The ratio at every J of the grid, and the rate at which the excess risk falls: the slope of
    log(ratio - 1) on log J (the inequality's 1 + c/J gives -1), with its CI from resampling each J's replicates."""

    ratios: list[OracleRatio]
    rate: float
    rate_ci: tuple[float, float]


def _slope(log_j: np.ndarray, excess: np.ndarray) -> np.ndarray:
    """Least-squares slope of log(excess) on log J, per row of excess (rows with a non-positive excess: NaN)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(excess > 0, np.log(excess), np.nan)
    x = log_j - log_j.mean()
    return ((y - y.mean(axis=-1, keepdims=True)) * x).sum(axis=-1) / (x * x).sum()


def oracle_study(grid: Sequence[int], replicates: int, seed: int = 0, n_boot: int = 2000) -> OracleStudy:
    """oracle_ratio at every J of `grid` and the rate of the excess risk (see OracleStudy)."""
    pairs = [_ratios(j, replicates, seed, n_boot) for j in grid]
    ratios = [r for r, _ in pairs]
    log_j = np.log(np.asarray(grid, dtype=float))
    rate = _slope(log_j, np.array([r.ratio - 1.0 for r in ratios]))
    boot = _slope(log_j, np.stack([b - 1.0 for _, b in pairs], axis=1))
    return OracleStudy(ratios, float(rate), percentile_interval(boot))
