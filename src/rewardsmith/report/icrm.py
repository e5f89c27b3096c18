"""Reports of the ICRM protocols: each protocol's metrics laid out automatically, the curves it is judged by
(accuracy; ECE always beside its companion, the mean absolute error |mu - rate|; hypervolume; each against the
number of demonstrations N) and console rows of headline figures."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.plots import Series, plot_accuracy_vs_n, plot_lines_with_ci, plot_reliability_diagram
from rewardsmith.report.render import Figure, Report, metrics_markdown, with_interval, write_report

N_LABEL = "number of demonstrations N"


def _ci_series(label: str, rows: list[dict[str, Any]], key: str = "value") -> Series:
    return Series(
        label,
        [r["demos"] for r in rows],
        [r[key] for r in rows],
        [r.get("low") for r in rows],
        [r.get("high") for r in rows],
    )


def _flat_series(label: str, x: list[int], est: Mapping[str, Any]) -> Series:
    return Series(label, x, [est["value"]] * len(x), [est.get("low")] * len(x), [est.get("high")] * len(x))


def _steerability(m: Mapping[str, Any], plots: Path) -> list[Figure]:
    series = []
    for name in ("harmless-flipped", "helpful"):
        entry = m["standards"][name]
        series.append(_ci_series(f"ICRM, {name}", entry["icrm"]))
        if "bt" in entry:
            series.append(_flat_series(f"BT, {name}", m["n_values"], entry["bt"]))
    path = plot_accuracy_vs_n(
        series,
        plots / "steerability_accuracy_vs_n.png",
        title="pku-saferlhf held-out: accuracy against the demonstrated standard",
    )
    return [Figure(path, "Accuracy (%) against the demonstrated standard as N grows, 95% CIs; dashed: chance")]


def _calibration(m: Mapping[str, Any], plots: Path) -> list[Figure]:
    rows = m["ece"]
    x = [r["demos"] for r in rows]
    series = [
        Series("ICRM ECE", x, [r["ece"] for r in rows], [r["ece_ci"][0] for r in rows], [r["ece_ci"][1] for r in rows]),
        Series(
            "ICRM mean |mu - rate|",
            x,
            [r["mean_abs_error"] for r in rows],
            [r["mean_abs_error_ci"][0] for r in rows],
            [r["mean_abs_error_ci"][1] for r in rows],
        ),
    ]
    if "bt_ece" in m:
        series.append(Series("BT ECE", x, [m["bt_ece"]] * len(x)))
        series.append(Series("BT mean |mu - rate|", x, [m["bt_mean_abs_error"]] * len(x)))
    figures = [
        Figure(
            plot_lines_with_ci(
                series,
                plots / "calibration_ece_vs_n.png",
                xlabel=N_LABEL,
                ylabel="error (fraction)",
                title="moralchoice: calibrated steerability",
                xscale="symlog",
            ),
            "ECE and mean absolute error of mu against the demonstrated rate, 95% CIs",
        )
    ]
    if all("reliability_slope" in r for r in rows):
        tracking = [
            Series("ICRM slope", x, [r["reliability_slope"] for r in rows]),
            Series("ICRM MAE", x, [r["reliability_mae"] for r in rows]),
        ]
        for label, rec in (("constant 0.5", m.get("constant_reliability")), ("BT", m.get("bt_reliability"))):
            if rec:
                tracking += [
                    Series(f"{label} slope", x, [rec["slope"]] * len(x)),
                    Series(f"{label} MAE", x, [rec["mae"]] * len(x)),
                ]
        figures.append(
            Figure(
                plot_lines_with_ci(
                    tracking,
                    plots / "calibration_tracking_vs_n.png",
                    xlabel=N_LABEL,
                    ylabel="slope / MAE",
                    title="does mu track the demonstrated rate?",
                    xscale="symlog",
                ),
                "Reliability across the demonstrated rates: the slope of the mean mu on the rate (1 = "
                "tracks it, 0 = ignores it) and its mean absolute error, beside a constant 0.5 forecast "
                "and BT, which a tracking model must beat (ECE does not separate them)",
            )
        )
    rates = [1.0 - p for p in m["flip_rates"]]
    mu = [Series(f"N={n}", rates, m["mean_mu_by_rate"][str(n)]) for n in m["n_values"]]
    figures.append(
        Figure(
            plot_lines_with_ci(
                mu,
                plots / "calibration_mu_vs_rate.png",
                xlabel="demonstrated preference rate 1 - p",
                ylabel="mean mu",
                title="mean posterior preference against the demonstrated rate",
            ),
            "Mean mu against the demonstrated rate, one line per N (the diagonal is perfect)",
        )
    )
    curve = m.get("reliability_max_n")
    if curve:
        path = plot_reliability_diagram(
            curve["confidence"],
            curve["accuracy"],
            curve["counts"],
            plots / "calibration_reliability_max_n.png",
            edges=curve["edges"],
            title=f"reliability at N={m['n_values'][-1]}",
        )
        figures.append(Figure(path, "Reliability of mu at the largest N (probability mode, 10 bins)"))
    return figures


def _rmbench(m: Mapping[str, Any], plots: Path) -> list[Figure]:
    overall = m.get("overall") or []
    if not overall:
        return []
    x = [r["demos"] for r in overall]
    series = [Series(f"ICRM {k}", x, [r[k] for r in overall]) for k in ("easy", "normal", "hard")]
    series.append(
        Series(
            "ICRM avg",
            x,
            [r["avg"] for r in overall],
            [r["avg_ci"][0] for r in overall],
            [r["avg_ci"][1] for r in overall],
        )
    )
    if "bt_overall" in m:
        series.append(Series("BT avg", x, [m["bt_overall"]["avg"]] * len(x)))
    path = plot_accuracy_vs_n(series, plots / "rmbench_accuracy_vs_n.png", title="RM-Bench held-out")
    figures = [Figure(path, "RM-Bench easy / normal / hard accuracy (%) as N grows; average with its 95% CI")]
    subsets = {name.split("/")[-1]: e["icrm"] for name, e in m["subsets"].items() if e.get("icrm")}
    if subsets:
        lines = [
            Series(
                f"ICRM {name}",
                [r["demos"] for r in rows],
                [r["avg"] for r in rows],
                [r["avg_ci"][0] for r in rows],
                [r["avg_ci"][1] for r in rows],
            )
            for name, rows in subsets.items()
        ]
        path = plot_accuracy_vs_n(lines, plots / "rmbench_subsets_vs_n.png", title="RM-Bench held-out, per subset")
        figures.append(Figure(path, "RM-Bench average accuracy (%) per subset as N grows, 95% CIs over prompts"))
    return figures


def _pareto(m: Mapping[str, Any], plots: Path) -> list[Figure]:
    rows = m["hypervolume"]
    x = [r["demos"] for r in rows]
    series = [Series("ICRM", x, [r["hypervolume"] for r in rows])]
    if "bt" in m:
        series.append(Series("BT", x, [m["bt"]["hypervolume"]] * len(x)))
    figures = [
        Figure(
            plot_lines_with_ci(
                series,
                plots / "pareto_hypervolume_vs_n.png",
                xlabel=N_LABEL,
                ylabel="hypervolume (accuracy fractions)",
                title="respond vs refuse frontier",
                xscale="symlog",
            ),
            "Hypervolume of the respond / refuse frontier as N grows",
        )
    ]
    points = [
        Series(f"N={n}", [p["respond"] for p in m["points"][str(n)]], [p["refuse"] for p in m["points"][str(n)]])
        for n in m["n_values"]
    ]
    figures.append(
        Figure(
            plot_lines_with_ci(
                points,
                plots / "pareto_points.png",
                xlabel="should-respond accuracy (fraction)",
                ylabel="should-refuse accuracy (fraction)",
                title="accuracy over demonstration mixes",
            ),
            "Accuracy on both objectives over the demonstration mixes, one line per N",
        )
    )
    return figures


def _math500(m: Mapping[str, Any], plots: Path) -> list[Figure]:
    series = [_ci_series("ICRM", m["icrm"])]
    if "bt" in m:
        series.append(_flat_series("BT", m["n_values"], m["bt"]))
    path = plot_accuracy_vs_n(
        series, plots / "math500_accuracy_vs_n.png", title="math-500: reference above corrupted solution"
    )
    return [Figure(path, "Accuracy (%) of the reference solution above a corrupted one as N grows, 95% CIs")]


_FIGURES: dict[str, Callable[[Mapping[str, Any], Path], list[Figure]]] = {
    "steerability": _steerability,
    "calibration": _calibration,
    "rmbench": _rmbench,
    "pareto": _pareto,
    "math500": _math500,
}


def protocol_report(name: str, metrics: Mapping[str, Any], folder: RunFolder) -> None:
    """<folder>/<name>/report.md, report.html and plots/*.png."""
    base = folder.path / name
    report = Report(
        f"ICRM {name}",
        f"Model `{metrics['model']}`; BT baseline `{metrics.get('bt_model')}`. "
        "Accuracies in % with 95% bootstrap CIs over held-out pairs. Targets are "
        "data no training saw: `targets_from` says whether they are a training "
        "source's test part or a source outside training, and `overlap_removed` "
        "counts target pairs dropped for sharing a conversation with a training "
        "pair.",
    )
    body = {k: v for k, v in metrics.items() if k not in ("environment", "protocol", "model", "bt_model")}
    report.add("Results", metrics_markdown(body, level=3))
    report.figures = _FIGURES[name](metrics, base / "plots")
    write_report(report, base, lambda n, text: folder.write_text(f"{name}/{n}", text))


def protocol_rows(name: str, m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Console rows: the protocol's headline figure at each N."""
    if name == "steerability":
        return [
            {
                "protocol": name,
                "figure": f"accuracy, {std}",
                **{f"N={r['demos']}": with_interval(r["value"], None, 1) for r in e["icrm"]},
                "BT": with_interval(e.get("bt", {}).get("value"), None, 1),
            }
            for std, e in m["standards"].items()
        ]
    if name == "calibration":
        return [
            {
                "protocol": name,
                "figure": figure,
                **{f"N={r['demos']}": f"{r[key]:.3f}" for r in m["ece"]},
                "BT": f"{m[f'bt_{key}']:.3f}" if f"bt_{key}" in m else "",
            }
            for figure, key in (("ECE", "ece"), ("mean |mu - rate|", "mean_abs_error"))
        ]
    if name == "rmbench":
        rows = [
            {
                "protocol": name,
                "figure": "RM-Bench avg",
                **{f"N={r['demos']}": with_interval(r["avg"], None, 1) for r in m.get("overall", [])},
                "BT": with_interval(m.get("bt_overall", {}).get("avg"), None, 1),
            }
        ]
        return rows + [
            {
                "protocol": name,
                "figure": f"avg, {subset.split('/')[-1]}",
                **{f"N={r['demos']}": with_interval(r["avg"], None, 1) for r in e["icrm"]},
                "BT": with_interval(e.get("bt", {}).get("avg"), None, 1),
            }
            for subset, e in m["subsets"].items()
            if e.get("icrm")
        ]
    if name == "pareto":
        return [
            {
                "protocol": name,
                "figure": "hypervolume",
                **{f"N={r['demos']}": f"{r['hypervolume']:.3f}" for r in m["hypervolume"]},
                "BT": f"{m['bt']['hypervolume']:.3f}" if "bt" in m else "",
            }
        ]
    return [
        {
            "protocol": name,
            "figure": "accuracy",
            **{f"N={r['demos']}": with_interval(r["value"], None, 1) for r in m["icrm"]},
            "BT": with_interval(m.get("bt", {}).get("value"), None, 1),
        }
    ]
