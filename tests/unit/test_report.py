"""The one report renderer writes what it is given (one number format per column, intervals folded in, HTML
by markdown-it-py, no external assets); plots write PNGs with legends; importing stays free of matplotlib."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rewardsmith.report.plots import (
    Series,
    plot_accuracy_vs_n,
    plot_bars,
    plot_id_vs_ood,
    plot_reliability_diagram,
    plot_slopes,
)
from rewardsmith.report.render import (
    Figure,
    Report,
    figure_markdown,
    fold_intervals,
    format_value,
    markdown_table,
    markdown_to_html,
    metrics_markdown,
    write_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

METRICS = {
    "run": "demo",
    "seed": 3,
    "eval": {
        "hh": {
            "accuracy": 61.2,
            "accuracy_ci": [58.0, 64.1],
            "ece": 0.0812,
            "n": 800,
            "flagged": False,
            "missing": None,
        }
    },
    "transfer": {"student": {"wrg": 4.25, "wrg_ci": [1.0, 7.5]}, "anchor": {"wrg": -2.0, "wrg_ci": [-5.0, 1.0]}},
    "rmbench": {"hard": 40.0, "matrix": [[50.0, 40.0], [60.0, 55.0]]},
    "records": [{"name": "a", "value": 1.5}, {"name": "b|c", "value": 2.0}],
}


def test_format_value() -> None:
    assert format_value(61.234) == "61.2"
    assert format_value(0.08123, 3) == "0.081"
    assert format_value(7) == "7"
    assert format_value(None) == "n/a"
    assert format_value(float("nan")) == "n/a"
    assert format_value(True) == "yes"
    assert format_value([58.0, 64.14]) == "[58.0, 64.1]"
    assert format_value(-0.03) == "0.0"  # rounding to zero drops the sign
    assert format_value([-6.21, -0.04]) == "[-6.2, 0.0]"
    assert format_value(-0.06) == "-0.1"


def test_fold_intervals() -> None:
    folded = fold_intervals({"accuracy": 61.2, "accuracy_ci": [58.0, 64.1], "pgr": 0.5, "pgr_ci": [0.1, 0.9]})
    assert folded == {"accuracy": "61.2 [58.0, 64.1]", "pgr": "0.500 [0.100, 0.900]"}


def test_markdown_table_known_output() -> None:
    table = markdown_table([{"model": "bt", "acc": 61.25}, {"model": "icrm", "acc": None}])
    assert table.splitlines() == ["| model | acc |", "|---|---:|", "| bt | 61.2 |", "| icrm | n/a |"]
    assert markdown_table([]) == ""


def test_one_number_format_per_column() -> None:
    """A column mixing a gain of 5.3 and one of -0.33 prints both with one decimal; a column of fractions
    keeps three."""
    table = markdown_table(
        [
            {"m": "a", "wrg": 5.3, "wrg_ci": [1.0, 9.5], "ece": 0.0812},
            {"m": "b", "wrg": -0.33, "wrg_ci": [-0.9, 0.2], "ece": 0.1},
        ]
    )
    lines = table.splitlines()
    assert lines[0] == "| m | wrg | ece |"
    assert lines[2] == "| a | 5.3 [1.0, 9.5] | 0.081 |"
    assert lines[3] == "| b | -0.3 [-0.9, 0.2] | 0.100 |"


def test_figure_markdown_relative_path(tmp_path: Path) -> None:
    text = figure_markdown(tmp_path / "plots" / "curve.png", "Accuracy vs N", base_dir=tmp_path)
    assert text.startswith("![Accuracy vs N](plots/curve.png)")


def test_write_report_lays_out_metrics_and_renders_html(tmp_path: Path) -> None:
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "acc_vs_n.png").write_bytes(PNG_MAGIC)
    report = Report("Run demo", "An intro.")
    report.add("Results", metrics_markdown(METRICS, level=3))
    report.figures.append(Figure(tmp_path / "plots" / "acc_vs_n.png", "accuracy against N"))
    md_path, html_path = write_report(report, tmp_path)
    md = md_path.read_text()
    assert md.startswith("# Run demo\n\nAn intro.")
    # {dataset: {metric: value}} and {method: {metric: value}} become one row per entry.
    assert "| eval | accuracy | ece | n | flagged | missing |" in md
    assert "| hh | 61.2 [58.0, 64.1] | 0.081 | 800 | no | n/a |" in md
    assert "| anchor | -2.0 [-5.0, 1.0] |" in md
    assert "| 1 | 60.0 | 55.0 |" in md  # matrix row
    assert "b\\|c" in md
    assert "![accuracy against N](plots/acc_vs_n.png)" in md
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert '<td style="text-align:right">61.2 [58.0, 64.1]</td>' in page
    assert "<h3>transfer</h3>" in page
    assert '<img src="plots/acc_vs_n.png"' in page
    assert "<td>b|c</td>" in page
    assert "http" not in page.split("<body>")[0]  # no external assets


def test_html_escapes_text() -> None:
    page = markdown_to_html("# Title\n\nsome <script>alert(1)</script> text\n\n- item `code`\n", "t")
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "<li>item <code>code</code></li>" in page


def test_wide_tables_are_transposed() -> None:
    block = {f"m{i}": float(i) for i in range(10)}
    md = metrics_markdown({"transfer": {"student": block, "anchor": block}}, max_columns=8)
    assert "| metric | student | anchor |" in md
    assert "| m9 | 9.0 | 9.0 |" in md


def test_plots_write_pngs(tmp_path: Path) -> None:
    curve = Series("icrm", [0, 1, 2, 4], [50.0, 55.0, 58.0, 60.0], [48.0, 52.0, 55.0, 57.0], [52.0, 58.0, 61.0, 63.0])
    paths = [
        plot_accuracy_vs_n([curve, Series("bt", [0, 1, 2, 4], [60.0] * 4)], tmp_path / "a" / "n.png"),
        plot_reliability_diagram(
            [0.55, None, 0.8],
            [0.5, None, 0.75],
            [10, 0, 5],
            tmp_path / "rel.png",
            edges=[0.5, 2 / 3, 5 / 6, 1.0],
            ece=0.04,
        ),
        plot_reliability_diagram([0.55, 0.8], [0.5, 0.75], [10, 5], tmp_path / "rel_points.png"),
        plot_id_vs_ood(
            ["teacher", "student"],
            [60.0, 65.0],
            [55.0, None],
            tmp_path / "scatter.png",
            id_ci=[[55.0, 65.0], [60.0, 70.0]],
            ood_ci=[[50.0, 60.0], [None, None]],
        ),
        plot_bars(
            ["easy", "normal", "hard"],
            [80.0, 60.0, 30.0],
            tmp_path / "bars.png",
            ci=[[75.0, 85.0], [55.0, 65.0], None],
            reference=50.0,
        ),
        plot_slopes([0.5, 1.0, 2.0], [0.8, 1.0, 1.4], [5, 50, 20], 1.0, tmp_path / "slopes.png"),
    ]
    for path in paths:
        assert path.read_bytes()[:8] == PNG_MAGIC


def test_id_vs_ood_names_every_model_in_a_legend(tmp_path: Path) -> None:
    from unittest import mock

    from matplotlib.axes import Axes

    with mock.patch.object(Axes, "legend", autospec=True, side_effect=Axes.legend) as legend:
        plot_id_vs_ood(["teacher", "naive", "anchor"], [60.0, 61.0, 61.2], [55.0, 55.1, 55.3], tmp_path / "scatter.png")
    axes = legend.call_args.args[0]
    labels = axes.get_legend_handles_labels()[1]
    assert {"teacher", "naive", "anchor", "ID = OOD"} == set(labels)
    assert not axes.texts  # no labels printed next to points, so none can overlap


def test_import_does_not_load_matplotlib() -> None:
    code = (
        "import sys, rewardsmith.report.render, rewardsmith.evaluate.metrics; "
        "assert 'matplotlib' not in sys.modules and 'scipy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
