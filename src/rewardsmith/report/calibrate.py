"""The report of a calibration run: the data, held-out RMSE of every method with CIs and paired tests, the
fit-size sweep, forecast against realised gain, RMSE by rater sample size, the audit of raters shrunk hardest,
and the PEBS fit on all ratings, with the per-rater slope and RMSE-by-fit-size plots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.plots import Series, plot_lines_with_ci, plot_slopes
from rewardsmith.report.render import Figure, Report, markdown_table, write_report


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    return markdown_table(rows, [key for key, _ in columns], headers=[title for _, title in columns], digits=3)


def method_rows(tables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per method of a summary's tables, for the results table."""
    return [{"method": name, **row} for name, row in tables["methods"].items()]


METHOD_COLUMNS = [
    ("method", "method"),
    ("rmse", "RMSE"),
    ("rmse_seed_sd", "sd over seeds"),
    ("gain_vs_pooled_pct", "gain vs pooled %"),
    ("gain_ci", "95% CI"),
    ("vs_pooled_wilcoxon_p", "p (Wilcoxon)"),
    ("vs_pooled_t_p", "p (paired t)"),
    ("gain_vs_ols_pct", "gain vs OLS %"),
    ("vs_ols_wilcoxon_p", "p vs OLS"),
    ("nll", "NLL"),
    ("pair_accuracy", "pair acc."),
    ("nonpositive_slopes", "slopes <= 0"),
    ("fit_seconds", "fit s"),
]


def calibration_report(metrics: Mapping[str, Any], folder: RunFolder) -> None:
    """report.md, report.html and plots/*.png of a calibration run from its metrics."""
    tables = metrics["tables"]
    main, sweep, sweep_flat = tables["main"], tables["fit_size"], tables.get("fit_size_flat", {})
    cfg = metrics.get("config", {})
    ev = cfg.get("evaluation", {})
    report = Report(
        f"Calibration report: {metrics.get('ratings', {}).get('name', '')}",
        f"Within-rater hold-out: {ev.get('holdout')} of each rater's ratings held out, {ev.get('seeds')} "
        "hold-out splits; raters are the units of the paired tests, and each CI resamples the splits and, "
        f"independently, the raters ({ev.get('bootstrap')} resamples). Gain = 100 (1 - RMSE / RMSE of the "
        "reference).",
    )
    data = [f"- {k}: {v}" for k, v in metrics.get("data", {}).items()]
    data += [f"- {k}: {v}" for k, v in metrics.get("ratings", {}).get("notes", {}).items()]
    report.add("Data", "\n".join(data))
    invariant = ", ".join(f"{m} {'yes' if r['pair_accuracy_invariant'] else 'NO'}" for m, r in main["methods"].items())
    report.add(
        "Held-out results (all fit ratings)",
        _table(method_rows(main), METHOD_COLUMNS) + "\n\n"
        f"Pair accuracy of the raw model score: {metrics.get('pair_accuracy.model_score', float('nan')):.4f}. "
        f"Maps with positive slopes keep every rater's pair accuracy unchanged: {invariant}.",
    )
    if sweep:
        rows = [
            {"fit_per_rater": int(size), **row}
            for size in sorted(sweep, key=int, reverse=True)
            for row in method_rows(sweep[size])
        ]
        report.add(
            "Fewer fit ratings per rater (held-out parts unchanged)",
            _table(
                rows,
                [
                    ("fit_per_rater", "fit ratings / rater"),
                    *METHOD_COLUMNS[:6],
                    ("gain_vs_ols_pct", "gain vs OLS %"),
                    ("gain_vs_ols_ci", "95% CI"),
                    ("vs_ols_wilcoxon_p", "p vs OLS"),
                ],
            ),
        )
    fc_rows = [
        {
            "setting": "all fit ratings",
            "forecast": metrics.get("forecast_gain_pct"),
            "realised": metrics.get("gain_vs_pooled_pct.pebs"),
            "forecast_ols": metrics.get("forecast_gain_ols_pct"),
            "realised_ols": metrics.get("gain_vs_pooled_pct.ols"),
        }
    ]
    for size in sorted(sweep_flat, key=int, reverse=True):
        f = sweep_flat[size]
        fc_rows.append(
            {
                "setting": f"{size} fit ratings / rater",
                "forecast": f.get("forecast_gain_pct"),
                "realised": f.get("gain_vs_pooled_pct.pebs"),
                "forecast_ols": f.get("forecast_gain_ols_pct"),
                "realised_ols": f.get("gain_vs_pooled_pct.ols"),
            }
        )
    report.add(
        "Forecast versus realised gain of PEBS over pooled",
        _table(
            fc_rows,
            [
                ("setting", "setting"),
                ("forecast", "PEBS forecast %"),
                ("realised", "PEBS realised %"),
                ("forecast_ols", "OLS forecast %"),
                ("realised_ols", "OLS realised %"),
            ],
        )
        + f"\n\nPilot: {ev.get('pilot_per_rater')} ratings per rater drawn from each rater's fit part; the "
        "forecast is for the full fit part (closed form, calibrate/forecast.py).",
    )
    names = list(main["methods"])
    report.add(
        "RMSE by rater fit size",
        _table(
            main["by_sample_size"],
            [("fit_ratings", "fit ratings"), ("raters", "raters"), *[(f"rmse.{m}", m) for m in names]],
        ),
    )
    for heading, text in _audit_sections(main.get("audit") or {}, "all fit ratings"):
        report.add(heading, text)
    if sweep:
        smallest = min(sweep, key=int)
        for heading, text in _audit_sections(sweep[smallest].get("audit") or {}, f"{smallest} fit ratings per rater"):
            report.add(heading, text)
    pebs = {k: v for k, v in metrics.get("pebs_full_fit", {}).items() if k != "slopes"}
    if pebs:
        lines = []
        for k, v in pebs.items():
            shown = (
                ", ".join(map(str, v)) or "none"
                if isinstance(v, list)
                else (f"{v:.4g}" if isinstance(v, float) else str(v))
            )
            lines.append(f"- {k}: {shown}")
        report.add("PEBS fitted on all ratings (the saved maps)", "\n".join(lines))
    report.figures = _figures(metrics, folder)
    write_report(report, folder.path, folder.write_text)


def _figures(metrics: Mapping[str, Any], folder: RunFolder) -> list[Figure]:
    """slopes_before_after.png (per-rater OLS against shrunk slopes) and rmse_by_fit_size.png."""
    plots = folder.path / "plots"
    figures = []
    slopes = metrics.get("pebs_full_fit", {}).get("slopes")
    if slopes:
        path = plot_slopes(
            slopes["ols"],
            slopes["shrunk"],
            slopes["n_ratings"],
            metrics["pebs_full_fit"].get("population_slope"),
            plots / "slopes_before_after.png",
        )
        figures.append(
            Figure(
                path,
                "Per-rater slopes before (OLS) and after PEBS shrinkage; marker area grows "
                "with the rater's number of ratings",
            )
        )
    tables = metrics["tables"]
    points: dict[str, list[tuple[float, float]]] = {}
    settings = [(metrics["fit_ratings_per_rater_mean"], tables["main"])]
    settings += [(tables["fit_size_flat"][k]["fit_ratings_per_rater_mean"], t) for k, t in tables["fit_size"].items()]
    for n_fit, t in settings:
        for name, row in t["methods"].items():
            points.setdefault(name, []).append((float(n_fit), float(row["rmse"])))
    if points:
        series = [
            Series(name, [p[0] for p in sorted(pts)], [p[1] for p in sorted(pts)]) for name, pts in points.items()
        ]
        path = plot_lines_with_ci(
            series,
            plots / "rmse_by_fit_size.png",
            xlabel="fit ratings per rater (mean)",
            ylabel="held-out RMSE (rating scale)",
            title="Held-out RMSE by rater sample size",
            xscale="log",
        )
        figures.append(Figure(path, "Held-out RMSE of every method against the number of fit ratings per rater"))
    return figures


_AUDIT_GROUP_COLUMNS = [
    ("column", "column"),
    ("group", "group"),
    ("raters", "raters"),
    ("mean_fit_ratings", "fit ratings"),
    ("shrink_slope", "shrink slope"),
    ("shrink_intercept", "shrink intercept"),
    ("rmse_pooled", "RMSE pooled"),
    ("rmse_ols", "RMSE OLS"),
    ("rmse_pebs", "RMSE PEBS"),
    ("gain_vs_pooled_pct", "gain vs pooled %"),
    ("gain_vs_ols_pct", "gain vs OLS %"),
]
_HARDEST_COLUMNS = [
    ("rater_id", "rater"),
    ("fit_ratings", "fit ratings"),
    ("shrink_slope", "shrink slope"),
    ("shrink_intercept", "shrink intercept"),
    ("rmse_pooled", "RMSE pooled"),
    ("rmse_ols", "RMSE OLS"),
    ("rmse_pebs", "RMSE PEBS"),
]


def _audit_sections(audit: Mapping[str, Any], setting: str) -> list[tuple[str, str]]:
    """(heading, markdown) of one audit table (by group) and of the raters shrunk hardest."""
    sections: list[tuple[str, str]] = []
    if audit.get("by_group"):
        sections.append(
            (
                f"Audit: who is shrunk hardest and what it costs them ({setting})",
                "Shrinkage = 1 - w (the weight left on a rater's own estimate is w), averaged over seeds. "
                "Gain = 100 (1 - RMSE_PEBS / RMSE_ref) within the group.\n\n"
                + _table(audit["by_group"], _AUDIT_GROUP_COLUMNS),
            )
        )
    if audit.get("hardest_shrunk"):
        known = {key for key, _ in _HARDEST_COLUMNS}
        extra = [c for c in audit["hardest_shrunk"][0] if c not in known][:3]
        sections.append(
            (
                f"Raters shrunk hardest (slope), {setting}",
                _table(audit["hardest_shrunk"], [*_HARDEST_COLUMNS, *[(c, c) for c in extra]]),
            )
        )
    return sections
