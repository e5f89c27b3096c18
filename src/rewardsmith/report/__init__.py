"""Reports: metrics.json -> report.md / report.html, and PNG plots. Computes no metric itself."""

from rewardsmith.report.plots import (
    Series,
    plot_accuracy_vs_n,
    plot_bars,
    plot_id_vs_ood,
    plot_lines_with_ci,
    plot_reliability_diagram,
)
from rewardsmith.report.render import (
    figure_markdown,
    fold_intervals,
    format_value,
    markdown_table,
    markdown_to_html,
    render_report,
    render_run_report,
    report_markdown,
)

__all__ = [
    "Series",
    "figure_markdown",
    "fold_intervals",
    "format_value",
    "markdown_table",
    "markdown_to_html",
    "plot_accuracy_vs_n",
    "plot_bars",
    "plot_id_vs_ood",
    "plot_lines_with_ci",
    "plot_reliability_diagram",
    "render_report",
    "render_run_report",
    "report_markdown",
]
