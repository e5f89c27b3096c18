"""PNG figures for reports. Plotting only: the numbers come in already computed.

matplotlib is imported inside each function (importing rewardsmith stays fast), and figures are drawn on
a `matplotlib.figure.Figure` attached to an Agg canvas: no pyplot, no global backend switch, no windows,
safe in threads and in notebooks. Missing values (None or NaN) are skipped. Every function writes a PNG
(parent folders created) and returns its path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from rewardsmith.evaluate.charts import Series, Values

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Per-point values (Values) may hold None for a missing value; intervals are [low, high] or None. Series (one curve)
# lives with the charts-as-data description in rewardsmith.evaluate.charts and is re-exported here.
Interval = Sequence[float | None]
Intervals = Sequence[Interval | None]


def _floats(values: Values) -> NDArray[np.float64]:
    """Float array with None turned into NaN."""
    return np.asarray([np.nan if v is None else v for v in np.asarray(values, dtype=object).ravel()], dtype=np.float64)


def _new_figure(width: float = 6.0, height: float = 4.0) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _null_formatter() -> Any:
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def _save(figure: Figure, path: str | Path) -> Path:
    """Writes the PNG atomically (a link in its place is replaced, never written through)."""
    from rewardsmith.io.atomic import atomic_write_bytes

    # "tight" grows the canvas to whatever the layout left outside it (a long legend, a y-label), never clips it.
    return atomic_write_bytes(path, lambda fh: figure.savefig(fh, format="png", bbox_inches="tight", pad_inches=0.1))


def _legend_below(figure: Figure, axes: Axes) -> None:
    """The axes' legend as a figure legend on its own row(s) under the plot, in as many columns as fit the
    figure's width (a row of five long names on a narrow figure would be cut at its edges)."""
    handles, labels = axes.get_legend_handles_labels()
    if not handles:
        return
    widest = max(len(label) for label in labels)
    per_column = 0.55 + 0.075 * widest  # inches: the marker, the padding and the text at fontsize "small"
    ncol = max(1, min(len(labels), int(figure.get_figwidth() // per_column)))
    figure.legend(handles, labels, fontsize="small", loc="outside lower center", ncol=ncol)


def _errors(values: NDArray[np.float64], intervals: Intervals | None) -> NDArray[np.float64] | None:
    """Asymmetric error bar lengths (2, K) from [low, high] intervals; missing bounds give 0."""
    if intervals is None:
        return None
    bounds = np.array([_floats(list(iv)) if iv is not None else [np.nan, np.nan] for iv in intervals])
    if bounds.shape != (len(values), 2):
        raise ValueError(f"expected {len(values)} [low, high] intervals, got shape {bounds.shape}")
    lower = np.nan_to_num(values - bounds[:, 0], nan=0.0).clip(min=0)
    upper = np.nan_to_num(bounds[:, 1] - values, nan=0.0).clip(min=0)
    return np.vstack([lower, upper])


def _finish(axes: Axes, title: str, xlabel: str, ylabel: str) -> None:
    if title:
        axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)


def plot_lines_with_ci(
    series: Sequence[Series],
    path: str | Path,
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    xscale: str = "linear",
    reference: float | None = None,
) -> Path:
    """Line plot of several series, each with a shaded CI band where `low` and `high` are given.

    xscale: "linear", "log" or "symlog" (base 2, linear below 1: suits N = 0, 1, 2, 4, ...).
    reference: optional horizontal dashed line (e.g. chance at 50). Returns the PNG path.
    """
    figure = _new_figure()
    axes = figure.add_subplot()
    for item in series:
        x, y = _floats(item.x), _floats(item.y)
        (line,) = axes.plot(x, y, marker="o", markersize=3, label=item.label)
        if item.low is not None and item.high is not None:
            axes.fill_between(x, _floats(item.low), _floats(item.high), color=line.get_color(), alpha=0.2, linewidth=0)
    if reference is not None:
        axes.axhline(reference, color="grey", linestyle="--", linewidth=1)
    if xscale == "symlog":
        axes.set_xscale("symlog", base=2, linthresh=1)
        xs = np.unique(np.concatenate([_floats(item.x) for item in series] or [np.empty(0)]))
        xs = xs[np.isfinite(xs)]
        if xs.size:
            # Symlog autoscaling pads into negative x; pin the range and label the measured N plainly.
            axes.set_xlim(
                float(xs[0]) - 0.25 if xs[0] < 1 else float(xs[0]) * 0.9, max(float(xs[-1]) * 1.1, float(xs[-1]) + 0.25)
            )
            if xs.size <= 12:
                axes.set_xticks(xs, [f"{v:g}" for v in xs])
    elif xscale != "linear":
        axes.set_xscale(xscale)
        xs = np.unique(np.concatenate([_floats(item.x) for item in series] or [np.empty(0)]))
        xs = xs[np.isfinite(xs)]
        if 0 < xs.size <= 12:  # label the measured x values plainly, not as powers of ten
            axes.set_xticks(xs, [f"{v:.0f}" if v >= 10 else f"{v:g}" for v in xs])
            axes.xaxis.set_minor_formatter(_null_formatter())
    _finish(axes, title, xlabel, ylabel)
    if any(item.label for item in series):
        axes.legend(fontsize="small")
    return _save(figure, path)


def plot_accuracy_vs_n(
    series: Sequence[Series],
    path: str | Path,
    *,
    title: str = "",
    xlabel: str = "number of demonstrations N",
    ylabel: str = "accuracy (%)",
    chance: float | None = 50.0,
    xscale: str = "symlog",
) -> Path:
    """Accuracy (percentage points) against N, one line per series with CI bands, chance line at
    `chance`. Returns the PNG path."""
    return plot_lines_with_ci(series, path, xlabel=xlabel, ylabel=ylabel, title=title, xscale=xscale, reference=chance)


def plot_reliability_diagram(
    confidence: Values,
    accuracy: Values,
    counts: Values,
    path: str | Path,
    *,
    edges: Values | None = None,
    title: str = "",
    ece: float | None = None,
) -> Path:
    """Reliability diagram: bin accuracy against bin mean confidence with the diagonal of perfect
    calibration, and the bin counts below.

    confidence, accuracy, counts: (B,) per-bin values (empty bins as NaN / None), e.g. from
    `ReliabilityCurve.to_dict()`; edges: optional (B + 1,) bin edges, drawn as bars when given.
    Returns the PNG path.
    """
    conf, acc, cnt = _floats(confidence), _floats(accuracy), np.nan_to_num(_floats(counts))
    figure = _new_figure(5.0, 5.5)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    filled = np.isfinite(conf) & np.isfinite(acc)
    if edges is not None:
        e = _floats(edges)
        lo_edge, hi_edge = float(e[0]), float(e[-1])
        centres, widths = (e[:-1] + e[1:]) / 2, np.diff(e)
        top.bar(centres[filled], acc[filled], width=widths[filled], alpha=0.5, edgecolor="black", label="accuracy")
        bottom.bar(centres, cnt, width=widths, color="grey", edgecolor="black")
    else:
        finite = conf[np.isfinite(conf)]
        lo_edge = 0.5 if finite.size and finite.min() >= 0.5 else 0.0
        hi_edge = 1.0
        bottom.bar(np.nan_to_num(conf[filled]), cnt[filled], width=0.03, color="grey")
    top.plot(conf[filled], acc[filled], marker="o", color="C1", label="observed")
    top.plot([lo_edge, hi_edge], [lo_edge, hi_edge], linestyle="--", color="grey", label="calibrated")
    top.set_xlim(lo_edge, hi_edge)
    label = title + (f" (ECE {ece:.3f})" if ece is not None else "")
    _finish(top, label, "", "accuracy")
    top.legend(fontsize="small")
    _finish(bottom, "", "confidence", "count")
    return _save(figure, path)


def plot_id_vs_ood(
    labels: Sequence[str],
    id_acc: Values,
    ood_acc: Values,
    path: str | Path,
    *,
    id_ci: Intervals | None = None,
    ood_ci: Intervals | None = None,
    title: str = "",
    xlabel: str = "ID accuracy (%)",
    ylabel: str = "OOD accuracy (%)",
    diagonal: bool = True,
) -> Path:
    """Scatter of ID against OOD accuracy, one point per model in its own colour and marker (named in the
    legend, so no label sits on another), with CI error bars in both directions (ID CI horizontal, OOD CI
    vertical) and the y = x line. Returns the PNG path."""
    x, y = _floats(id_acc), _floats(ood_acc)
    if not len(labels) == len(x) == len(y):
        raise ValueError("labels, id_acc and ood_acc must have the same length")
    figure = _new_figure(6.5, 4.5)
    axes = figure.add_subplot()
    xerr, yerr = _errors(x, id_ci), _errors(y, ood_ci)
    markers = "osD^vP*Xhp<>"
    for k, label in enumerate(labels):
        if not (np.isfinite(x[k]) and np.isfinite(y[k])):
            continue
        axes.errorbar(
            x[k : k + 1],
            y[k : k + 1],
            xerr=None if xerr is None else xerr[:, k : k + 1],
            yerr=None if yerr is None else yerr[:, k : k + 1],
            fmt=markers[k % len(markers)],
            color=f"C{k % 10}",
            capsize=3,
            markersize=7,
            label=label,
        )
    if diagonal:
        finite = np.concatenate([x[np.isfinite(x)], y[np.isfinite(y)]])
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
            pad = max(1.0, 0.05 * (hi - lo))
            axes.plot(
                [lo - pad, hi + pad], [lo - pad, hi + pad], linestyle="--", color="grey", linewidth=1, label="ID = OOD"
            )
    _finish(axes, title, xlabel, ylabel)
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    return _save(figure, path)


def plot_bars(
    labels: Sequence[str],
    values: Values,
    path: str | Path,
    *,
    ci: Intervals | None = None,
    ylabel: str = "",
    title: str = "",
    reference: float | None = None,
    reference_label: str = "chance",
) -> Path:
    """Bar chart, one bar per label, with CI error bars where `ci` gives [low, high] intervals and an
    optional dashed horizontal reference line (named in a legend). Returns the PNG path."""
    heights = _floats(values)
    if len(labels) != len(heights):
        raise ValueError("labels and values must have the same length")
    figure = _new_figure(max(4.0, 0.6 * len(labels) + 2.0), 4.0)
    axes = figure.add_subplot()
    positions = np.arange(len(labels))
    axes.bar(
        positions,
        np.nan_to_num(heights),
        yerr=_errors(heights, ci),
        capsize=3,
        alpha=0.8,
        label="estimate" + (" (95% CI)" if ci is not None else ""),
    )
    axes.set_xticks(
        positions, list(labels), rotation=30 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center"
    )
    if reference is not None:
        axes.axhline(reference, color="grey", linestyle="--", linewidth=1, label=f"{reference_label} ({reference:g})")
        _legend_below(figure, axes)
    _finish(axes, title, "", ylabel)
    return _save(figure, path)


def plot_slopes(
    ols: Values, shrunk: Values, n_ratings: Values, population_slope: float | None, path: str | Path
) -> Path:
    """Per-rater slope after shrinkage against before (OLS), marker area growing with the rater's number of
    ratings, with the no-shrinkage diagonal and the population slope. Returns the PNG path."""
    x, y, n = _floats(ols), _floats(shrunk), np.nan_to_num(_floats(n_ratings))
    ok = np.isfinite(x) & np.isfinite(y)
    figure = _new_figure(5.5, 5.0)
    axes = figure.add_subplot()
    size = 10 + 60 * n[ok] / max(float(n.max()) if n.size else 1.0, 1.0)
    axes.scatter(x[ok], y[ok], s=size, alpha=0.6, label="rater (area ~ ratings)")
    if ok.any():
        lo, hi = float(np.min(x[ok])), float(np.max(x[ok]))
        axes.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="no shrinkage")
    if population_slope is not None:
        axes.axhline(population_slope, color="C3", linewidth=1, label="population slope")
    axes.axhline(0, color="grey", linewidth=0.5)
    _finish(
        axes,
        "Per-rater slopes before and after shrinkage",
        "per-rater OLS slope (before)",
        "PEBS slope (after shrinkage)",
    )
    axes.legend(fontsize="small")
    return _save(figure, path)


def plot_grouped_bars(
    groups: Sequence[str],
    series: Sequence[Series],
    path: str | Path,
    *,
    ylabel: str = "",
    title: str = "",
    reference: float | None = None,
) -> Path:
    """Grouped bar chart: one group per entry of `groups`, one bar per series (its `y` gives one value per
    group, `low` / `high` the CI), a legend naming the series, and an optional dashed reference line."""
    figure = _new_figure(max(5.0, 1.6 * len(groups) + 2.5), 4.2)
    axes = figure.add_subplot()
    width = 0.8 / max(len(series), 1)
    positions = np.arange(len(groups))
    for k, item in enumerate(series):
        y = _floats(item.y)
        ci = None
        if item.low is not None and item.high is not None:
            ci = [[lo, hi] for lo, hi in zip(_floats(item.low), _floats(item.high), strict=True)]
        axes.bar(
            positions + (k - (len(series) - 1) / 2) * width,
            np.nan_to_num(y),
            width,
            label=item.label,
            yerr=_errors(y, ci),
            capsize=3,
            color=f"C{k % 10}",
            alpha=0.85,
        )
    axes.set_xticks(positions, list(groups))
    if reference is not None:
        axes.axhline(reference, color="grey", linestyle="--", linewidth=1, label=f"chance ({reference:g})")
    _finish(axes, title, "", ylabel)
    # A figure legend "outside" gets its own row under the tick labels from the constrained layout (an axes
    # legend anchored below the axes collides with multi-line group names).
    _legend_below(figure, axes)
    return _save(figure, path)


def plot_best_of_n(
    gold: Sequence[Series],
    proxy: Sequence[Series],
    path: str | Path,
    *,
    gold_label: str,
    references: Sequence[Series] = (),
    random_choice: float | None = None,
    title: str = "",
) -> Path:
    """Gold and proxy against the best-of-n KL bound: each proxy's gold@n solid (left axis, CI band) and its own
    proxy@n dashed in the same colour (right axis: the proxy's gain over n = 1 in its own standard deviations);
    `references` (the length selector, the oracle) on the gold axis, dash-dotted grey and dotted black; random
    choice (gold@1) a light horizontal line. Series x: KL (nats)."""
    figure = _new_figure(7.0, 4.4)
    axes = figure.add_subplot()
    twin = axes.twinx()
    for g, p in zip(gold, proxy, strict=True):
        x, y = _floats(g.x), _floats(g.y)
        (line,) = axes.plot(x, y, marker="o", markersize=3, label=f"{g.label} (gold)")
        if g.low is not None and g.high is not None:
            axes.fill_between(x, _floats(g.low), _floats(g.high), color=line.get_color(), alpha=0.15, linewidth=0)
        twin.plot(_floats(p.x), _floats(p.y), linestyle="--", color=line.get_color(), label=f"{p.label} (proxy)")
    for ref, (style, colour) in zip(references, (("-.", "dimgrey"), (":", "black")), strict=False):
        axes.plot(_floats(ref.x), _floats(ref.y), linestyle=style, color=colour, label=ref.label)
    if random_choice is not None and np.isfinite(random_choice):
        axes.axhline(random_choice, color="silver", linewidth=2, zorder=0, label="random choice (gold@1)")
    twin.set_ylabel("proxy gain over n = 1 (proxy sd)")
    _finish(axes, title, "KL(best-of-n || policy) bound, nats", gold_label)
    handles, labels = axes.get_legend_handles_labels()
    more_handles, more_labels = twin.get_legend_handles_labels()
    axes.legend(handles + more_handles, labels + more_labels, fontsize="x-small", loc="best")
    return _save(figure, path)
