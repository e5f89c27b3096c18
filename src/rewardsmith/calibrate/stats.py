"""Per-rater sufficient statistics (n, sums of r, s, r^2, rs, s^2) in memory, with numpy; an SQL engine computes the
same out of core (DuckDB) or on a cluster (Spark): calibrate/engines.py.

Every affine calibrator fits from these six numbers per rater, so a table of any length reduces to a
(J, 6) array in one pass (a GROUP BY). Sums are taken of values shifted by their global means (r0, s0):
the centred sums avoid the cancellation that raw sums of squares suffer at scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rewardsmith.errors import DataError

if TYPE_CHECKING:
    from rewardsmith.data.ratings import RatingTable

# A rater's model scores count as "one distinct value" when their spread is below this fraction of
# the global spread (floating-point noise after shifting).
_SXX_RELATIVE_TOL = 1e-10


@dataclass(frozen=True)
class RaterStats:
    """Sufficient statistics per rater; arrays have shape (J,), one entry per rater in `rater_ids` order.

    sum_r, sum_s, sum_rr, sum_rs, sum_ss are sums of r - r_shift and s - s_shift.
    groups: demographic column -> (J,) label of each rater (its first rating's value).
    """

    rater_ids: np.ndarray
    n: np.ndarray
    sum_r: np.ndarray
    sum_s: np.ndarray
    sum_rr: np.ndarray
    sum_rs: np.ndarray
    sum_ss: np.ndarray
    r_shift: float = 0.0
    s_shift: float = 0.0
    groups: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_raters(self) -> int:
        return len(self.rater_ids)

    @property
    def n_ratings(self) -> int:
        return int(self.n.sum())

    def moments(self) -> RaterMoments:
        return rater_moments(self)

    def total(self) -> RaterStats:
        """All raters summed into one pseudo-rater (the pooled statistics)."""

        def one(values: np.ndarray) -> np.ndarray:
            return np.array([values.sum()])

        return RaterStats(
            np.array(["*"]),
            one(self.n),
            one(self.sum_r),
            one(self.sum_s),
            one(self.sum_rr),
            one(self.sum_rs),
            one(self.sum_ss),
            r_shift=self.r_shift,
            s_shift=self.s_shift,
        )

    def minus(self, part: RaterStats) -> RaterStats:
        """These statistics less those of a subset of the same ratings (same raters in the same order, same
        shifts), re-centred at the remaining ratings' pooled means: the fit part of a hold-out split is all
        ratings minus the held-out ones."""
        if not np.array_equal(self.rater_ids, part.rater_ids) or (self.r_shift, self.s_shift) != (
            part.r_shift,
            part.s_shift,
        ):
            raise ValueError("minus needs statistics of the same raters about the same shifts")
        rest = RaterStats(
            self.rater_ids,
            self.n - part.n,
            self.sum_r - part.sum_r,
            self.sum_s - part.sum_s,
            self.sum_rr - part.sum_rr,
            self.sum_rs - part.sum_rs,
            self.sum_ss - part.sum_ss,
            self.r_shift,
            self.s_shift,
            self.groups,
        )
        return rest.centred()

    def centred(self) -> RaterStats:
        """The same statistics as sums about their own pooled means (r_shift is then the pooled mean model
        score, the centre PEBS uses). With d = new shift - old shift, sum (x - d) = sum x - n d and
        sum (x - d_x)(y - d_y) = sum xy - d_x sum y - d_y sum x + n d_x d_y."""
        total = max(float(self.n.sum()), 1.0)
        dr, ds = float(self.sum_r.sum()) / total, float(self.sum_s.sum()) / total
        n = self.n
        return RaterStats(
            self.rater_ids,
            n,
            self.sum_r - n * dr,
            self.sum_s - n * ds,
            self.sum_rr - 2 * dr * self.sum_r + n * dr * dr,
            self.sum_rs - dr * self.sum_s - ds * self.sum_r + n * dr * ds,
            self.sum_ss - 2 * ds * self.sum_s + n * ds * ds,
            self.r_shift + dr,
            self.s_shift + ds,
            self.groups,
        )

    def select(self, mask: np.ndarray) -> RaterStats:
        """The raters where `mask` (J,) is true."""
        return RaterStats(
            self.rater_ids[mask],
            self.n[mask],
            self.sum_r[mask],
            self.sum_s[mask],
            self.sum_rr[mask],
            self.sum_rs[mask],
            self.sum_ss[mask],
            self.r_shift,
            self.s_shift,
            {k: v[mask] for k, v in self.groups.items()},
        )


@dataclass(frozen=True)
class RaterMoments:
    """Per-rater means and centred cross-products, all (J,): mean_r, mean_s are in original units;
    sxx = sum (r - mean_r)^2, sxy = sum (r - mean_r)(s - mean_s), syy = sum (s - mean_s)^2.
    single_model_score: (J,) bool, the rater's model scores have (numerically) one distinct value."""

    n: np.ndarray
    mean_r: np.ndarray
    mean_s: np.ndarray
    sxx: np.ndarray
    sxy: np.ndarray
    syy: np.ndarray
    single_model_score: np.ndarray


def model_score_location(stats: RaterStats) -> tuple[float, float]:
    """Mean and standard deviation of every rating's model score, from the per-rater sums (any engine)."""
    n = float(stats.n.sum())
    if n <= 0:
        return float("nan"), float("nan")
    mean_offset = float(stats.sum_r.sum()) / n
    var = max(float(stats.sum_rr.sum()) / n - mean_offset**2, 0.0)
    return stats.r_shift + mean_offset, var**0.5


def rater_moments(stats: RaterStats) -> RaterMoments:
    """Means and centred cross-products per rater from the shifted sums (pure)."""
    n = stats.n.astype(np.float64)
    safe_n = np.where(n > 0, n, 1.0)
    mr, ms = stats.sum_r / safe_n, stats.sum_s / safe_n
    sxx = np.maximum(stats.sum_rr - n * mr * mr, 0.0)
    sxy = stats.sum_rs - n * mr * ms
    syy = np.maximum(stats.sum_ss - n * ms * ms, 0.0)
    scale = max(float(stats.sum_rr.sum()) / max(float(n.sum()), 1.0), np.finfo(float).tiny)
    single = sxx <= _SXX_RELATIVE_TOL * scale * np.maximum(n, 1.0)
    return RaterMoments(n, mr + stats.r_shift, ms + stats.s_shift, sxx, sxy, syy, single)


def affine_sse(stats: RaterStats, slope: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """Per-rater sum of squared residuals sum_i (s_i - slope r_i - intercept)^2 of affine maps (J,)."""
    b = intercept + slope * stats.r_shift - stats.s_shift  # the map in shifted coordinates
    sse = (
        stats.sum_ss
        - 2 * slope * stats.sum_rs
        - 2 * b * stats.sum_s
        + slope**2 * stats.sum_rr
        + 2 * slope * b * stats.sum_r
        + stats.n * b**2
    )
    return np.maximum(sse, 0.0)


def stats_from_arrays(
    rater_codes: np.ndarray,
    model_score: np.ndarray,
    score: np.ndarray,
    rater_ids: np.ndarray | None = None,
    n_raters: int | None = None,
) -> RaterStats:
    """Sufficient statistics from integer rater codes (N,) in [0, J) and float arrays (N,).

    Two passes of np.bincount: O(N) time, O(J) memory beyond the inputs.
    """
    n_raters = int(rater_codes.max()) + 1 if n_raters is None else n_raters
    r0, s0 = float(np.mean(model_score)), float(np.mean(score))
    r = model_score - r0
    s = score - s0

    def total(weights: np.ndarray | None) -> np.ndarray:
        return np.bincount(rater_codes, weights=weights, minlength=n_raters).astype(np.float64)

    ids = np.arange(n_raters).astype(str) if rater_ids is None else np.asarray(rater_ids)
    return RaterStats(ids, total(None), total(r), total(s), total(r * r), total(r * s), total(s * s), r0, s0)


def rater_stats(ratings: RatingTable | pd.DataFrame, group_columns: Sequence[str] = ()) -> RaterStats:
    """Sufficient statistics of a ratings table in memory (numpy). Raters are sorted by id."""
    frame = ratings if isinstance(ratings, pd.DataFrame) else ratings.frame
    if len(frame) == 0:
        raise DataError("no ratings to fit (the table is empty after cleaning)")
    codes, uniques = pd.factorize(frame["rater_id"], sort=True)
    stats = stats_from_arrays(
        codes,
        frame["model_score"].to_numpy(np.float64),
        frame["score"].to_numpy(np.float64),
        np.asarray(uniques, dtype=str),
        len(uniques),
    )
    if group_columns:
        first = pd.Series(np.arange(len(frame))).groupby(codes).first().to_numpy()
        groups = {col: frame[col].to_numpy()[first].astype(str) for col in group_columns}
        stats = RaterStats(
            stats.rater_ids,
            stats.n,
            stats.sum_r,
            stats.sum_s,
            stats.sum_rr,
            stats.sum_rs,
            stats.sum_ss,
            stats.r_shift,
            stats.s_shift,
            groups,
        )
    return stats
