"""Per-rater affine calibrators (METHODS.md section 3), one scikit-learn style interface.

Every estimator maps the shared model score r to rater j's scale, s_hat = slope_j * r + intercept_j:

    est = PEBS(n_min=6).fit(ratings)          # RatingTable, DataFrame or RaterStats
    est.predict(rater_ids, model_scores)      # (N,) calibrated scores
    est.maps_                                 # CalibrationMaps: the learned per-rater maps

The math lives in pure functions over per-rater sufficient statistics (shrinkage.py); the classes
only store parameters, call them and keep the learned state (names ending in "_"). The random-slope
mixed model (MixedLMCalibrator) is the classical baseline and needs the raw ratings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar, Literal, TypeAlias

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from rewardsmith.calibrate import shrinkage
from rewardsmith.calibrate.maps import CalibrationMaps, UnknownRater
from rewardsmith.calibrate.shrinkage import (
    NONPOSITIVE_SLOPE_TOL,
    STATUS_FITTED,
    STATUS_GUARDED,
    STATUS_SPARSE,
)
from rewardsmith.calibrate.stats import RaterStats, rater_moments, rater_stats
from rewardsmith.data.ratings import RatingTable
from rewardsmith.errors import ConfigError, DataError, first_line
from rewardsmith.registry import Registry

Ratings: TypeAlias = RatingTable | pd.DataFrame | RaterStats
SlopeGuard = Literal["report", "population"]


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
    fit = shrinkage.affine_least_squares(rater_moments(stats.total()))
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
            fit = shrinkage.affine_least_squares(moments)
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
        ols = shrinkage.per_rater_ols(moments, 0.0, self.min_ratings)
        pop_slope, pop_intercept, pop_noise = _pooled(stats)
        ok = ols.eligible
        slope = np.where(ok, ols.theta[:, 0], pop_slope)
        intercept = np.where(ok, ols.theta[:, 1], pop_intercept)
        noise = np.where(ok, np.nan_to_num(ols.resid_var, nan=pop_noise), pop_noise)
        cov = np.where(ok[:, None, None], ols.cov, 0.0)
        status = shrinkage.fit_status(ok, moments)
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
        ols = shrinkage.per_rater_ols(moments, centre, self.n_min)
        pop_slope, pop_intercept, pop_noise = _pooled(stats)
        shrink = shrinkage.shrink(
            ols.theta,
            ols.cov,
            ols.eligible,
            self.joint,
            np.array([pop_slope, pop_intercept + pop_slope * centre]),
        )
        slope, intercept, var_a, var_b, cov_ab = shrinkage.to_origin(shrink.theta, shrink.risk, centre)
        population_slope = float(shrink.population[0])
        population_intercept = float(shrink.population[1] - shrink.population[0] * centre)

        status = shrinkage.fit_status(ols.eligible, moments)
        nonpositive = slope * np.sign(population_slope or 1.0) <= NONPOSITIVE_SLOPE_TOL * abs(population_slope)
        if self.slope_guard == "population" and nonpositive.any():
            slope = np.where(nonpositive, population_slope, slope)
            intercept = np.where(nonpositive, population_intercept, intercept)
            status = np.where(nonpositive, STATUS_GUARDED, status)

        # Residual variance per rater: from its own OLS fit, moderated; the prior for the others.
        eligible = ols.eligible
        dof = moments.n[eligible] - 2.0
        if self.moderate_noise and eligible.sum() >= 2:
            post, prior_var, prior_dof = shrinkage.moderated_variances(ols.resid_var[eligible], dof)
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
        intercept, weight, risk, s2, population, tau2, clipped = shrinkage.offset_shrinkage(
            moments, pop_slope, self.n_min
        )
        eligible = np.isfinite(s2)
        if eligible.sum() >= 2:
            post, prior_var, _ = shrinkage.moderated_variances(s2[eligible], moments.n[eligible] - 1.0)
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
            try:
                result = model.fit(reml=self.reml, method=["lbfgs"], maxiter=self.max_iter)
            except np.linalg.LinAlgError as exc:  # a singular design: no spread of model scores to fit on
                raise DataError(
                    f"the mixed model (mixedlm) cannot be fitted to these ratings: {first_line(exc)}"
                ) from None
        fixed = np.asarray(result.fe_params, dtype=np.float64)
        ids = np.array(sorted(set(groups.tolist())))
        effects = np.array([np.asarray(result.random_effects[g], dtype=np.float64) for g in ids])
        cond_cov = np.array([np.asarray(result.random_effects_cov[g], dtype=np.float64) for g in ids])
        theta = np.column_stack([fixed[1] + effects[:, 1], fixed[0] + effects[:, 0]])  # (slope, int. at centre)
        risk = cond_cov[:, ::-1, ::-1]  # statsmodels order is (intercept, slope)
        slope, intercept, var_a, var_b, cov_ab = shrinkage.to_origin(theta, risk, centre)
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
