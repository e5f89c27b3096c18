"""Report rendering writes what it is given; plots write PNGs; importing stays free of matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardsmith.errors import DataError
from rewardsmith.report import (
    Series,
    figure_markdown,
    fold_intervals,
    format_value,
    markdown_table,
    markdown_to_html,
    plot_accuracy_vs_n,
    plot_bars,
    plot_id_vs_ood,
    plot_reliability_diagram,
    render_report,
    render_run_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

METRICS = {
    "run": "demo",
    "seed": 3,
    "eval": {"hh": {"accuracy": 61.2, "accuracy_ci": [58.0, 64.1], "ece": 0.0812, "n": 800,
                    "flagged": False, "missing": None}},
    "transfer": {"student": {"wrg": 4.25, "wrg_ci": [1.0, 7.5]},
                 "anchor": {"wrg": -2.0, "wrg_ci": [-5.0, 1.0]}},
    "rmbench": {"hard": 40.0, "matrix": [[50.0, 40.0], [60.0, 55.0]]},
    "records": [{"name": "a", "value": 1.5}, {"name": "b|c", "value": 2.0}],
}


def test_format_value() -> None:
    assert format_value(61.234) == "61.2"
    assert format_value(0.08123) == "0.081"
    assert format_value(7) == "7"
    assert format_value(None) == "n/a"
    assert format_value(float("nan")) == "n/a"
    assert format_value(True) == "yes"
    assert format_value([58.0, 64.14]) == "[58.0, 64.1]"


def test_fold_intervals() -> None:
    folded = fold_intervals({"accuracy": 61.2, "accuracy_ci": [58.0, 64.1], "pgr": 0.5, "pgr_ci": [0.1, 0.9]})
    assert folded == {"accuracy": "61.2 [58.0, 64.1]", "pgr": "0.500 [0.100, 0.900]"}


def test_markdown_table_known_output() -> None:
    table = markdown_table([{"model": "bt", "acc": 61.25}, {"model": "icrm", "acc": None}])
    assert table.splitlines() == ["| model | acc |", "|---|---:|", "| bt | 61.2 |", "| icrm | n/a |"]
    assert markdown_table([]) == ""


def test_figure_markdown_relative_path(tmp_path: Path) -> None:
    text = figure_markdown(tmp_path / "plots" / "curve.png", "Accuracy vs N", base_dir=tmp_path)
    assert text.startswith("![Accuracy vs N](plots/curve.png)")


def test_render_report_writes_tables(tmp_path: Path) -> None:
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "acc_vs_n.png").write_bytes(PNG_MAGIC)
    md_path, html_path = render_report(METRICS, tmp_path, title="Run demo")
    md = md_path.read_text()
    assert md.startswith("# Run demo")
    # {dataset: {metric: value}} and {method: {metric: value}} become one row per entry.
    assert "| eval | accuracy | ece | n | flagged | missing |" in md
    assert "| hh | 61.2 [58.0, 64.1] | 0.081 | 800 | no | n/a |" in md
    assert "| anchor | -2.0 [-5.0, 1.0] |" in md
    assert "| 1 | 60.0 | 55.0 |" in md  # matrix row
    assert "b\\|c" in md
    assert "![acc vs n](plots/acc_vs_n.png)" in md
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert '<td class="num">61.2 [58.0, 64.1]</td>' in page
    assert "<h2>transfer</h2>" in page
    assert '<img src="plots/acc_vs_n.png"' in page
    assert "<td>b|c</td>" in page


def test_html_escapes_text() -> None:
    page = markdown_to_html("# Title\n\nsome <script>alert(1)</script> text\n\n- item `code`\n")
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "<li>item <code>code</code></li>" in page


def test_render_run_report(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        render_run_report(tmp_path)
    (tmp_path / "metrics.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        render_run_report(tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps(METRICS))
    md_path, html_path = render_run_report(tmp_path, figures=[])
    assert "61.2 [58.0, 64.1]" in md_path.read_text()
    assert html_path.exists()


def test_plots_write_pngs(tmp_path: Path) -> None:
    curve = Series("icrm", [0, 1, 2, 4], [50.0, 55.0, 58.0, 60.0], [48.0, 52.0, 55.0, 57.0],
                   [52.0, 58.0, 61.0, 63.0])
    paths = [
        plot_accuracy_vs_n([curve, Series("bt", [0, 1, 2, 4], [60.0] * 4)], tmp_path / "a" / "n.png"),
        plot_reliability_diagram([0.55, None, 0.8], [0.5, None, 0.75], [10, 0, 5], tmp_path / "rel.png",
                                 edges=[0.5, 2 / 3, 5 / 6, 1.0], ece=0.04),
        plot_reliability_diagram([0.55, 0.8], [0.5, 0.75], [10, 5], tmp_path / "rel_points.png"),
        plot_id_vs_ood(["teacher", "student"], [60.0, 65.0], [55.0, None], tmp_path / "scatter.png",
                       id_ci=[[55.0, 65.0], [60.0, 70.0]], ood_ci=[[50.0, 60.0], [None, None]]),
        plot_bars(["easy", "normal", "hard"], [80.0, 60.0, 30.0], tmp_path / "bars.png",
                  ci=[[75.0, 85.0], [55.0, 65.0], None], reference=50.0),
    ]
    for path in paths:
        assert path.read_bytes()[:8] == PNG_MAGIC


def test_import_does_not_load_matplotlib() -> None:
    code = ("import sys, rewardsmith.report, rewardsmith.evaluate; "
            "assert 'matplotlib' not in sys.modules and 'scipy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_wide_tables_are_transposed() -> None:
    from rewardsmith.report import report_markdown

    block = {f"m{i}": float(i) for i in range(10)}
    md = report_markdown({"transfer": {"student": block, "anchor": block}}, max_columns=8)
    assert "| metric | student | anchor |" in md
    assert "| m9 | 9.0 | 9.0 |" in md
