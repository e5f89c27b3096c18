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

from rewardsmith.report.bench_plots import DIFFICULTIES, plot_best_of_k, plot_differences, plot_difficulty, plot_forest
from rewardsmith.report.render import (
    Figure,
    Report,
    figure_markdown,
    markdown_table,
    slug,
    with_interval,
    write_report,
)
from rewardsmith.stats import MIN_UNITS

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
