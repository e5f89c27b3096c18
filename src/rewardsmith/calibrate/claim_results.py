"""The results of the PEBS claims (rewardsmith.calibrate.claims) built from calibration metrics: the full-fit
run's flat keys with each capped fit size's under `fit_size.<n>.` (experiments/calibration.py writes them to
docs/results/calibrate-<corpus>[-rm].json), per corpus and fit size. Every interval is the hierarchical bootstrap of
rewardsmith.calibrate.evaluate (hold-out splits and raters, crossed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from rewardsmith.calibrate.claims import (
    BINARY_RATINGS,
    DEMOGRAPHICS,
    FORECAST,
    GAIN_VS_POOLED,
    OFFSET_GAIN,
    OFFSET_ONLY,
    OFFSET_VS_POOLED,
    OLS_OVERFITS,
    ORACLE,
    PAPER_FORM,
    PAPER_GAIN,
    PRISM,
    RANKING_KEPT,
    REWARD_MODEL_GAIN,
    TARGET_GAIN,
    VARIANT_GAIN,
)
from rewardsmith.claims import (
    HELD,
    NOT_HELD,
    ClaimResult,
    interval_result,
    not_run,
    point_only,
    tolerance_result,
)

Metrics = Mapping[str, Any]
RANKING_TEST = "tests/unit/test_calibrate_estimators.py::test_positive_slope_maps_keep_pair_accuracy"


def settings(m: Metrics) -> list[tuple[str, str]]:
    """(label, key prefix) of the full fit and of every capped fit size in the metrics, largest first."""
    sizes = sorted({int(k.split(".")[1]) for k in m if k.startswith("fit_size.")}, reverse=True)
    return [("all fit ratings", "")] + [(f"{n} fit ratings / rater", f"fit_size.{n}.") for n in sizes]


def _gain(m: Metrics, prefix: str, method: str, reference: str = "pooled") -> tuple[Any, Any]:
    return m.get(f"{prefix}gain_vs_{reference}_pct.{method}"), m.get(f"{prefix}gain_vs_{reference}_ci.{method}")


def forecast_miss_cause(m: Metrics, prefix: str, method: str = PAPER_FORM) -> str:
    """Why a forecast of `method` misses, from the run's diagnostics: how much of the error is left when the whole
    fit part is the pilot (the closed form's own error) and how much is pilot noise, the share of pilots whose
    slope variance was clipped at 0, and the residuals' heteroscedasticity across model scores."""
    forecast = m.get(f"{prefix}forecast_gain_pct.{method}")
    realised = m.get(f"{prefix}gain_vs_pooled_pct.{method}")
    full = m.get(f"{prefix}forecast_full_pilot_gain_pct.{method}")
    if forecast is None or realised is None or full is None:
        return ""
    parts = [
        f"with the whole fit part as pilot the forecast is {full:.2f} (error {full - realised:+.2f}), so the "
        f"pilot's noise accounts for {forecast - full:+.2f} and the normal model for {full - realised:+.2f}"
    ]
    clipped = m.get(f"{prefix}forecast_tau2_slope_clipped_share.{method}")
    if clipped:
        parts.append(f"the pilot's slope variance was clipped at 0 in {clipped:.0%} of splits")
    rho = m.get(f"{prefix}residual_heteroscedasticity")
    if rho is not None:
        parts.append(
            f"Spearman(|r - mean r|, residual^2) = {rho:+.2f} within raters"
            + (
                " (noise falls at the extreme model scores, so the OLS variances overstate the sampling error)"
                if rho < -0.05
                else " (noise rises at the extreme model scores)"
                if rho > 0.05
                else ""
            )
        )
    return "; ".join(parts)


def single_pilot_errors(m: Metrics, prefix: str, method: str = PAPER_FORM) -> dict[str, float] | None:
    """One pilot's forecast minus the realised gain of the same hold-out split, over the splits: the error a
    practitioner with one pilot gets (median absolute error, 5th and 95th percentiles, the split count); None when
    the run holds no per-split forecasts."""
    forecasts = m.get(f"{prefix}forecast_gain_by_split.{method}")
    realised = m.get(f"{prefix}gain_by_split.{method}")
    if not forecasts or not realised or len(forecasts) != len(realised):
        return None
    errors = np.array([f - r for f, r in zip(forecasts, realised, strict=True) if f is not None and r is not None])
    if errors.size == 0:
        return None
    return {
        "median_abs": float(np.median(np.abs(errors))),
        "p5": float(np.percentile(errors, 5)),
        "p95": float(np.percentile(errors, 95)),
        "splits": int(errors.size),
    }


def forecast_result(m: Metrics, prefix: str, *, scope: str) -> ClaimResult:
    """The forecast claim on one corpus and fit size: forecast minus realised gain of the paper's form, its CI the
    realised gain's, judged against the paper's tolerance (rewardsmith.claims.tolerance_result); "not run" where the
    claim does not apply: binary ratings (the claim is about continuous corpora), or a pilot as large as the fit
    part (the pilot is then the whole fit, so the forecast is the full-data value, not a forecast)."""
    source = str(m.get("config", {}).get("source", {}).get("ratings") or "")
    forecast = m.get(f"{prefix}forecast_gain_pct.{PAPER_FORM}")
    realised, ci = _gain(m, prefix, PAPER_FORM)
    details = {"forecast": forecast, "realised": realised}
    if source in BINARY_RATINGS:
        return not_run(FORECAST, f"{source} ratings are binary; the claim is about continuous corpora", scope=scope)
    pilot = m.get("config", {}).get("evaluation", {}).get("pilot_per_rater")
    fit = int(prefix.split(".")[1]) if prefix.startswith("fit_size.") else m.get("fit_ratings_per_rater_mean")
    if pilot is not None and fit is not None and pilot >= fit:
        return not_run(
            FORECAST,
            f"the {pilot}-rating pilot is the whole {fit:g}-rating fit part, so it forecasts nothing",
            scope=scope,
        )
    error = None if forecast is None or realised is None else forecast - realised
    error_ci = [forecast - ci[1], forecast - ci[0]] if error is not None and ci else None
    result = tolerance_result(FORECAST, error, error_ci, scope=scope, details=details)
    if result.verdict != HELD and error is not None:
        result = replace(result, evidence=forecast_miss_cause(m, prefix))
    return result


def oracle_result(oracle: Metrics | None) -> ClaimResult:
    """The oracle inequality from the simulation's results (docs/results/calibration-oracle.json)."""
    scope = "simulated raters"
    if not oracle:
        return not_run(ORACLE, "run python experiments/calibration_oracle.py", scope=scope)
    ratios = oracle["ratios"]
    excess = ", ".join(f"{r['scaled_excess']:.2f}" for r in ratios)
    return interval_result(
        ORACLE,
        oracle["rate"],
        oracle["rate_ci"],
        scope=scope,
        evidence=f"J (ratio - 1) from J={ratios[0]['raters']} to {ratios[-1]['raters']}: {excess}; "
        f"{oracle['replicates']} panels per J",
    )


def demographics_results(demographics: Metrics | None, column: str | None) -> list[ClaimResult]:
    """The demographic claim on the column the group baseline uses (docs/results/calibration-demographics.json),
    per map parameter; every column is in docs/calibration.md's table."""
    if not demographics or not column:
        return [not_run(DEMOGRAPHICS, "run python experiments/calibration_demographics.py", scope="PluriHarms")]
    rec = next((c for c in demographics["columns"] if c["column"] == column), None)
    if rec is None:
        return [not_run(DEMOGRAPHICS, f"no {column} column in the results", scope="PluriHarms")]
    others = [c for c in demographics["columns"] if c["column"] != column]
    top = max((max(c["share_ci"]["slope"][1], c["share_ci"]["intercept"][1]) for c in others), default=None)
    note = f"the largest upper bound among the other {len(others)} columns: {top:.2f}" if top is not None else ""
    return [
        interval_result(
            DEMOGRAPHICS,
            rec["share"][p],
            rec["share_ci"][p],
            scope=f"{demographics['corpus']}, {column} ({rec['groups']} groups), {p}",
            evidence=note,
        )
        for p in ("slope", "intercept")
    ]


def pebs_claim_results(
    corpora: Mapping[str, Metrics],
    oracle: Metrics | None = None,
    demographics: Metrics | None = None,
    group_column: str | None = None,
) -> list[ClaimResult]:
    """The paper's claims on every corpus ({title: metrics}, each corpus's own model score), the simulated oracle
    inequality and the demographic share on `group_column` (their results, or None: not run)."""
    out: list[ClaimResult] = []
    for title, m in corpora.items():
        result = interval_result(
            GAIN_VS_POOLED,
            *_gain(m, "", PAPER_FORM),
            scope=f"{title}, all fit ratings",
            evidence=_splits_note(m, PAPER_FORM),
        )
        figure = f"-{PAPER_GAIN[title]:g}% RMSE" if title in PAPER_GAIN else "none for this corpus"
        out.append(replace(result, figure=figure))
    out.append(oracle_result(oracle))
    out += demographics_results(demographics, group_column)
    out.append(not_run(PRISM, "PRISM is not in the data directory", scope="PRISM"))
    for title, m in corpora.items():
        for label, prefix in settings(m):
            out.append(interval_result(OLS_OVERFITS, *_gain(m, prefix, PAPER_FORM, "ols"), scope=f"{title}, {label}"))
    kept = all(
        m.get(f"{prefix}pair_accuracy_invariant.{PAPER_FORM}", False)
        for m in corpora.values()
        for _, prefix in settings(m)
    )
    out.append(
        ClaimResult(
            RANKING_KEPT,
            HELD if kept else NOT_HELD,
            "every corpus and fit size",
            evidence=f"{RANKING_TEST}; on every hold-out split each positive-slope map kept its "
            f"rater's pair accuracy: {'yes' if kept else 'no'}",
        )
    )
    for title, m in corpora.items():
        for label, prefix in settings(m):
            out.append(forecast_result(m, prefix, scope=f"{title}, {label}"))
    return out


def _splits_note(m: Metrics, method: str) -> str:
    gains = m.get(f"gain_by_split.{method}") or []
    if len(gains) < 2:
        return ""
    return f"{len(gains)} hold-out splits, one split's gain {min(gains):.2f} to {max(gains):.2f}"


def pebs_own_results(
    corpora: Mapping[str, Metrics],
    reward_model: Mapping[str, Metrics],
    kept_variant: str,
    paper_corpus: str = "PluriHarms",
) -> list[ClaimResult]:
    """The project's own questions: the offset-only baseline, the variant kept on the choice splits against the
    paper's form, the paper's form with a reward model's score, and the project's 8 % bar."""
    out: list[ClaimResult] = []
    for title, m in corpora.items():
        for label, prefix in settings(m):
            out.append(interval_result(OFFSET_VS_POOLED, *_gain(m, prefix, OFFSET_ONLY), scope=f"{title}, {label}"))
            out.append(
                interval_result(OFFSET_GAIN, *_gain(m, prefix, PAPER_FORM, OFFSET_ONLY), scope=f"{title}, {label}")
            )
    for title, m in corpora.items():
        for label, prefix in settings(m):
            out.append(
                point_only(
                    VARIANT_GAIN,
                    _gain(m, prefix, kept_variant, PAPER_FORM)[0],
                    f"kept: {kept_variant}; not judged: the variant was chosen on other hold-out splits of these same "
                    "ratings, so this gain is not independent of the choice (a choice on held-out raters or another "
                    "corpus would make it testable)",
                    scope=f"{title}, {label}",
                )
            )
    for title, m in reward_model.items():
        out.append(
            interval_result(
                REWARD_MODEL_GAIN, *_gain(m, "", PAPER_FORM), scope=f"{title}, all fit ratings", evidence=_model_note(m)
            )
        )
    if paper_corpus in corpora:
        out.append(
            interval_result(
                TARGET_GAIN, *_gain(corpora[paper_corpus], "", PAPER_FORM), scope=f"{paper_corpus}, all fit ratings"
            )
        )
    return out


def _model_note(m: Metrics) -> str:
    notes = m.get("ratings", {}).get("notes", {})
    return str(notes.get("model_score", ""))
