"""Markdown report and plots of a calibration run (reads the metrics; computes nothing new)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rewardsmith.calibrate.maps import CalibrationMaps

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not np.isfinite(value):
            return "-"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.2e}"
        return f"{value:.{digits}f}"
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"[{_fmt(value[0], 2)}, {_fmt(value[1], 2)}]"
    return str(value)


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> list[str]:
    lines = [
        "| " + " | ".join(title for _, title in columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(key)) for key, _ in columns) + " |")
    return lines


def method_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per method of a summarise() result, for the results table."""
    rows = []
    for name, row in summary["tables"]["methods"].items():
        rows.append({"method": name, **row})
    return rows


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


def write_report(
    out_dir: Path,
    metrics: dict[str, Any],
    summary: dict[str, Any],
    sweep: dict[int, dict[str, Any]],
    maps: CalibrationMaps | None,
) -> Path:
    """Writes report.md and plots/*.png under out_dir; returns the report path."""
    out_dir = Path(out_dir)
    plots = write_plots(out_dir / "plots", summary, sweep, maps)
    flat = summary["flat"]
    data = metrics.get("data", {})
    lines = [f"# Calibration report: {metrics.get('ratings', {}).get('name', '')}", ""]
    cfg = metrics.get("config", {})
    lines += [
        f"Within-rater hold-out: {_fmt(cfg.get('holdout'), 2)} of each rater's ratings held out, "
        f"{cfg.get('seeds')} seeds; raters are the units of the paired tests and of the bootstrap "
        f"({cfg.get('bootstrap')} resamples). Gain = 100 (1 - RMSE / RMSE of the reference).",
        "",
    ]
    lines += ["## Data", ""]
    lines += [f"- {k}: {v}" for k, v in data.items()]
    for k, v in metrics.get("ratings", {}).get("notes", {}).items():
        lines.append(f"- {k}: {v}")
    lines += ["", "## Held-out results (all fit ratings)", ""]
    lines += _table(method_rows(summary), METHOD_COLUMNS)
    lines += [
        "",
        f"Pair accuracy of the raw model score: {_fmt(flat.get('pair_accuracy.model_score'), 4)}. "
        "Maps with positive slopes keep every rater's pair accuracy unchanged: "
        + ", ".join(
            f"{m} {'yes' if r['pair_accuracy_invariant'] else 'NO'}"
            for m, r in summary["tables"]["methods"].items()
        ),
        "",
    ]
    if sweep:
        lines += ["## Fewer fit ratings per rater (held-out parts unchanged)", ""]
        sweep_rows = []
        for size, summ in sorted(sweep.items(), reverse=True):
            for row in method_rows(summ):
                sweep_rows.append({"fit_per_rater": size, **row})
        lines += _table(
            sweep_rows,
            [
                ("fit_per_rater", "fit ratings / rater"),
                *METHOD_COLUMNS[:6],
                ("gain_vs_ols_pct", "gain vs OLS %"),
                ("gain_vs_ols_ci", "95% CI"),
                ("vs_ols_wilcoxon_p", "p vs OLS"),
            ],
        )
        lines.append("")
    lines += ["## Forecast versus realised gain of PEBS over pooled", ""]
    fc_rows = [
        {
            "setting": "all fit ratings",
            "forecast": flat.get("forecast_gain_pct"),
            "realised": flat.get("gain_vs_pooled_pct.pebs"),
            "forecast_ols": flat.get("forecast_gain_ols_pct"),
            "realised_ols": flat.get("gain_vs_pooled_pct.ols"),
        }
    ]
    for size, summ in sorted(sweep.items(), reverse=True):
        f = summ["flat"]
        fc_rows.append(
            {
                "setting": f"{size} fit ratings / rater",
                "forecast": f.get("forecast_gain_pct"),
                "realised": f.get("gain_vs_pooled_pct.pebs"),
                "forecast_ols": f.get("forecast_gain_ols_pct"),
                "realised_ols": f.get("gain_vs_pooled_pct.ols"),
            }
        )
    lines += _table(
        fc_rows,
        [
            ("setting", "setting"),
            ("forecast", "PEBS forecast %"),
            ("realised", "PEBS realised %"),
            ("forecast_ols", "OLS forecast %"),
            ("realised_ols", "OLS realised %"),
        ],
    )
    lines += [
        "",
        f"Pilot: {cfg.get('pilot_per_rater')} ratings per rater drawn from each rater's fit part; the "
        "forecast is for the full fit part (closed form, calibrate/forecast.py).",
        "",
    ]
    lines += ["## RMSE by rater fit size", ""]
    by_size = summary["tables"]["by_sample_size"]
    names = list(summary["tables"]["methods"])
    lines += _table(
        by_size, [("fit_ratings", "fit ratings"), ("raters", "raters"), *[(f"rmse.{m}", m) for m in names]]
    )
    lines += _audit_lines(summary["tables"].get("audit") or {}, "all fit ratings")
    if sweep:
        smallest = min(sweep)
        lines += _audit_lines(
            sweep[smallest]["tables"].get("audit") or {}, f"{smallest} fit ratings per rater"
        )
    pebs = metrics.get("pebs_full_fit", {})
    if pebs:
        lines += ["", "## PEBS fitted on all ratings (the saved maps)", ""]
        lines += [
            f"- {k}: {_fmt(v) if not isinstance(v, list) else (', '.join(map(str, v)) or 'none')}"
            for k, v in pebs.items()
        ]
    lines += ["", "## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def _audit_lines(audit: dict[str, Any], setting: str) -> list[str]:
    """Markdown of one audit table (by group) and the raters shrunk hardest."""
    lines: list[str] = []
    if audit.get("by_group"):
        lines += [
            "",
            f"## Audit: who is shrunk hardest and what it costs them ({setting})",
            "",
            "Shrinkage = 1 - w (the weight left on a rater's own estimate is w), averaged over seeds. "
            "Gain = 100 (1 - RMSE_PEBS / RMSE_ref) within the group.",
            "",
        ]
        lines += _table(
            audit["by_group"],
            [
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
            ],
        )
    if audit.get("hardest_shrunk"):
        lines += ["", f"### Raters shrunk hardest (slope), {setting}", ""]
        extra = [
            c
            for c in audit["hardest_shrunk"][0]
            if c
            not in (
                "rater_id",
                "fit_ratings",
                "shrink_slope",
                "shrink_intercept",
                "rmse_pooled",
                "rmse_pebs",
                "rmse_ols",
            )
        ]
        lines += _table(
            audit["hardest_shrunk"],
            [
                ("rater_id", "rater"),
                ("fit_ratings", "fit ratings"),
                ("shrink_slope", "shrink slope"),
                ("shrink_intercept", "shrink intercept"),
                ("rmse_pooled", "RMSE pooled"),
                ("rmse_ols", "RMSE OLS"),
                ("rmse_pebs", "RMSE PEBS"),
                *[(c, c) for c in extra[:3]],
            ],
        )
    return lines


def write_plots(
    plot_dir: Path, summary: dict[str, Any], sweep: dict[int, dict[str, Any]], maps: CalibrationMaps | None
) -> list[Path]:
    """slopes_before_after.png (per-rater OLS vs shrunk slopes) and rmse_by_fit_size.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if maps is not None and "ols_slope" in maps.diagnostics:
        ols = np.asarray(maps.diagnostics["ols_slope"], dtype=float)
        ok = np.isfinite(ols)
        fig, ax = plt.subplots(figsize=(5.5, 5))
        size = 10 + 60 * maps.n_ratings[ok] / max(float(maps.n_ratings.max()), 1.0)
        ax.scatter(ols[ok], maps.slope[ok], s=size, alpha=0.6, label="rater (size ~ ratings)")
        lo, hi = float(np.nanmin(ols[ok])), float(np.nanmax(ols[ok]))
        ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="no shrinkage")
        ax.axhline(maps.population_slope, color="C3", lw=1, label="population slope")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("per-rater OLS slope (before)")
        ax.set_ylabel("PEBS slope (after shrinkage)")
        ax.set_title("Per-rater slopes before and after shrinkage")
        ax.legend(fontsize=8)
        written.append(_save_figure(fig, plot_dir / "slopes_before_after.png"))
    points: dict[str, list[tuple[float, float]]] = {}
    for summ in [summary, *sweep.values()]:
        n_fit = summ["flat"]["fit_ratings_per_rater_mean"]
        for name, row in summ["tables"]["methods"].items():
            points.setdefault(name, []).append((n_fit, row["rmse"]))
    if points:
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for name, pts in points.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_xlabel("fit ratings per rater (mean)")
        ax.set_ylabel("held-out RMSE")
        ax.set_title("Held-out RMSE by rater sample size")
        ax.legend(fontsize=8)
        written.append(_save_figure(fig, plot_dir / "rmse_by_fit_size.png"))
    return written


def _save_figure(fig: Figure, path: Path) -> Path:
    """Writes `fig` to `path` (PNG, 120 dpi), closes it and returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
