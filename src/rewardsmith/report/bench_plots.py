"""The figures of `rewardsmith bench`'s report card (report/bench.py lays them out): a forest plot of scores with
95% CIs beside the length rule and chance, PPE's best-of-K curves, the paired differences coloured by verdict and
RM-Bench's accuracy by difficulty. Each draws rows it is handed and saves one PNG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.report.plots import _new_figure, _save
from rewardsmith.stats import TOO_FEW

VERDICT_COLOURS = {
    "better": "#2a9d45",
    "worse": "#c23b22",
    "inconclusive": "#7f7f7f",
    f"{TOO_FEW} units": "#bbbbbb",
    None: "#bbbbbb",
}


def _xerr(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Asymmetric error bar lengths (2, K); a missing bound draws no whisker on its side."""
    return np.vstack([np.nan_to_num(v - lo, nan=0.0).clip(min=0), np.nan_to_num(hi - v, nan=0.0).clip(min=0)])


def _floats(values: Sequence[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _separators(axes: Any, y: np.ndarray, groups: Sequence[str]) -> None:
    """A thin line between consecutive rows of different groups (e.g. overall / sections / subsets)."""
    for i in range(1, len(groups)):
        if groups[i] != groups[i - 1]:
            axes.axhline((y[i - 1] + y[i]) / 2, color="#cccccc", linewidth=0.8)


def plot_forest(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str, xlabel: str) -> Path:
    """Horizontal dot-and-whisker chart: one line per row (top to bottom), each model's score with its CI, the
    length rule (x) and chance (|), thin lines between groups of rows. rows: {"label", "group", "chance",
    "length_rule", "models": {name: (value, low, high)}}."""
    models = list(dict.fromkeys(m for row in rows for m in row["models"]))
    figure = _new_figure(7.5, 1.5 + 0.3 * len(rows) * (1.0 if len(models) < 3 else 1.5))
    axes = figure.add_subplot()
    y = np.arange(len(rows))[::-1].astype(float)
    offsets = (np.arange(len(models)) - (len(models) - 1) / 2) * (0.6 / max(len(models), 1))
    for k, model in enumerate(models):
        vals = [row["models"].get(model, (None, None, None)) for row in rows]
        v, lo, hi = (_floats([x[i] for x in vals]) for i in range(3))
        axes.errorbar(
            v,
            y - offsets[k],
            xerr=_xerr(v, lo, hi),
            fmt="o",
            color=f"C{k % 10}",
            capsize=2.5,
            markersize=5,
            label=f"{model} (95% CI)",
        )
    axes.scatter(
        _floats([r.get("length_rule") for r in rows]),
        y,
        marker="x",
        color="#444444",
        s=30,
        zorder=3,
        label="length rule",
    )
    axes.scatter(
        _floats([r.get("chance") for r in rows]), y, marker="|", color="#999999", s=160, zorder=2, label="chance"
    )
    _separators(axes, y, [str(r.get("group", "")) for r in rows])
    axes.set_yticks(y, [row["label"] for row in rows])
    axes.set_ylim(-0.7, len(rows) - 0.3)
    low_x, high_x = axes.get_xlim()
    axes.set_xlim(low_x, high_x + 0.02 * (high_x - low_x))  # markers at 100% stay whole
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.grid(True, axis="x", alpha=0.3)
    handles, labels = axes.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i] in ("length rule", "chance"))  # models first
    figure.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        fontsize="small",
        loc="outside lower center",
        ncol=min(4, len(labels)),
    )
    return _save(figure, path)


def plot_best_of_k(
    curves: Mapping[str, Mapping[str, Mapping[str, Any]]],
    rule: Mapping[str, Mapping[str, Any]],
    path: Path,
    *,
    title: str,
) -> Path:
    """Small multiples, one panel per set: each model's best-of-K curve with its 95% band, the length rule's curve,
    the oracle (some correct response among K) and a random pick. curves: model -> set -> extras curve."""
    sets = list(dict.fromkeys(s for per in curves.values() for s in per))
    columns = min(3, len(sets))
    rows_n = int(np.ceil(len(sets) / columns))
    figure = _new_figure(3.4 * columns + 0.6, 2.9 * rows_n + 0.9)
    panels = np.atleast_1d(figure.subplots(rows_n, columns, squeeze=False)).ravel()
    for axes, set_name in zip(panels, sets, strict=False):
        for k, (model, per_set) in enumerate(curves.items()):
            curve = per_set.get(set_name)
            if not curve:
                continue
            x = np.asarray(curve["k"], dtype=float)
            (line,) = axes.plot(x, curve["curve"], color=f"C{k % 10}", label=f"{model} (95% band)")
            low = np.array([np.nan if v is None else v for v in curve["low"]], dtype=float)
            high = np.array([np.nan if v is None else v for v in curve["high"]], dtype=float)
            axes.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        first = next(per[set_name] for per in curves.values() if set_name in per)
        x = np.asarray(first["k"], dtype=float)
        if set_name in rule:
            axes.plot(x, rule[set_name]["curve"], color="#444444", linestyle="--", label="length rule")
        axes.plot(x, first["oracle"], color="black", linestyle=":", label="oracle (any correct)")
        axes.axhline(first["random"], color="#999999", linewidth=1, label="random pick")
        axes.set_xscale("log", base=2)
        ticks = [v for v in (1, 2, 4, 8, 16, 32, 64) if v <= x.max()]
        axes.set_xticks(ticks, [str(v) for v in ticks])
        axes.set_title(set_name, fontsize="medium")
        axes.set_xlabel("K (responses drawn)")
        axes.set_ylabel("picked correct (%)")
        axes.grid(True, alpha=0.3)
    for axes in panels[len(sets) :]:
        axes.set_visible(False)
    handles, labels = panels[0].get_legend_handles_labels()
    figure.suptitle(title)
    figure.legend(handles, labels, fontsize="small", loc="outside lower center", ncol=min(5, len(labels)))
    return _save(figure, path)


def plot_differences(
    records: Sequence[Mapping[str, Any]], path: Path, *, title: str, titles: Mapping[str, str] | None = None
) -> Path:
    """Paired differences (candidate - baseline) with 95% CIs, one line per measure grouped by suite (thin lines
    between suites, each row labelled "<suite>: <subset>"), coloured by verdict, with the zero line."""
    figure = _new_figure(7.5, 1.6 + 0.3 * len(records))
    axes = figure.add_subplot()
    y = np.arange(len(records))[::-1].astype(float)
    for verdict, colour in VERDICT_COLOURS.items():
        chosen = [i for i, r in enumerate(records) if r.get("verdict") == verdict]
        if not chosen:
            continue
        v = _floats([records[i].get("difference") for i in chosen])
        ci = [records[i].get("difference_ci") or [None, None] for i in chosen]
        lo, hi = _floats([c[0] for c in ci]), _floats([c[1] for c in ci])
        axes.errorbar(
            v,
            y[chosen],
            xerr=_xerr(v, lo, hi),
            fmt="o",
            color=colour,
            capsize=2.5,
            markersize=5,
            label=verdict or "no CI",
        )
    axes.axvline(0.0, color="black", linewidth=1)
    _separators(axes, y, [r["suite"] for r in records])
    names = titles or {}
    axes.set_yticks(y, [f"{names.get(r['suite'], r['suite'])}: {r['subset']}" for r in records])
    axes.set_ylim(-0.7, len(records) - 0.3)
    axes.set_title(title)
    axes.set_xlabel("difference (percentage points)")
    axes.grid(True, axis="x", alpha=0.3)
    handles, labels = axes.get_legend_handles_labels()
    figure.legend(handles, labels, fontsize="small", loc="outside lower center", ncol=3)
    return _save(figure, path)


DIFFICULTIES = ("easy", "normal", "hard")


def plot_difficulty(
    panels: Mapping[str, Mapping[str, Sequence[tuple[Any, Any, Any]]]], groups: Sequence[str], path: Path, *, title: str
) -> Path:
    """Small multiples, one panel per model (shared 0-100 axis): per group (domain) one bar per difficulty with its
    95% CI, and the chance line. panels: model -> difficulty -> per group (value, low, high)."""
    names = list(panels)
    columns = min(3, len(names))
    rows_n = int(np.ceil(len(names) / columns))
    figure = _new_figure(max(4.2, 0.9 * len(groups) + 1.2) * columns + 0.4, 3.0 * rows_n + 0.9)
    axes_all = np.atleast_1d(figure.subplots(rows_n, columns, squeeze=False, sharey=True)).ravel()
    x = np.arange(len(groups))
    width = 0.8 / len(DIFFICULTIES)
    for axes, model in zip(axes_all, names, strict=False):
        for k, difficulty in enumerate(DIFFICULTIES):
            cells = panels[model].get(difficulty) or [(None, None, None)] * len(groups)
            v, lo, hi = (_floats([c[i] for c in cells]) for i in range(3))
            axes.bar(
                x + (k - 1) * width,
                np.nan_to_num(v),
                width,
                yerr=_xerr(v, lo, hi),
                capsize=2.5,
                color=f"C{k}",
                alpha=0.85,
                label=difficulty,
                error_kw={"linewidth": 1},
            )
        axes.axhline(50.0, color="grey", linestyle="--", linewidth=1, label="chance (50)")
        axes.set_xticks(
            x,
            list(groups),
            rotation=20 if max(len(g) for g in groups) > 8 else 0,
            ha="right" if max(len(g) for g in groups) > 8 else "center",
        )
        axes.set_ylim(0, 105)
        axes.set_title(model, fontsize="medium")
        axes.grid(True, axis="y", alpha=0.3)
    for axes in axes_all[::columns]:
        axes.set_ylabel("accuracy (%)")
    for axes in axes_all[len(names) :]:
        axes.set_visible(False)
    figure.suptitle(title)
    handles, labels = axes_all[0].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("chance"))  # the difficulties first
    figure.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        fontsize="small",
        loc="outside lower center",
        ncol=len(labels),
    )
    return _save(figure, path)
