"""Result blocks of docs/calibration.md (and the README's calibration block), rendered from committed metrics files
only:

- docs/results/calibrate-pluriharms.json, calibrate-dices.json (each corpus's model score) and
  calibrate-pluriharms-rm.json, calibrate-dices-rm.json (a reward model's score): experiments/calibration.py, the
  full-fit run's slimmed metrics.json (flat keys rmse.<method>, gain_vs_<reference>_pct.<method> and _ci.<method>,
  p_value.<method>, forecast_gain_pct.<variant>, ...) with each capped fit size's flat keys under fit_size.<n>.;
- docs/results/calibration-choice.json: the PEBS variant chosen on hold-out splits that are never reported;
- docs/results/calibration-variants.json: experiments/calibration_variants.py (synthetic designs);
- benchmarks/results/pebs.json: benchmarks/bench_pebs.py.

The claims and their verdicts are built by rewardsmith.calibrate.claim_results against the bars declared in
rewardsmith.calibrate.claims; these functions only lay them out. tools/build_docs.py collects BLOCKS with every
other tools/blocks_*.py module's; the helpers they share are in tools/blocks_common.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from blocks_common import BENCH, RESULTS, ci_text, load, table
from blocks_common import source as _source
from blocks_common import verdict as _verdict

from rewardsmith.calibrate.claim_results import pebs_claim_results, pebs_own_results
from rewardsmith.calibrate.claims import (
    CHOICES,
    FORECAST_TOLERANCE,
    OFFSET_ONLY,
    PAPER_FORM,
    PAPER_GAIN,
    VARIANTS,
)
from rewardsmith.claims import CLAIM_HEADER, HELD, INCONCLUSIVE, NOT_HELD, claim_row

CORPORA = {"pluriharms": ("calibrate-pluriharms", "PluriHarms"), "dices": ("calibrate-dices", "DICES-350")}
REWARD_MODEL = {"pluriharms": ("calibrate-pluriharms-rm", "PluriHarms"), "dices": ("calibrate-dices-rm", "DICES-350")}
PEBS_VARIANTS = VARIANTS
VARIANT_LABELS = {
    "pebs-uncentred": "uncentred (the paper's form)",
    "pebs-centred": "centred",
    "pebs": "joint",
    "ols": "per-rater OLS",
    "mixedlm": "MixedLM",
    "pooled": "pooled",
    "offset": "offset only",
}
DESIGN_LABELS = {"balanced": "synthetic, balanced design", "unbalanced": "synthetic, raters' model-score means differ"}
PEBS_BENCH_COMMAND = "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pebs.py"


def kept_variant() -> str:
    """The variant the choice splits kept (docs/results/calibration-choice.json), or the registry's default."""
    path = RESULTS / "calibration-choice.json"
    return str(load("calibration-choice")["choice"]["chosen"]) if path.exists() else "pebs"


# ----------------------------------------------------------------------------------------------------
# Helpers (the build_docs conventions)


def _ci(value: Any, ci: Any, decimals: int = 2) -> str:
    return ci_text(value, ci, decimals)


def _p(value: Any) -> str:
    return "-" if value is None else f"{value:.2g}"


def _rmse_decimals(m: dict[str, Any]) -> int:
    """Two decimals on a 0-100 scale, four on a 0-1 scale."""
    low, high = m["ratings"]["score_range"]
    return 2 if high - low >= 10 else 4


def _methods(m: dict[str, Any]) -> list[str]:
    return [k.split(".", 1)[1] for k in m if k.startswith("rmse.")]


def _settings(m: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, key prefix) of the full fit and of every capped fit size in the metrics, largest first."""
    sizes = sorted({int(k.split(".")[1]) for k in m if k.startswith("fit_size.")}, reverse=True)
    return [(f"all ({m['fit_ratings_per_rater_mean']:.0f} on average)", "")] + [
        (str(n), f"fit_size.{n}.") for n in sizes
    ]


def _label(m: dict[str, Any], method: str) -> str:
    if method == "group":
        return f"group ({m['config'].get('group_column_used')})"
    labels = {
        "pebs": "PEBS joint",
        "pebs-centred": "PEBS centred",
        "pebs-uncentred": "PEBS, the paper's form",
        "ols": "per-rater OLS",
        "mixedlm": "MixedLM",
        OFFSET_ONLY: "offset only (pooled slope)",
    }
    label = labels.get(method, method)
    return label + (" (the project's extension)" if method == kept_variant() and method != PAPER_FORM else "")


def _vs_ols(m: dict[str, Any], prefix: str, method: str) -> tuple[str, str]:
    """(gain vs per-rater OLS with its CI where the metrics hold one, p value or verdict)."""
    if method == "ols":
        return "0 (reference)", "-"
    gain = m.get(f"{prefix}gain_vs_ols_pct.{method}")
    ci = m.get(f"{prefix}gain_vs_ols_ci.{method}")
    if gain is None:
        return "n/a", "-"
    if ci:
        return _ci(gain, ci), f"{_verdict(ci)} (p {_p(m.get(f'{prefix}p_value_vs_ols.{method}'))})"
    return f"{gain:.2f}", f"p {_p(m.get(f'{prefix}p_value_vs_ols.{method}'))}"


# ----------------------------------------------------------------------------------------------------
# Blocks


def _results(name: str, title: str) -> str:
    m = load(name)
    dec = _rmse_decimals(m)
    ev = m["config"]["evaluation"]
    has_ols_ci = any(k.startswith("gain_vs_ols_ci.") or ".gain_vs_ols_ci." in k for k in m)
    rows = []
    for setting, prefix in _settings(m):
        for method in _methods(m):
            if f"{prefix}rmse.{method}" not in m:
                continue
            ci = m.get(f"{prefix}gain_vs_pooled_ci.{method}")
            reference = method == "pooled"
            rows.append(
                [
                    setting,
                    _label(m, method),
                    f"{m[f'{prefix}rmse.{method}']:.{dec}f}",
                    "0 (reference)" if reference else _ci(m.get(f"{prefix}gain_vs_pooled_pct.{method}"), ci),
                    "-" if reference else _verdict(ci),
                    "-" if reference else _p(m.get(f"{prefix}p_value.{method}")),
                    *_vs_ols(m, prefix, method),
                ]
            )
    ols_note = (
        ""
        if has_ols_ci
        else " The metrics record no CI of the gain over per-rater OLS, only its Wilcoxon "
        "p value, so the comparison with OLS gets no verdict here."
    )
    intro = (
        f"{title}: {m['raters_evaluated']} raters, {m['data']['ratings_kept']:,} ratings; {ev['holdout']:.0%} "
        f"of every rater held out, {ev['seeds']} hold-out splits (seeds {ev['first_seed']}-"
        f"{ev['first_seed'] + ev['seeds'] - 1}); held-out RMSE on the "
        f"{m['ratings']['score_range'][0]:g}-{m['ratings']['score_range'][1]:g} scale; gain = 100 (1 - RMSE / "
        f"RMSE of the reference) in %, {ev['confidence']:.0%} percentile CI ({ev['bootstrap']} two-stage "
        "resamples of the splits and, independently, of the raters); beats pooled: held when the CI lies above 0, "
        "not held below, inconclusive when it covers 0; p: two-sided Wilcoxon signed-rank over raters' MSE."
        f"{ols_note} Model score: {m['ratings'].get('notes', {}).get('model_score', 'the source default')}."
    )
    header = [
        "fit ratings / rater",
        "method",
        "RMSE",
        "gain vs pooled % [95% CI]",
        "beats pooled",
        "p (Wilcoxon)",
        "gain vs per-rater OLS %",
        "vs OLS",
    ]
    pair_rows = [
        [
            "raw model score",
            *[f"{m.get(f'{p}pair_accuracy.model_score', float('nan')):.4f}" for _, p in _settings(m)],
            "-",
        ]
    ]
    for method in _methods(m):
        pair_rows.append(
            [
                _label(m, method),
                *[
                    f"{m[f'{p}pair_accuracy.{method}']:.4f}" if f"{p}pair_accuracy.{method}" in m else "n/a"
                    for _, p in _settings(m)
                ],
                f"{m[f'nll.{method}']:.3f}",
            ]
        )
    pair_header = [
        "method",
        *[f"pair accuracy, {s} fit ratings" for s, _ in _settings(m)],
        "Gaussian NLL (all fit ratings)",
    ]
    return (
        intro + "\n\n" + table(header, rows) + "\n\n"
        "Within-rater pair accuracy on held-out items (ties count one half) and the Gaussian NLL:\n\n"
        + table(pair_header, pair_rows)
        + "\n\n"
        + _source(name)
    )


def block_pluriharms() -> str:
    return _results(*CORPORA["pluriharms"])


def block_dices() -> str:
    return _results(*CORPORA["dices"])


def block_pluriharms_rm() -> str:
    return _results(*REWARD_MODEL["pluriharms"])


def block_dices_rm() -> str:
    return _results(*REWARD_MODEL["dices"])


def _corpora(which: dict[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
    return {title: load(name) for name, title in which.values() if (RESULTS / f"{name}.json").exists()}


def block_claim_table() -> str:
    """docs/calibration.md's opening table: the paper's claims, then the project's own questions."""
    corpora, rm = _corpora(CORPORA), _corpora(REWARD_MODEL)
    oracle = load("calibration-oracle") if (RESULTS / "calibration-oracle.json").exists() else None
    demographics = load("calibration-demographics") if (RESULTS / "calibration-demographics.json").exists() else None
    group = next(
        (m["config"].get("group_column_used") for m in corpora.values() if m["config"].get("group_column_used")), None
    )
    paper = [claim_row(r, 2) for r in pebs_claim_results(corpora, oracle, demographics, group)]
    own = [claim_row(r, 2) for r in pebs_own_results(corpora, rm, kept_variant())]
    m = next(iter(corpora.values()))
    ev = m["config"]["evaluation"]
    names = [n for n, _ in CORPORA.values()] + [n for n, _ in REWARD_MODEL.values() if (RESULTS / f"{n}.json").exists()]
    return (
        f"Gains in % of held-out RMSE; {ev['seeds']} hold-out splits (seeds {ev['first_seed']}-"
        f"{ev['first_seed'] + ev['seeds'] - 1}, none of them read by any choice) with 95% CIs resampling the "
        "splits and, independently, the raters. held: the CI lies on the claimed side of the bar declared "
        "(src/rewardsmith/calibrate/claims.py); a forecast is held when the CI of its error lies within the "
        f"paper's {FORECAST_TOLERANCE:g}-point tolerance; not run: these runs do not measure it. The "
        f"paper's form is `{PAPER_FORM}` (per-parameter shrinkage of the uncentred slope and intercept); the "
        "8 % bar is the project's own.\n\n**The paper's claims**\n\n"
        + table(CLAIM_HEADER, paper)
        + "\n\n**The project's own questions**\n\n"
        + table(CLAIM_HEADER, own)
        + "\n\n"
        + _source(*names)
    )


def block_summary() -> str:
    """The README's compact form: the paper's form against the paper, beside the offset-only map and a reward
    model's score."""
    corpora, rm = _corpora(CORPORA), _corpora(REWARD_MODEL)
    rows = []
    for title, m in corpora.items():
        paper = PAPER_GAIN.get(title)
        rows.append(
            [
                title,
                f"{paper:g}" if paper else "none given",
                _ci(m[f"gain_vs_pooled_pct.{PAPER_FORM}"], m[f"gain_vs_pooled_ci.{PAPER_FORM}"]),
                _ci(m.get(f"gain_vs_pooled_pct.{OFFSET_ONLY}"), m.get(f"gain_vs_pooled_ci.{OFFSET_ONLY}")),
                _ci(rm[title][f"gain_vs_pooled_pct.{PAPER_FORM}"], rm[title][f"gain_vs_pooled_ci.{PAPER_FORM}"])
                if title in rm
                else "n/a",
            ]
        )
    n = next(iter(corpora.values()))["config"]["evaluation"]["seeds"]
    return (
        f"Held-out RMSE gain over the pooled map (%), the paper's form of PEBS, {n} hold-out splits, 95% CIs over "
        "splits and raters; the offset-only map keeps the pooled slope and shrinks a per-rater intercept; the "
        "reward-model column replaces the corpus's model score by a MiniLM reward model trained here "
        "(docs/calibration.md):\n\n"
        + table(["corpus", "paper", "PEBS (paper's form)", "offset only", "PEBS, reward-model score"], rows)
        + "\n\n"
        + _source(*[n for n, _ in CORPORA.values()])
    )


def block_choices() -> str:
    c = load("calibration-choice")["choice"]
    rows = [
        [VARIANT_LABELS.get(v, v), f"{g:.3f}", "kept" if v == c["chosen"] else ""]
        for v, g in c["evidence"]["mean_gain_vs_pooled_pct"].items()
    ]
    detail = [
        [setting, *[f"{c['evidence']['gain_vs_pooled_pct'][v][setting]:.3f}" for v in VARIANTS]]
        for setting in next(iter(c["evidence"]["gain_vs_pooled_pct"].values()))
    ]
    choice = CHOICES[0]
    return (
        f"**{choice.what}**: {choice.rule}, on {choice.split} (rule written in `{choice.where}`, "
        f"`rewardsmith.calibrate.claims.VARIANT_CHOICE`):\n\n"
        + table(["variant", "mean gain over pooled % (choice splits)", ""], rows)
        + "\n\n"
        + table(["setting (choice splits)", *[VARIANT_LABELS[v] for v in VARIANTS]], detail)
        + "\n\n"
        + _source("calibration-choice")
    )


def _lowest(rmse: dict[str, float], decimals: int) -> str:
    """The PEBS variant with the lowest RMSE, with the variants that tie with it at the shown precision."""
    best = min(PEBS_VARIANTS, key=lambda v: rmse[v])
    ties = [v for v in PEBS_VARIANTS if v != best and round(rmse[v], decimals) == round(rmse[best], decimals)]
    short = {"pebs-uncentred": "uncentred", "pebs-centred": "centred", "pebs": "joint"}
    return short[best] + "".join(f" (= {short[v]} at the shown precision)" for v in ties)


def block_variants() -> str:
    """The reported splits' RMSE of every variant (a description: the choice was made on other splits, see the
    choice block) and the synthetic designs' paired comparisons."""
    columns = [*PEBS_VARIANTS, "ols", "mixedlm"]
    rows = []
    for corpus in CORPORA:
        name, title = CORPORA[corpus]
        m = load(name)
        dec = _rmse_decimals(m)
        for setting, prefix in _settings(m):
            rmse = {v: m[f"{prefix}rmse.{v}"] for v in columns}
            rows.append(
                [
                    f"{title}, {setting} fit ratings / rater",
                    *[f"{rmse[v]:.{dec}f}" for v in columns],
                    _lowest(rmse, dec),
                ]
            )
    syn = load("calibration-variants")
    for design, d in syn["designs"].items():
        rows.append(
            [DESIGN_LABELS.get(design, design), *[f"{d['rmse'][v]:.4f}" for v in columns], _lowest(d["rmse"], 4)]
        )
    s = syn["setup"]
    comparisons = []
    for design, d in syn["designs"].items():
        for c in d["comparisons"]:
            if c["reference"] == "pooled":
                continue
            comparisons.append(
                [
                    DESIGN_LABELS.get(design, design),
                    f"{VARIANT_LABELS[c['method']]} vs {VARIANT_LABELS[c['reference']]}",
                    _ci(c["gain_pct"], c["ci"]),
                    _verdict(c["ci"]),
                ]
            )
    return (
        "Held-out RMSE on the reported splits (rating scale of each corpus; the synthetic noise SD is "
        f"{s['noise_sd']:g}); a description only, since the variant was chosen on other splits:\n\n"
        + table(["setting", *[VARIANT_LABELS[v] for v in columns], "lowest PEBS variant"], rows)
        + "\n\nOn the synthetic designs "
        f"({s['replicates']} independent tables per design of {s['raters']} raters with "
        f"{s['ratings_per_rater'][0]}-{s['ratings_per_rater'][1]} ratings each, slope SD {s['slope_sd']:g}, "
        f"intercept SD {s['intercept_sd']:g}, correlation {s['correlation']:g}; {s['holdout']:.0%} held out, "
        f"{s['split_seeds']} splits per table) the paired gains are, with 95% hierarchical bootstrap CIs over "
        f"tables, then raters ({s['bootstrap']} resamples):\n\n"
        + table(["design", "comparison", "gain % [95% CI]", "verdict"], comparisons)
        + "\n\n"
        + _source(*(n for n, _ in CORPORA.values()), "calibration-variants")
    )


def block_oracle() -> str:
    """PEBS against the oracle that knows the true between-rater variance (rewardsmith.calibrate.oracle)."""
    if not (RESULTS / "calibration-oracle.json").exists():
        return "Not run yet: `python experiments/calibration_oracle.py` writes docs/results/calibration-oracle.json."
    d = load("calibration-oracle")
    rows = [
        [
            str(r["raters"]),
            f"{r['pebs_risk']:.4f}",
            f"{r['oracle_risk']:.4f}",
            f"{r['ratio']:.5f} [{r['ratio_ci'][0]:.5f}, {r['ratio_ci'][1]:.5f}]",
            f"{r['scaled_excess']:.3f}",
        ]
        for r in d["ratios"]
    ]
    prior = d["prior"]
    return (
        f"{d['replicates']} simulated panels per J (seed {d['seed']}): (slope, intercept) ~ N(({prior['slope']:g}, "
        f"{prior['intercept']:g}), SDs {prior['slope_sd']:g} and {prior['intercept_sd']:g}, correlation "
        f"{prior['correlation']:g}), {d['ratings_per_rater'][0]}-{d['ratings_per_rater'][1] - 1} ratings per rater, "
        f"noise SD {prior['noise_sd']:g}; risk: mean squared error of (slope, intercept) over raters; 95% CIs "
        "resample the panels. PEBS in the paper's form estimates the population and tau^2 by moments; the oracle "
        "uses the true ones with the same V_j.\n\n"
        + table(["raters J", "PEBS risk", "oracle risk", "ratio [95% CI]", "J (ratio - 1)"], rows)
        + f"\n\nRate of the excess risk (slope of log(ratio - 1) on log J): {d['rate']:.3f} "
        f"[{d['rate_ci'][0]:.3f}, {d['rate_ci'][1]:.3f}]; the bound 1 + c/J gives -1.\n\n"
        + _source("calibration-oracle")
    )


def block_demographics() -> str:
    """The share of the between-rater variance each PluriHarms demographic column explains."""
    if not (RESULTS / "calibration-demographics.json").exists():
        return "Not run yet: `python experiments/calibration_demographics.py`."
    d = load("calibration-demographics")
    rows = [
        [c["column"], str(c["groups"])]
        + [
            f"{c['share'][p]:.3f} [{c['share_ci'][p][0]:.3f}, {c['share_ci'][p][1]:.3f}]"
            for p in ("slope", "intercept")
        ]
        for c in d["columns"]
    ]
    tau2 = d["columns"][0]["tau2"]
    return (
        f"{d['corpus']}: {d['raters']} raters, {d['ratings']:,} ratings; between-rater variance (method of moments) "
        f"of the slope {tau2['slope']:.1f} and of the intercept at the mean model score {tau2['intercept']:.1f}; "
        "share: 1 - (the pooled within-group estimate) / (the total), 95% CIs resampling raters (a share below 0 "
        "is noise around none).\n\n"
        + table(["demographic column", "groups", "share of slope variance", "share of intercept variance"], rows)
        + "\n\n"
        + _source("calibration-demographics")
    )


def block_forecast() -> str:
    """The paper's form: forecast against realised gain, judged on the error's CI against the paper's 0.2-point
    tolerance (rewardsmith.calibrate.claim_results.forecast_result), with the diagnostics of a miss."""
    from rewardsmith.calibrate.claim_results import forecast_result, single_pilot_errors

    rows, causes = [], []
    verdicts: dict[str, int] = {}
    for corpus in CORPORA:
        name, title = CORPORA[corpus]
        m = load(name)
        for setting, prefix in _settings(m):
            forecast = m.get(f"{prefix}forecast_gain_pct.{PAPER_FORM}")
            realised = m[f"{prefix}gain_vs_pooled_pct.{PAPER_FORM}"]
            ci = m.get(f"{prefix}gain_vs_pooled_ci.{PAPER_FORM}")
            if forecast is None:
                continue
            result = forecast_result(m, prefix, scope=f"{title}, {setting}")
            verdicts[result.verdict] = verdicts.get(result.verdict, 0) + 1
            error_ci = "" if result.ci is None else f" [{result.ci[0]:+.2f}, {result.ci[1]:+.2f}]"
            full = m.get(f"{prefix}forecast_full_pilot_gain_pct.{PAPER_FORM}")
            one = single_pilot_errors(m, prefix)
            rows.append(
                [
                    title,
                    setting,
                    f"{forecast:.2f}",
                    _ci(realised, ci),
                    f"{forecast - realised:+.2f}{error_ci}",
                    "not run"
                    if one is None
                    else f"{one['median_abs']:.2f} ({one['p5']:+.2f} to {one['p95']:+.2f}; {one['splits']} splits)",
                    result.verdict
                    if result.verdict in (HELD, NOT_HELD, INCONCLUSIVE)
                    else f"not run: {result.evidence}",
                    "n/a" if full is None else f"{full:.2f}",
                ]
            )
            if result.verdict in (NOT_HELD, INCONCLUSIVE) and result.evidence:
                causes.append(f"- {title}, {setting} fit ratings: {result.evidence}.")
    pilots = sorted({load(n)["config"]["evaluation"]["pilot_per_rater"] for n, _ in CORPORA.values()})
    counts = ", ".join(f"{v} {k}" for k, v in sorted(verdicts.items()))
    return (
        f"The paper's form ({PAPER_FORM}). Pilot: {', '.join(map(str, pilots))} ratings per rater drawn from each "
        "rater's fit part, forecast for the planned fit size, mean over the hold-out splits; realised: the "
        "held-out gain over pooled with its 95% CI over splits and raters. The error's CI is the realised gain's; "
        f"held: it lies within the paper's tolerance of {FORECAST_TOLERANCE:g} points, not held: wholly outside "
        "it, inconclusive: it straddles it. The claim is about continuous corpora, so DICES-350 (binary) rows are "
        "shown but not judged, nor are rows whose pilot is the whole fit part. One pilot's error is each hold-out "
        "split's own forecast against that split's realised gain: what a practitioner with a single pilot gets.\n\n"
        + table(
            [
                "corpus",
                "fit ratings / rater",
                "forecast %",
                "realised % [95% CI]",
                "forecast - realised [95% CI]",
                "one pilot's error: median absolute (5th to 95th percentile)",
                f"verdict (tolerance {FORECAST_TOLERANCE:g} points)",
                "forecast from the whole fit part %",
            ],
            rows,
        )
        + f"\n\nVerdicts: {counts}."
        + ("\n\nWhere it misses or cannot decide:\n\n" + "\n".join(causes) if causes else "")
        + "\n\n"
        + _source(*(n for n, _ in CORPORA.values()))
    )


def block_full_fit() -> str:
    rows = []
    for corpus in CORPORA:
        name, title = CORPORA[corpus]
        f = load(name)["pebs_full_fit"]
        clipped = [p for p in ("slope", "intercept") if f.get(f"tau2_clipped_{p}")]
        ids = f.get("raters_with_nonpositive_shrunk_slope") or []
        negative = "none"
        if ids:
            negative = ", ".join(ids)
            slopes = f.get("slopes") or {}
            low = [
                (o, s)
                for o, s in zip(slopes.get("ols", []), slopes.get("shrunk", []), strict=True)
                if s <= 1e-9 * abs(f["population_slope"])
            ]
            if len(ids) == 1 and len(low) == 1:  # one rater: its OLS and shrunk slopes are unambiguous
                negative += f" (OLS slope {low[0][0]:.3g}, shrunk {low[0][1]:.3g})"
        intercept = f["population_intercept"]
        rows.append(
            [
                title,
                f"{f['tau2_slope']:.4g}",
                f"{f['tau2_intercept']:.4g} (r = {f['centre']:.3g})",
                f"{f['tau2_cov']:.4g}",
                ", ".join(clipped) or "neither",
                f"{f['population_slope']:.4g} r {'+' if intercept >= 0 else '-'} {abs(intercept):.4g}",
                f"{f['n_shrunk']} / {f['n_sparse']}",
                negative,
            ]
        )
    return (
        "PEBS fitted on all ratings of each corpus (the maps `rewardsmith calibrate` saves):\n\n"
        + table(
            [
                "corpus",
                "tau^2 slope",
                "tau^2 intercept (at the centre)",
                "tau^2 covariance",
                "tau^2 clipped",
                "population map",
                "raters shrunk / sparse",
                "non-positive shrunk slopes (rater)",
            ],
            rows,
        )
        + "\n\n"
        + _source(*(n for n, _ in CORPORA.values()))
    )


def block_data() -> str:
    rows, notes = [], []
    for corpus in CORPORA:
        name, title = CORPORA[corpus]
        m = load(name)
        d = m["data"]
        dropped = (
            ", ".join(f"{k.removeprefix('dropped_')} {v:,}" for k, v in d.items() if k.startswith("dropped_") and v)
            or "none"
        )
        rows.append(
            [
                title,
                f"{d['rows_read']:,}",
                f"{d['ratings_kept']:,}",
                dropped,
                str(d["raters"]),
                str(d["items"]),
                str(d.get("raters_single_model_score", 0)),
                f"{m['heldout_ratings_per_seed'] / m['raters_evaluated']:.1f}",
                f"{m['fit_ratings_per_rater_mean']:.1f}",
            ]
        )
        notes += [f"- {title}, {k.replace('_', ' ')}: {v}" for k, v in m["ratings"].get("notes", {}).items()]
        demo = m["ratings"].get("demographic_columns") or []
        notes.append(f"- {title}, demographic columns: {', '.join(demo) if demo else 'none'}")
    return (
        table(
            [
                "corpus",
                "rows read",
                "ratings kept",
                "dropped",
                "raters",
                "items",
                "raters with one model score",
                "held-out ratings / rater / seed",
                "fit ratings / rater (mean)",
            ],
            rows,
        )
        + "\n\n"
        + "\n".join(notes)
        + "\n\n"
        + _source(*(n for n, _ in CORPORA.values()))
    )


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def block_speed() -> str:
    b = json.loads((BENCH / "pebs.json").read_text(encoding="utf-8"))
    rows = []
    for c in b["comparisons"]:
        dec = 3 if c["rmse_pooled"] >= 10 else 4
        rows.append(
            [
                c["data"],
                str(c["raters"]),
                f"{c['ratings']:,}",
                _seconds(c["pebs_s"]),
                _seconds(c["mixedlm_s"]) + ("" if c["mixedlm_converged"] else " (not converged)"),
                f"{c['speedup']:.0f}x",
                *[f"{c[k]:.{dec}f}" for k in ("rmse_pebs", "rmse_mixedlm", "rmse_pooled")],
                f"{c['rmse_ratio_pebs_over_mixedlm']:.5f}",
                str(c["seeds"]),
            ]
        )
    s, machine = b["scale"], b["machine"]
    scale = (
        f"Scale: {s['ratings']:,} synthetic ratings from {s['raters']:,} raters "
        f"({s['ratings'] / s['raters']:.0f} per rater on average): sufficient statistics with numpy plus the "
        f"PEBS fit {_seconds(s['numpy_s'])}; the same out of core through DuckDB from a "
        f"{s['parquet_mb']:.0f} MB Parquet file {_seconds(s['duckdb_s'])} (writing the file, not included: "
        f"{_seconds(s['parquet_write_s'])}); the two paths give "
        f"{'identical' if s['duckdb_matches_numpy'] else 'DIFFERENT'} maps; RMSE of the fitted slopes against "
        f"the true ones {s['numpy_slope_rmse_vs_truth']:.3f}."
    )
    return (
        f"Fit times are the best of repeated fits (wall clock, {machine['cpus']} CPUs, Python "
        f"{machine['python']}; PEBS includes computing the sufficient statistics from the table), averaged over "
        "the hold-out seeds; RMSE on one 20 % within-rater hold-out per seed. The benchmark records no interval, "
        "so it makes no claim that either method has the lower RMSE.\n\n"
        + table(
            [
                "data",
                "raters",
                "ratings",
                "PEBS fit",
                "MixedLM fit",
                "speed-up",
                "RMSE PEBS",
                "RMSE MixedLM",
                "RMSE pooled",
                "RMSE PEBS / MixedLM",
                "seeds",
            ],
            rows,
        )
        + "\n\n"
        + scale
        + f"\n\nSource: `benchmarks/results/pebs.json`; command: "
        f"`{b.get('command', PEBS_BENCH_COMMAND)}`."
    )


BLOCKS: dict[str, Callable[[], str]] = {
    "calibration": block_summary,
    "calibration-claim-table": block_claim_table,
    "calibration-choices": block_choices,
    "calibration-data": block_data,
    "calibration-pluriharms": block_pluriharms,
    "calibration-dices": block_dices,
    "calibration-pluriharms-rm": block_pluriharms_rm,
    "calibration-dices-rm": block_dices_rm,
    "calibration-full-fit": block_full_fit,
    "calibration-variants": block_variants,
    "calibration-forecast": block_forecast,
    "calibration-oracle": block_oracle,
    "calibration-demographics": block_demographics,
    "calibration-speed": block_speed,
}
