"""The report card of `rewardsmith bench`: from the metrics dict of rewardsmith.bench.runner.bench_metrics to
report.md, report.html and plots/*.png. Layout only: every number arrives computed.

Contents: a summary table (each suite's overall scores, one column per model), then per suite its main table
(score with 95% CI, the length rule, the length-controlled accuracy and the reward-length correlation), its
secondary metrics (RM-Bench's easy / normal / hard and style gap, PPE's best-of-K and ROC AUC), a forest plot of
its scores, suite figures (PPE's best-of-K curves, RM-Bench's difficulty bars), then the paired differences
between models with their verdicts, the suites that did not run and what to put where, and the texts scored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.report.plots import _new_figure, _save
from rewardsmith.report.render import (
    Figure,
    Report,
    figure_markdown,
    markdown_table,
    slug,
    with_interval,
    write_report,
)
from rewardsmith.stats import MIN_UNITS, TOO_FEW

Writer = Callable[[str, str], Path]

INTRO = (
    "Scores in % (ROC AUC and correlations as fractions) with 95% bootstrap CIs over the benchmark's units "
    "(rows, or prompts where a prompt holds several rows). Each score is defined as its benchmark's official "
    "harness defines it (docs/benchmarks.md). **Length rule**: the same metric with the response length as the "
    'reward ("the longer response wins"); a model near its length rule may be scoring length. '
    "**Length-controlled**: the mean of the accuracies on pairs whose preferred response is longer and on those "
    "whose preferred response is shorter (50 for a pure length scorer), where the metric is pairwise. "
    "**corr(reward, length)**: Spearman correlation of reward and response length over every response."
)
VERDICT_COLOURS = {
    "better": "#2a9d45",
    "worse": "#c23b22",
    "inconclusive": "#7f7f7f",
    f"{TOO_FEW} units": "#bbbbbb",
    None: "#bbbbbb",
}


def _fmt(record: Mapping[str, Any], key: str, decimals: int) -> str:
    return with_interval(record.get(key), record.get(f"{key}_ci"), decimals)


def _decimals(record: Mapping[str, Any]) -> int:
    return 3 if record.get("unit") == "" else 1


def _suite_names(metrics: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for result in metrics["results"].values():
        names += [s for s in result["suites"] if s not in names]
    return names


def _suite(metrics: Mapping[str, Any], suite: str) -> Mapping[str, Any]:
    """The suite's metrics from the first model that ran it (title, summary and layout are model-independent)."""
    return next(r["suites"][suite] for r in metrics["results"].values() if suite in r["suites"])


def _by_key(metrics: Mapping[str, Any], model: str, suite: str) -> dict[tuple[str, str], Mapping[str, Any]]:
    result = metrics["results"][model]["suites"].get(suite)
    return {} if result is None else {(m["subset"], m["metric"]): m for m in result["measures"]}


TRAINED = "trained on this set"


def in_training(metrics: Mapping[str, Any], model: str, suite: str, subset: str) -> bool:
    """Whether the model was trained on the set this subset is (model_info's training_sets): not a held-out
    score."""
    found = ((metrics.get("model_info") or {}).get(model) or {}).get("training_sets") or []
    return any(f.get("suite") == suite and f.get("subset") == subset for f in found)


def _score_cell(record: Mapping[str, Any] | None, decimals: int) -> str:
    return _fmt(record, "score", decimals) if record else "not run"


def _training_note(metrics: Mapping[str, Any], suite: str) -> str:
    marked = [
        f"{model} on {f['subset']}"
        for model in metrics["models"]
        for f in ((metrics.get("model_info") or {}).get(model) or {}).get("training_sets") or []
        if f.get("suite") == suite
    ]
    return (
        f"*{TRAINED}*: {'; '.join(marked)}. The set may hold the pairs the model was trained on, so its score "
        "there is not a held-out one."
        if marked
        else ""
    )


def _label(record: Mapping[str, Any], metrics_shown: set[str]) -> str:
    """ "<subset> (n=N)", or "<subset>: <metric> (n=N)" when the rows show several metrics."""
    name = record["subset"] if len(metrics_shown) <= 1 else f"{record['subset']}: {record['metric']}"
    return f"{name} (n={record['n']})"


# ---------------------------------------------------------------------------------------------------- tables


def drop_empty_columns(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows without the columns that are "n/a" in every row (e.g. a length-controlled accuracy where no
    measure of the suite is pairwise)."""
    if not rows:
        return rows
    keep = [k for k in rows[0] if any(row.get(k) != "n/a" for row in rows)]
    return [{k: row[k] for k in keep} for row in rows]


def summary_rows(metrics: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per suite headline (its primary "overall" measures, else its first measure): suite, measure, n,
    chance, length rule and one score column per model."""
    rows = []
    for suite in _suite_names(metrics):
        layout = _suite(metrics, suite)
        heads = [m for m in layout["measures"] if m["level"] == "overall" and m["primary"]] or layout["measures"][:1]
        for head in heads:
            dec = _decimals(head)
            row = {
                "suite": layout["title"],
                "measure": f"{head['subset']}: {head['metric']}",
                "n": str(head["n"]),
                "chance": with_interval(head.get("chance"), None, dec),
                "length rule": _fmt(head, "length_rule", dec),
            }
            for model in metrics["models"]:
                record = _by_key(metrics, model, suite).get((head["subset"], head["metric"]))
                row[model] = _score_cell(record, dec)
            rows.append(row)
    return rows


def main_rows(metrics: Mapping[str, Any], suite: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(scores table, diagnostics table) of a suite's primary measures. With one model the scores table also
    holds its length-controlled accuracy and correlation and the diagnostics table is empty; with several, the
    diagnostics table leaves out rows without any value."""
    models = metrics["models"]
    layout = [m for m in _suite(metrics, suite)["measures"] if m["primary"]]
    single = len(models) == 1
    scores, diagnostics = [], []
    for head in layout:
        dec = _decimals(head)
        base = {
            "subset": head["subset"],
            "metric": head["metric"],
            "n": str(head["n"]),
            "chance": with_interval(head.get("chance"), None, dec),
            "length rule": _fmt(head, "length_rule", dec),
        }
        diag = {"subset": head["subset"], "metric": head["metric"]}
        for model in models:
            record = _by_key(metrics, model, suite).get((head["subset"], head["metric"])) or {}
            prefix = "" if single else f"{model}: "
            base["score" if single else model] = _score_cell(record if record else None, dec)
            target = base if single else diag
            target[f"{prefix}length-controlled"] = _fmt(record, "length_controlled", 1)
            target[f"{prefix}corr(reward, length)"] = _fmt(record, "length_correlation", 2)
        scores.append(base)
        if any(v != "n/a" for k, v in diag.items() if k not in ("subset", "metric")):
            diagnostics.append(diag)
    trained = [", ".join(m for m in models if in_training(metrics, m, suite, head["subset"])) for head in layout]
    if any(trained):
        for row, names in zip(scores, trained, strict=True):
            row[TRAINED] = names
    return drop_empty_columns(scores), ([] if single else drop_empty_columns(diagnostics))


def secondary_rows(metrics: Mapping[str, Any], suite: str) -> list[dict[str, str]]:
    """The suite's secondary measures as subset x metric: one row per (subset, model) and per subset the length
    rule's values; [] when the suite has none."""
    layout = [m for m in _suite(metrics, suite)["measures"] if not m["primary"]]
    if not layout:
        return []
    columns = list(dict.fromkeys(m["metric"] for m in layout))
    subsets = list(dict.fromkeys(m["subset"] for m in layout))
    rows = []
    every = {(m["subset"], m["metric"]): m for m in _suite(metrics, suite)["measures"]}  # the length rule's
    for subset in subsets:
        for source in [*metrics["models"], "length rule"]:
            found = every if source == "length rule" else _by_key(metrics, source, suite)
            row = {"subset": subset, "scored by": source}
            for metric in columns:
                record = found.get((subset, metric))
                key = "length_rule" if source == "length rule" else "score"
                row[metric] = _fmt(record, key, _decimals(record)) if record else "n/a"
            rows.append(row)
    return rows


def comparison_rows(
    records: Sequence[Mapping[str, Any]],
    titles: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """One row per compared measure: suite (its title), subset, metric, n, difference [CI], verdict."""
    names = titles or {}
    return [
        {
            "suite": names.get(r["suite"], r["suite"]),
            "subset": r["subset"],
            "metric": r["metric"],
            "n": str(r["n"]),
            "difference": with_interval(r.get("difference"), r.get("difference_ci"), 3 if r.get("unit") == "" else 1),
            "verdict": r.get("verdict") or "n/a",
        }
        for r in records
    ]


# ---------------------------------------------------------------------------------------------------- figures


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


def _forest_rows(metrics: Mapping[str, Any], suite: str) -> list[dict[str, Any]]:
    layout = [m for m in _suite(metrics, suite)["measures"] if m["primary"] and m.get("unit") == "%"]
    shown = {m["metric"] for m in layout}
    rows = []
    for head in layout:
        per_model = {}
        for model in metrics["models"]:
            record = _by_key(metrics, model, suite).get((head["subset"], head["metric"]))
            if record and record.get("score") is not None:
                low, high = record.get("score_ci") or [None, None]
                per_model[model] = (record["score"], low, high)
        rows.append(
            {
                "label": _label(head, shown),
                "group": head["level"],
                "chance": head.get("chance"),
                "length_rule": head.get("length_rule"),
                "models": per_model,
            }
        )
    return rows


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


def _plotted_differences(
    metrics: Mapping[str, Any], records: Sequence[Mapping[str, Any]], max_subsets: int = 8
) -> list[Mapping[str, Any]]:
    """The differences worth a figure: each suite's primary % measures at overall and section level, and its
    subsets when it has at most `max_subsets` of them (the tables list every measure)."""
    primary = [r for r in records if _is_primary(metrics, r)]
    count: dict[str, int] = {}
    for r in primary:
        if r["level"] == "subset":
            count[r["suite"]] = count.get(r["suite"], 0) + 1
    return [
        r
        for r in primary
        if r["level"] in ("overall", "section") or (r["level"] == "subset" and count[r["suite"]] <= max_subsets)
    ]


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


def _difficulty_figure(metrics: Mapping[str, Any], suite: str, out: Path) -> list[Figure]:
    """RM-Bench: easy / normal / hard per domain, one panel per model in one figure."""
    layout = _suite(metrics, suite)["measures"]
    groups = list(dict.fromkeys(m["subset"] for m in layout if m["metric"] == "hard"))
    panels: dict[str, dict[str, list[tuple[Any, Any, Any]]]] = {}
    for model in metrics["models"]:
        found = _by_key(metrics, model, suite)
        if not found:
            continue
        panels[model] = {}
        for difficulty in DIFFICULTIES:
            records = [found.get((g, difficulty)) or {} for g in groups]
            panels[model][difficulty] = [(r.get("score"), *(r.get("score_ci") or [None, None])) for r in records]
    if not panels or not groups:
        return []
    title = _suite(metrics, suite)["title"]
    path = plot_difficulty(
        panels, groups, out / f"{slug(suite)}_difficulty.png", title=f"{title}: accuracy by difficulty"
    )
    return [
        Figure(
            path,
            f"{title}: easy / normal / hard accuracy per domain and model (%, 95% CIs over prompts). "
            "Hard pits a concise correct response against a more styled wrong one, easy the reverse; "
            "hard far below easy means style wins over correctness",
        )
    ]


# ---------------------------------------------------------------------------------------------------- document


def _settings_line(metrics: Mapping[str, Any]) -> str:
    """What the run read and how (from the job's config and options, where the metrics hold them)."""
    config, options = metrics.get("config") or {}, metrics.get("options") or {}
    if not config:
        return ""
    limit = options.get("limit")
    rows = "all rows" if limit is None else f"the first {limit} rows of each subset (a sample)"
    return (
        f"\n\nData: {md_text(str(config.get('data_dir', '')))}, {rows}; {options.get('n_boot', 0)} bootstrap "
        "replicates per interval."
    )


def md_text(text: str) -> str:
    """Free text (paths, globs such as data/test-*.parquet) as literal Markdown: emphasis and code characters
    escaped."""
    return "".join(f"\\{c}" if c in "*_`[]<>" else c for c in text)


def _summary_line(layout: Mapping[str, Any]) -> str:
    summary = layout["summary"]
    parts = [f"{summary['rows']} rows used of {summary['read']} read"]
    dropped = {k: v for k, v in (summary.get("dropped") or {}).items() if v}
    if dropped:
        parts.append("dropped: " + ", ".join(f"{k} {v}" for k, v in dropped.items()))
    text = (
        md_text("; ".join(parts)) + f". Source: {md_text(layout['release'])}. Definitions follow "
        f"{md_text(layout['source'])}."
    )
    notes = summary.get("notes") or []
    return text + ("\n\n" + "\n".join(f"- {md_text(n)}" for n in notes) if notes else "")


def _extras_markdown(metrics: Mapping[str, Any], suite: str) -> str:
    """RewardBench 2's Ties components (one column per model) and RM-Bench's style matrix of every prompt (one
    table per model)."""
    blocks = []
    extras = {m: metrics["results"][m]["suites"].get(suite, {}).get("extras", {}) for m in metrics["models"]}
    ties = {m: e["ties_components"] for m, e in extras.items() if e.get("ties_components")}
    if ties:
        names = list(next(iter(ties.values())))
        rows = [
            {
                "component": name,
                **{
                    m: with_interval(
                        None if c.get(name) is None else c[name] if name == "margin score" else 100 * c[name],
                        None,
                        3 if name == "margin score" else 1,
                    )
                    for m, c in ties.items()
                },
            }
            for name in names
        ]
        blocks.append(
            "Ties score components (%; the margin score, a tanh, lies in (-1, 1)):\n\n" + markdown_table(rows)
        )
    for model, e in extras.items():
        matrix = (e.get("matrices") or {}).get("overall")
        if not matrix:
            continue
        styles = e.get("styles") or [str(i) for i in range(len(matrix["matrix"]))]
        rows = [
            {"chosen \\ rejected": s, **{t: f"{v:.1f}" for t, v in zip(styles, row, strict=True)}}
            for s, row in zip(styles, matrix["matrix"], strict=True)
        ]
        blocks.append(
            f"Style matrix, every prompt ({model}; % of prompts whose chosen response in the row's style "
            "beats the rejected one in the column's; hard = above the diagonal):\n\n" + markdown_table(rows)
        )
    return "\n\n".join(blocks)


def bench_report(
    metrics: Mapping[str, Any], out_dir: str | Path, write: Writer | None = None, title: str | None = None
) -> tuple[Path, Path]:
    """Writes out_dir/report.md, out_dir/report.html and out_dir/plots/*.png from bench_metrics' dict; each figure
    sits in the section it belongs to.

    write(name, text) -> Path writes a text file (a run folder's write_text; default: atomic writes). Returns the
    (report.md, report.html) paths.
    """
    out = Path(out_dir)
    plots = out / "plots"
    models = metrics["models"]
    report = Report(title or f"rewardsmith bench: {', '.join(models)}", INTRO + _settings_line(metrics))
    suites = _suite_names(metrics)
    titles = {s: _suite(metrics, s)["title"] for s in suites}

    def figure(path: Path, caption: str) -> str:
        return figure_markdown(path, caption, out)

    if suites:
        report.add("Summary", markdown_table(summary_rows(metrics)))
    for suite in suites:
        layout = _suite(metrics, suite)
        body = [_summary_line(layout)]
        scores, diagnostics = main_rows(metrics, suite)
        body.append(markdown_table(scores))
        note = _training_note(metrics, suite)
        if note:
            body.append(note)
        if diagnostics:
            body.append("Length diagnostics per model:\n\n" + markdown_table(diagnostics))
        forest = _forest_rows(metrics, suite)
        if forest:
            path = plot_forest(forest, plots / f"{slug(suite)}_scores.png", title=layout["title"], xlabel="score (%)")
            body.append(
                figure(
                    path,
                    f"{layout['title']}: score per subset with 95% CI per model, the length rule (x) and chance (|)",
                )
            )
        secondary = secondary_rows(metrics, suite)
        if secondary:
            gap = (
                "; **hard - easy** is the style gap in points, per prompt (below 0: the model prefers a more "
                "styled wrong response over a plainer correct one)"
                if "hard - easy" in secondary[0]
                else ""
            )
            body.append(f"Further metrics, each model's and the length rule's{gap}:\n\n" + markdown_table(secondary))
        extras = _extras_markdown(metrics, suite)
        if extras:
            body.append(extras)
        curves = {
            m: metrics["results"][m]["suites"][suite]["extras"]["curves"]
            for m in models
            if "curves" in metrics["results"][m]["suites"].get(suite, {}).get("extras", {})
        }
        if curves:
            rule = layout["extras"].get("length_rule", {}).get("curves", {})
            path = plot_best_of_k(
                curves, rule, plots / f"{slug(suite)}_best_of_k.png", title="PPE correctness: best-of-K curves"
            )
            body.append(
                figure(
                    path,
                    "Best-of-K: expected correctness of the highest-reward response among K drawn "
                    "from a prompt's responses, per model (95% band over prompts), with the length "
                    "rule, the oracle and a random pick",
                )
            )
        if any(m["metric"] == "hard" for m in layout["measures"]):
            body += [figure(f.path, f.caption) for f in _difficulty_figure(metrics, suite, plots)]
        report.add(layout["title"], "\n\n".join(body))
    for name, records in (metrics.get("comparisons") or {}).items():
        if not records:
            continue
        candidate, _, baseline = name.partition(" vs ")
        body = [
            f"**{candidate}** minus **{baseline}** on the units both were scored on (percentage points; ROC AUC "
            "and correlations as fractions), with a paired bootstrap 95% CI: **better** when the CI lies above "
            "0, **worse** below it, **inconclusive** when it covers 0, **too few units** with fewer than "
            f"{MIN_UNITS} units in common."
        ]
        plotted = _plotted_differences(metrics, records)
        if plotted:
            path = plot_differences(
                plotted, plots / f"differences_{slug(name)}.png", title=f"{candidate} minus {baseline}", titles=titles
            )
            body.append(
                figure(
                    path,
                    f"Paired differences, {candidate} minus {baseline}, of each suite's headline "
                    "scores (percentage points, "
                    "paired bootstrap 95% CIs), coloured by verdict; the table lists every measure",
                )
            )
        body.append(markdown_table(comparison_rows(records, titles)))
        report.add(f"Paired differences: {name}", "\n\n".join(body))
    missing = metrics.get("missing") or []
    if missing:
        report.add("Not run", "\n".join(f"- **{m['suite']}**: {md_text(m['message'])}" for m in missing))
    report.add(
        "Models and texts scored",
        "Each distinct (prompt, response) is scored once across suites, rows with "
        "many completions in the same batches; *reused* counts the texts requested again. Scoring time "
        "excludes model loading.\n\n" + markdown_table(model_rows(metrics)),
    )
    return write_report(report, out, write)


def model_rows(metrics: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per model: what was loaded and how its texts were written (where metrics hold model_info), the
    texts requested, scored and reused, the truncated texts and the scoring speed."""
    rows = []
    for model in metrics["models"]:
        info = (metrics.get("model_info") or {}).get(model, {})
        texts = metrics["results"][model].get("texts", {})
        row = {"model": model}
        if info:
            row.update(
                {
                    "source": info.get("source", ""),
                    "read as": f"{info.get('kind', '')}, {info.get('template', '')} template, "
                    f"{info.get('max_length', '')} tokens, {info.get('precision', '')}",
                    "trained on": info.get("trained_on") or "n/a",
                }
            )
        row.update({k: str(texts.get(k, "")) for k in ("requested", "scored", "reused")})
        if info:
            cut = info.get("truncation", {})
            timing = info.get("timing", {})
            rate = timing.get("texts_per_s")
            row.update(
                {
                    "prompt / response cut": f"{cut.get('prompt_truncated', 0)} / {cut.get('response_truncated', 0)}",
                    "texts/s": "n/a"
                    if rate is None
                    else f"{rate:.1f}" + (" (earlier run)" if info.get("from_earlier_run") else ""),
                }
            )
        rows.append(row)
    return rows


def _is_primary(metrics: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    layout = _suite(metrics, record["suite"])["measures"] if record["suite"] in _suite_names(metrics) else []
    return any(
        m["subset"] == record["subset"] and m["metric"] == record["metric"] and m["primary"] and m.get("unit") == "%"
        for m in layout
    )
