"""Reports of the ICRM protocols, the same for every protocol: its metrics laid out automatically, its charts
(`ICRMProtocol.charts`, data from rewardsmith.evaluate.charts) drawn by chart kind, and its console rows of headline
figures (`ICRMProtocol.rows`). Nothing here knows one protocol from another."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rewardsmith.evaluate.charts import Chart, ChartKind
from rewardsmith.icrm import protocols
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.plots import plot_accuracy_vs_n, plot_lines_with_ci, plot_reliability_diagram
from rewardsmith.report.render import Figure, Report, metrics_markdown, write_report


def _draw_lines(chart: Chart, path: Path) -> Path:
    return plot_lines_with_ci(
        chart.series,
        path,
        xlabel=chart.xlabel,
        ylabel=chart.ylabel,
        title=chart.title,
        xscale=chart.xscale,
        reference=chart.reference,
    )


def _draw_accuracy_vs_n(chart: Chart, path: Path) -> Path:
    return plot_accuracy_vs_n(chart.series, path, title=chart.title)


def _draw_reliability(chart: Chart, path: Path) -> Path:
    bins = chart.bins
    if bins is None:  # Chart refuses this already; kept for the type checker
        raise ValueError(f"reliability chart {chart.file!r} has no bins")
    return plot_reliability_diagram(
        bins.confidence, bins.accuracy, bins.counts, path, edges=bins.edges, title=chart.title
    )


_DRAW: dict[ChartKind, Callable[[Chart, Path], Path]] = {
    "lines": _draw_lines,
    "accuracy_vs_n": _draw_accuracy_vs_n,
    "reliability": _draw_reliability,
}


def draw_charts(charts: list[Chart], plots: Path) -> list[Figure]:
    """Each chart drawn to plots/<chart.file>, as report figures (path, caption) in the charts' order."""
    return [Figure(_DRAW[chart.kind](chart, plots / chart.file), chart.caption) for chart in charts]


def protocol_report(name: str, metrics: Mapping[str, Any], folder: RunFolder) -> None:
    """<folder>/<name>/report.md, report.html and plots/*.png for protocol `name` (UnknownNameError if none)."""
    protocol = protocols.PROTOCOLS.get(name)
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
    report.figures = draw_charts(protocol.charts(metrics), base / "plots")
    write_report(report, base, lambda n, text: folder.write_text(f"{name}/{n}", text))


def protocol_rows(name: str, metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Console rows of protocol `name`: {"protocol": name, "figure": ..., "N=<n>": ..., "BT": ...}, its headline
    figure at each N."""
    return [{"protocol": name, **row} for row in protocols.PROTOCOLS.get(name).rows(metrics)]
