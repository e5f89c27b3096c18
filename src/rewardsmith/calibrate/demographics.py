"""How much of the raters' calibration differences a demographic column explains: the share of the between-rater
variance of each map parameter (slope; intercept at the pooled mean model score) that lies between the column's
groups. If demographics explained most of it, group maps could replace per-rater maps.

Per rater, OLS (slope, intercept at the centre) and its sampling variance V_j come from
rewardsmith.calibrate.shrinkage.per_rater_ols. The method of moments (METHODS.md section 3, step 2) gives the total
between-rater variance tau^2 = Var_j(theta_j) - mean_j V_j, and the within-group one pools the same estimate inside
each group (weighted by its raters - 1); the share is 1 - tau^2_within / tau^2_total. Groups of one rater carry no
within-group information and are left out of the within-group estimate (they still count in the total). The 95%
CI resamples raters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rewardsmith.calibrate.shrinkage import per_rater_ols
from rewardsmith.calibrate.stats import RaterStats, model_score_location
from rewardsmith.stats import bootstrap_indices, percentile_interval

PARAMETERS = ("slope", "intercept")


@dataclass(frozen=True)
class DemographicShare:
    """One column: the share of tau^2 between its groups per parameter (point and 95% CI), its groups and raters."""

    column: str
    groups: int
    raters: int
    share: dict[str, float]
    share_ci: dict[str, tuple[float, float]]
    tau2: dict[str, float]


def _moment(theta: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """Method-of-moments between-rater variance per parameter (unclipped), (2,)."""
    return np.var(theta, axis=0, ddof=1) - variances.mean(axis=0)


def _share(theta: np.ndarray, variances: np.ndarray, labels: np.ndarray) -> np.ndarray:
    total = _moment(theta, variances)
    within, weight = np.zeros(2), 0
    for g in np.unique(labels):
        members = labels == g
        k = int(members.sum())
        if k >= 2:
            within += (k - 1) * _moment(theta[members], variances[members])
            weight += k - 1
    if weight == 0:
        return np.full(2, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, 1.0 - (within / weight) / total, np.nan)


def demographic_shares(
    stats: RaterStats, n_min: int = 6, n_boot: int = 2000, seed: int = 0, confidence: float = 0.95
) -> list[DemographicShare]:
    """The share of each demographic column of `stats.groups` (see the module docstring)."""
    centre, _ = model_score_location(stats)
    fits = per_rater_ols(stats.moments(), centre, n_min)
    keep = fits.eligible
    theta = fits.theta[keep]
    variances = np.diagonal(fits.cov[keep], axis1=1, axis2=2)
    idx = bootstrap_indices(len(theta), n_boot, seed)
    out = []
    for column, all_labels in stats.groups.items():
        labels = np.asarray(all_labels)[keep]
        point = _share(theta, variances, labels)
        boot = np.array([_share(theta[i], variances[i], labels[i]) for i in idx])
        out.append(
            DemographicShare(
                column,
                len(np.unique(labels)),
                len(theta),
                {p: float(point[k]) for k, p in enumerate(PARAMETERS)},
                {p: percentile_interval(boot[:, k], confidence) for k, p in enumerate(PARAMETERS)},
                {p: float(v) for p, v in zip(PARAMETERS, _moment(theta, variances), strict=True)},
            )
        )
    return out
