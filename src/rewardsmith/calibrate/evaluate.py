"""Within-rater hold-out evaluation of calibrators (METHODS.md section 3, "Evaluation").

For each seed every rater's ratings are split at random into a fit part and a held-out part (fraction
`holdout`); every method is fitted on all raters' fit parts and scored on the held-out ratings. Per rater
the squared errors, Gaussian negative log-likelihoods and within-rater pair concordance are summed over
seeds; raters are the units of the paired tests and of the bootstrap.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from rewardsmith.calibrate.config import EvalConfig
from rewardsmith.calibrate.estimators import PEBS, create_calibrator, shared_params
from rewardsmith.calibrate.forecast import forecast_gain
from rewardsmith.calibrate.shrinkage import NONPOSITIVE_SLOPE_TOL, STATUS_FITTED
from rewardsmith.data.ratings import RatingTable, cap_per_rater, require_ratings
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.io.progress import Progress
from rewardsmith.stats import bootstrap_indices, percentile_interval, spearman

SIZE_BIN_EDGES = (0, 6, 10, 20, 40, 80, 160, np.inf)
# Methods every other method's gain is also measured against (besides pooled), when they are evaluated: per-rater
# OLS (no pooling), the offset-only map and the form of PEBS in METHODS.md.
GAIN_REFERENCES = ("ols", "offset", "pebs-uncentred")


def within_rater_split(frame: pd.DataFrame, holdout: float, seed: int) -> np.ndarray:
    """Held-out mask (N,): round(holdout * n_j) random ratings of each rater j with n_j >= 2 (at least one,
    and at least one left to fit). Raters with a single rating are never held out."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(frame))
    raters = frame["rater_id"].to_numpy()[order]
    rank = pd.Series(raters).groupby(raters, sort=False).cumcount().to_numpy()
    size = pd.Series(raters).groupby(raters, sort=False).transform("size").to_numpy()
    n_hold = np.clip(np.round(holdout * size), 1, size - 1)
    held = np.zeros(len(frame), dtype=bool)
    held[order] = (rank < n_hold) & (size >= 2)
    return held


@dataclass
class MethodScores:
    """Per-rater sums over seeds for one method, arrays (J,) in HoldoutResult.rater_ids order."""

    sse: np.ndarray
    nll: np.ndarray
    concordant: np.ndarray
    pairs: np.ndarray
    seed_rmse: list[float] = field(default_factory=list)
    seed_sse: list[np.ndarray] = field(default_factory=list)  # (J,) per split: the units of the split bootstrap
    nonpositive_slopes: list[int] = field(default_factory=list)
    invariant: list[bool] = field(default_factory=list)
    fit_seconds: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class HoldoutResult:
    """Everything the summary and the report need from the repeated hold-out."""

    rater_ids: np.ndarray
    count: np.ndarray
    n_fit: np.ndarray
    methods: dict[str, MethodScores]
    raw_concordant: np.ndarray
    raw_pairs: np.ndarray
    shrink_slope: np.ndarray
    shrink_intercept: np.ndarray
    groups: dict[str, np.ndarray]
    forecasts: list[dict[str, Any]]
    pebs_info: list[dict[str, Any]]
    seed_count: list[np.ndarray]  # (J,) held-out ratings per rater, one array per split
    last_pebs_maps: Any
    config: EvalConfig
    group_column: str | None
    heteroscedasticity: float = float("nan")


def _pair_concordance(
    codes: np.ndarray,
    score: np.ndarray,
    pred: np.ndarray,
    n_raters: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Within-rater pair concordance: for every rater, pairs of its rows with different human scores.

    codes (N,) rater index, score (N,) human score, pred (N,) the ranking score. Returns per-rater
    (concordant count, pair count), ties in pred counting one half.
    """
    concordant = np.zeros(n_raters)
    pairs = np.zeros(n_raters)
    if len(codes) == 0:
        return concordant, pairs
    order = np.argsort(codes, kind="stable")
    codes, score, pred = codes[order], score[order], pred[order]
    bounds = np.flatnonzero(np.diff(codes)) + 1
    for start, stop in zip(np.r_[0, bounds], np.r_[bounds, len(codes)], strict=True):
        s, p = score[start:stop], pred[start:stop]
        ds = np.sign(s[:, None] - s[None, :])
        dp = np.sign(p[:, None] - p[None, :])
        upper = np.triu(np.ones_like(ds, dtype=bool), 1) & (ds != 0)
        j = codes[start]
        pairs[j] += upper.sum()
        concordant[j] += ((ds == dp) & upper).sum() + 0.5 * ((dp == 0) & upper).sum()
    return concordant, pairs


def evaluate_holdout(
    table: RatingTable, config: EvalConfig | None = None, progress: str | None = None
) -> HoldoutResult:
    """Runs the repeated within-rater hold-out of `config.methods` on `table` (see module docstring); progress: a
    description to show a bar over the split seeds under (None: silent)."""
    config = config or EvalConfig()
    config.validate()
    frame = table.frame.reset_index(drop=True)
    require_ratings(table, "evaluate")
    sizes = frame.groupby("rater_id").size()
    if not (sizes >= 2).any():
        raise DataError(
            f"every one of the {len(sizes)} raters has a single rating: the within-rater hold-out needs "
            "raters with 2 or more (fit them with `rewardsmith calibrate fit`, which needs no hold-out)"
        )
    group_column = config.group_column or (table.demographic_columns[0] if table.demographic_columns else None)
    methods = [m for m in config.methods if m != "group" or group_column]
    if group_column and group_column not in frame.columns:
        raise ConfigError(
            f"group column {group_column!r} is not a column of the ratings; known: "
            f"{', '.join(table.demographic_columns) or '(none)'}"
        )
    codes, rater_ids = pd.factorize(frame["rater_id"], sort=True)
    rater_ids = np.asarray(rater_ids, dtype=str)
    n_raters = len(rater_ids)
    zeros = np.zeros(n_raters)
    scores = {m: MethodScores(zeros.copy(), zeros.copy(), zeros.copy(), zeros.copy()) for m in methods}
    count, n_fit = zeros.copy(), zeros.copy()
    raw_conc, raw_pairs = zeros.copy(), zeros.copy()
    shrink_slope, shrink_intercept = zeros.copy(), zeros.copy()
    forecasts, pebs_info = [], []
    last_pebs = None
    score_all = frame["score"].to_numpy(np.float64)
    model_all = frame["model_score"].to_numpy(np.float64)
    # The forecast of every PEBS variant evaluated (its centring and weights), and of the default one otherwise.
    forecast_variants = {
        name: create_calibrator(name, n_min=config.n_min)
        for name in methods
        if isinstance(create_calibrator(name), PEBS)
    } or {"pebs": create_calibrator("pebs")}
    seed_count: list[np.ndarray] = []

    with Progress(progress or "", config.seeds, enabled=progress is not None, unit="splits") as bar:
        for done, seed in enumerate(range(config.first_seed, config.first_seed + config.seeds), start=1):
            held = within_rater_split(frame, config.holdout, seed)
            fit_frame = frame.loc[~held]
            if config.fit_per_rater is not None:
                fit_frame = cap_per_rater(fit_frame, config.fit_per_rater, seed + 7919)
            test_codes = codes[held]
            y, r = score_all[held], model_all[held]
            test_ids = rater_ids[test_codes]
            count += np.bincount(test_codes, minlength=n_raters)
            seed_count.append(np.bincount(test_codes, minlength=n_raters).astype(np.float64))
            n_fit += np.bincount(codes[fit_frame.index.to_numpy()], minlength=n_raters)
            raw_seed, p = _pair_concordance(test_codes, y, r, n_raters)
            raw_conc += raw_seed
            raw_pairs += p
            for name in methods:
                params = shared_params(name, n_min=config.n_min, group_column=group_column)
                estimator = create_calibrator(name, **params)
                start = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    estimator.fit(fit_frame)
                scores[name].fit_seconds.append(time.perf_counter() - start)
                scores[name].notes.extend(sorted({str(w.message) for w in caught}))
                pred = estimator.predict(test_ids, r)
                var = np.maximum(estimator.predict_var(test_ids, r), 1e-12)
                err = pred - y
                s = scores[name]
                s.seed_sse.append(np.bincount(test_codes, weights=err**2, minlength=n_raters))
                s.sse += s.seed_sse[-1]
                s.nll += np.bincount(
                    test_codes, weights=0.5 * (np.log(2 * np.pi * var) + err**2 / var), minlength=n_raters
                )
                s.seed_rmse.append(float(np.sqrt(np.mean(err**2))))
                c, p = _pair_concordance(test_codes, y, pred, n_raters)
                s.concordant += c
                s.pairs += p
                maps = estimator.maps_
                idx = maps.index_of(rater_ids)
                slopes = np.where(idx >= 0, maps.slope[idx], maps.population_slope)
                direction = np.sign(maps.population_slope or 1.0)  # -1: the model score falls as ratings rise
                positive = slopes * direction > NONPOSITIVE_SLOPE_TOL * abs(maps.population_slope)
                s.nonpositive_slopes.append(int((~positive).sum()))
                # A map in the population's direction keeps the raw score's order, reversed when that is negative
                # (ties count one half either way, so the reversed concordance is pairs - concordance).
                same = np.isclose(c, raw_seed if direction > 0 else p - raw_seed, rtol=0, atol=1e-9)
                s.invariant.append(bool(same[positive].all()))
                if isinstance(estimator, PEBS) and name == "pebs":
                    w_a = maps.diagnostics["weight_slope"][idx]
                    w_b = maps.diagnostics["weight_intercept"][idx]
                    shrink_slope += 1 - w_a
                    shrink_intercept += 1 - w_b
                    pebs_info.append(dict(maps.info, n_fitted=int((maps.diagnostics["status"] == STATUS_FITTED).sum())))
                    last_pebs = maps
            if config.pilot_per_rater:
                pilot = cap_per_rater(fit_frame, config.pilot_per_rater, seed + 104729)
                planned = fit_frame.groupby("rater_id").size()
                record: dict[str, Any] = {"seed": seed}
                for variant, estimator in forecast_variants.items():
                    params = estimator.get_params()
                    try:
                        fc = forecast_gain(
                            pilot,
                            planned.reindex(sorted(pilot["rater_id"].unique())).to_numpy(),
                            n_min=min(config.n_min, config.pilot_per_rater),
                            centre=params["centre"],
                            joint=params["joint"],
                        )
                        # The same closed form with the whole fit part as its pilot: what is left of the miss
                        # without pilot noise is the normal model's own error.
                        full = forecast_gain(
                            fit_frame, None, n_min=config.n_min, centre=params["centre"], joint=params["joint"]
                        )
                        record[variant] = {**fc.as_dict(), "full_pilot_gain_pct": full.gain_pct}
                    except DataError as exc:
                        record[variant] = {"error": str(exc)}
                default = record.get("pebs") or next(v for k, v in record.items() if k != "seed")
                forecasts.append(
                    {
                        **record,
                        **(
                            {k: default[k] for k in ("gain_pct", "gain_ols_pct")}
                            if "gain_pct" in default
                            else {"error": default["error"]}
                        ),
                    }
                )
            bar.update(done)
    first = frame.drop_duplicates("rater_id").set_index("rater_id")
    groups = {col: first[col].reindex(rater_ids).to_numpy(str) for col in table.demographic_columns}
    n_seeds = config.seeds
    return HoldoutResult(
        rater_ids,
        count,
        n_fit / n_seeds,
        scores,
        raw_conc,
        raw_pairs,
        shrink_slope / n_seeds,
        shrink_intercept / n_seeds,
        groups,
        forecasts,
        pebs_info,
        seed_count,
        last_pebs,
        config,
        group_column,
        residual_heteroscedasticity(frame),
    )


def residual_heteroscedasticity(frame: pd.DataFrame) -> float:
    """Spearman correlation, over every rating, of |r - mean r of its rater| with the squared residual of the
    rater's own least-squares line (raters with 3+ ratings and 2+ model scores): near 0 when each rater's noise is
    the same at every model score (the normal model of the forecaster and of the OLS variances), negative when the
    extreme, high-leverage scores are the least noisy. NaN when no rater qualifies."""
    r = frame["model_score"].to_numpy(np.float64)
    y = frame["score"].to_numpy(np.float64)
    codes = pd.factorize(frame["rater_id"])[0]
    n = np.bincount(codes).astype(np.float64)
    mean_r, mean_y = np.bincount(codes, r) / n, np.bincount(codes, y) / n
    dr, dy = r - mean_r[codes], y - mean_y[codes]
    sxx, sxy = np.bincount(codes, dr * dr), np.bincount(codes, dr * dy)
    ok = (n >= 3) & (sxx > 1e-12)
    slope = np.where(ok, sxy / np.where(ok, sxx, 1.0), 0.0)
    keep = ok[codes]
    if keep.sum() < 3:
        return float("nan")
    resid = dy - slope[codes] * dr
    return float(spearman(np.abs(dr[keep]), resid[keep] ** 2))


# ----------------------------------------------------------------------------------------------
# Summary statistics


def _gain_pct(sse_method: np.ndarray, sse_base: np.ndarray) -> float:
    return float(100 * (1 - np.sqrt(sse_method.sum() / sse_base.sum())))


def bootstrap_gain_ci(
    sse_method: np.ndarray, sse_base: np.ndarray, resamples: int, confidence: float, seed: int = 0
) -> tuple[float, float]:
    """Percentile CI of the RMSE gain (percent) resampling raters with replacement; arrays (J,) of per-rater
    summed squared errors (held-out counts are equal across methods, so RMSE ratios need only the sums)."""
    idx = bootstrap_indices(len(sse_base), resamples, seed)
    gains = 100 * (1 - np.sqrt(sse_method[idx].sum(1) / sse_base[idx].sum(1)))
    return percentile_interval(gains, confidence)


def split_rater_gain_ci(
    seed_sse_method: np.ndarray, seed_sse_base: np.ndarray, resamples: int, confidence: float, seed: int = 0
) -> tuple[float, float]:
    """Percentile CI of the RMSE gain (percent) under a two-way bootstrap of a crossed design: every rater is held
    out in every split, so each replicate draws the hold-out splits with replacement and, independently, the raters
    with replacement, the same raters for every drawn split. (S, J) per-split, per-rater summed squared errors of
    the method and of the reference, resampled on the same draws (a paired interval)."""
    n_splits, n_raters = seed_sse_base.shape
    splits = bootstrap_indices(n_splits, resamples, seed)  # (B, S)
    raters = bootstrap_indices(n_raters, resamples, seed + 1)  # (B, J)
    rows, cols = splits[:, :, None], raters[:, None, :]
    num = seed_sse_method[rows, cols].sum(axis=(1, 2))
    den = seed_sse_base[rows, cols].sum(axis=(1, 2))
    return percentile_interval(100 * (1 - np.sqrt(num / den)), confidence)


def paired_tests(mse_method: np.ndarray, mse_base: np.ndarray) -> dict[str, float]:
    """Wilcoxon signed-rank and paired t tests (two-sided) of per-rater MSE differences (J,)."""
    diff = mse_base - mse_method
    if np.allclose(diff, 0):
        return {"wilcoxon_p": 1.0, "t_p": 1.0, "raters_better": 0, "raters_worse": 0}
    wilcoxon = sps.wilcoxon(mse_base, mse_method, zero_method="wilcox")
    t_test = sps.ttest_rel(mse_base, mse_method)
    return {
        "wilcoxon_p": float(wilcoxon.pvalue),
        "t_p": float(t_test.pvalue),
        "raters_better": int((diff > 0).sum()),
        "raters_worse": int((diff < 0).sum()),
    }


def summarise(result: HoldoutResult) -> dict[str, Any]:
    """Flat metrics (keys rmse.<m>, gain_vs_pooled_pct.<m>, p_value.<m>, ...) plus tables for the report."""
    cfg = result.config
    evaluated = result.count > 0
    count = result.count[evaluated]
    base = result.methods["pooled"].sse[evaluated]
    ols = result.methods["ols"].sse[evaluated] if "ols" in result.methods else None
    by_split = {name: np.stack(s.seed_sse)[:, evaluated] for name, s in result.methods.items()}
    flat: dict[str, Any] = {}
    tables: dict[str, Any] = {"methods": {}}
    raw_acc = float(result.raw_concordant.sum() / max(result.raw_pairs.sum(), 1))
    flat["pair_accuracy.model_score"] = raw_acc
    for name, s in result.methods.items():
        sse = s.sse[evaluated]
        row: dict[str, Any] = {
            "rmse": float(np.sqrt(sse.sum() / count.sum())),
            "rmse_seed_sd": float(np.std(s.seed_rmse, ddof=1)) if len(s.seed_rmse) > 1 else 0.0,
            "nll": float(s.nll[evaluated].sum() / count.sum()),
            "gain_vs_pooled_pct": _gain_pct(sse, base),
            "pair_accuracy": float(s.concordant.sum() / max(s.pairs.sum(), 1)),
            "pair_accuracy_invariant": bool(all(s.invariant)),
            "nonpositive_slopes": int(max(s.nonpositive_slopes, default=0)),
            "fit_seconds": float(np.mean(s.fit_seconds)),
        }
        if name != "pooled":
            row["gain_ci"] = split_rater_gain_ci(by_split[name], by_split["pooled"], cfg.bootstrap, cfg.confidence)
            row["gain_ci_raters"] = bootstrap_gain_ci(sse, base, cfg.bootstrap, cfg.confidence)
            row["gain_by_split"] = [_gain_pct(a, b) for a, b in zip(by_split[name], by_split["pooled"], strict=True)]
            row.update({f"vs_pooled_{k}": v for k, v in paired_tests(sse / count, base / count).items()})
        if ols is not None and name != "ols":
            row.update({f"vs_ols_{k}": v for k, v in paired_tests(sse / count, ols / count).items()})
        for ref in GAIN_REFERENCES:  # gains over the other baselines, on the same split and rater draws
            if ref in result.methods and ref != name:
                row[f"gain_vs_{ref}_pct"] = _gain_pct(sse, result.methods[ref].sse[evaluated])
                row[f"gain_vs_{ref}_ci"] = split_rater_gain_ci(
                    by_split[name], by_split[ref], cfg.bootstrap, cfg.confidence, seed=1
                )
        tables["methods"][name] = row
        flat[f"rmse.{name}"] = row["rmse"]
        flat[f"nll.{name}"] = row["nll"]
        flat[f"gain_vs_pooled_pct.{name}"] = row["gain_vs_pooled_pct"]
        flat[f"p_value.{name}"] = row.get("vs_pooled_wilcoxon_p", 1.0)
        flat[f"pair_accuracy.{name}"] = row["pair_accuracy"]
        if "gain_ci" in row:
            flat[f"gain_vs_pooled_ci.{name}"] = list(row["gain_ci"])
            flat[f"gain_vs_pooled_ci_raters.{name}"] = list(row["gain_ci_raters"])
            flat[f"gain_by_split.{name}"] = row["gain_by_split"]
        for ref in GAIN_REFERENCES:
            if f"gain_vs_{ref}_pct" in row:
                flat[f"gain_vs_{ref}_pct.{name}"] = row[f"gain_vs_{ref}_pct"]
                flat[f"gain_vs_{ref}_ci.{name}"] = list(row[f"gain_vs_{ref}_ci"])
        if "vs_ols_wilcoxon_p" in row:
            flat[f"p_value_vs_ols.{name}"] = row["vs_ols_wilcoxon_p"]
        flat[f"pair_accuracy_invariant.{name}"] = row["pair_accuracy_invariant"]
    good = [f for f in result.forecasts if "gain_pct" in f]
    if good:
        flat["forecast_gain_pct"] = float(np.mean([f["gain_pct"] for f in good]))
        flat["forecast_gain_ols_pct"] = float(np.mean([f["gain_ols_pct"] for f in good]))
    # In the order the forecasts list them (a set's order would change with each process's string hashing).
    variants = dict.fromkeys(
        k for f in result.forecasts for k, v in f.items() if isinstance(v, dict) and "gain_pct" in v
    )
    for variant in variants:
        runs = [f[variant] for f in result.forecasts if "gain_pct" in f.get(variant, {})]
        flat[f"forecast_gain_pct.{variant}"] = float(np.mean([r["gain_pct"] for r in runs]))
        flat[f"forecast_full_pilot_gain_pct.{variant}"] = float(np.mean([r["full_pilot_gain_pct"] for r in runs]))
        flat[f"forecast_tau2_slope_clipped_share.{variant}"] = float(np.mean([r["tau2"][0][0] <= 0 for r in runs]))
        # One pilot's forecast per hold-out split, in the splits' order (None where it failed): against the split's
        # realised gain (gain_by_split) it is the error a practitioner with one pilot gets.
        flat[f"forecast_gain_by_split.{variant}"] = [
            f[variant]["gain_pct"] if "gain_pct" in f.get(variant, {}) else None for f in result.forecasts
        ]
    flat["residual_heteroscedasticity"] = result.heteroscedasticity
    split_names = list(range(cfg.first_seed, cfg.first_seed + cfg.seeds))
    tables["per_rater"] = {
        "rater_ids": [str(r) for r in result.rater_ids[evaluated]],
        "splits": split_names,
        "count": np.stack(result.seed_count)[:, evaluated].tolist(),
        "sse": {name: a.tolist() for name, a in by_split.items()},
    }
    tables["forecasts"] = result.forecasts
    tables["by_sample_size"] = _by_sample_size(result)
    tables["audit"] = _audit(result)
    tables["pebs_info"] = result.pebs_info
    tables["group_column"] = result.group_column
    flat["raters_evaluated"] = int(evaluated.sum())
    flat["heldout_ratings_per_seed"] = float(result.count.sum() / cfg.seeds)
    flat["fit_ratings_per_rater_mean"] = float(result.n_fit[evaluated].mean())
    return {"flat": flat, "tables": tables}


def _by_sample_size(result: HoldoutResult) -> list[dict[str, Any]]:
    """RMSE per method within bins of the raters' fit sizes."""
    rows = []
    edges = SIZE_BIN_EDGES
    for low, high in itertools.pairwise(edges):
        mask = (result.n_fit >= low) & (result.n_fit < high) & (result.count > 0)
        if not mask.any():
            continue
        label = f"{low}-{int(high) - 1}" if np.isfinite(high) else f">={low}"
        row: dict[str, Any] = {
            "fit_ratings": label,
            "raters": int(mask.sum()),
            "mean_fit_ratings": float(result.n_fit[mask].mean()),
        }
        for name, s in result.methods.items():
            row[f"rmse.{name}"] = float(np.sqrt(s.sse[mask].sum() / result.count[mask].sum()))
        rows.append(row)
    return rows


def _audit(result: HoldoutResult, top: int = 10) -> dict[str, Any]:
    """Who PEBS shrinks hardest and what it costs them: by demographic group and the top raters."""
    if "pebs" not in result.methods:
        return {}
    ok = result.count > 0
    pooled, pebs = result.methods["pooled"].sse, result.methods["pebs"].sse
    ols = result.methods["ols"].sse if "ols" in result.methods else None

    def rmse(sse: np.ndarray, mask: np.ndarray) -> float:
        return float(np.sqrt(sse[mask].sum() / result.count[mask].sum()))

    by_group = []
    for col, labels in result.groups.items():
        for group in sorted(set(labels.tolist())):
            mask = (labels == group) & ok
            if not mask.any():
                continue
            row = {
                "column": col,
                "group": group,
                "raters": int(mask.sum()),
                "mean_fit_ratings": float(result.n_fit[mask].mean()),
                "shrink_slope": float(result.shrink_slope[mask].mean()),
                "shrink_intercept": float(result.shrink_intercept[mask].mean()),
                "rmse_pooled": rmse(pooled, mask),
                "rmse_pebs": rmse(pebs, mask),
                "gain_vs_pooled_pct": _gain_pct(pebs[mask], pooled[mask]),
            }
            if ols is not None:
                row["rmse_ols"] = rmse(ols, mask)
                row["gain_vs_ols_pct"] = _gain_pct(pebs[mask], ols[mask])
            by_group.append(row)
    order = np.argsort(-result.shrink_slope)
    hardest = []
    for j in order[:top]:
        if not ok[j]:
            continue
        mask = np.zeros_like(ok)
        mask[j] = True
        row = {
            "rater_id": str(result.rater_ids[j]),
            "fit_ratings": float(result.n_fit[j]),
            "shrink_slope": float(result.shrink_slope[j]),
            "shrink_intercept": float(result.shrink_intercept[j]),
            "rmse_pooled": rmse(pooled, mask),
            "rmse_pebs": rmse(pebs, mask),
            **{col: str(labels[j]) for col, labels in result.groups.items()},
        }
        if ols is not None:
            row["rmse_ols"] = rmse(ols, mask)
        hardest.append(row)
    return {"by_group": by_group, "hardest_shrunk": hardest}


def run_holdout(table: RatingTable, config: EvalConfig | None = None) -> tuple[HoldoutResult, dict[str, Any]]:
    """evaluate_holdout then summarise."""
    result = evaluate_holdout(table, config)
    return result, summarise(result)


def fit_size_sweep(table: RatingTable, config: EvalConfig, sizes: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The same protocol with each rater's fit part capped at each size (held-out parts unchanged)."""
    from dataclasses import replace

    return {int(n): summarise(evaluate_holdout(table, replace(config, fit_per_rater=int(n)))) for n in sizes}
