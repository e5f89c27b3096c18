"""The one report renderer: a Report (title, intro, sections of markdown, figures) -> report.md and a
standalone report.html (markdown-it-py, no external assets). Formatting only: every number shown was computed
elsewhere and arrives in plain dicts.

Tables: floats of one column share one number of decimals (chosen from the column's magnitudes), and a
`<key>_ci` [low, high] companion is folded into its `<key>` cell as "61.2 [58.0, 64.1]".

`metrics_sections` lays out any metrics dict automatically:
- numbers, strings, bools and None at one level form a "metric | value" table;
- a mapping whose values are all flat mappings (e.g. {method: {metric: value}}) becomes one wide table,
  transposed when it has more than `max_columns` metrics;
- a list of flat mappings becomes a table of records; a list of equal-length numeric lists a matrix;
- other mappings become sub-sections (deeper headings).
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardsmith.evaluate.formatting import format_value, with_interval  # the report's cell text, re-exported
from rewardsmith.evaluate.formatting import is_interval as _is_interval
from rewardsmith.evaluate.formatting import is_number as _is_number
from rewardsmith.io.atomic import atomic_write_text

_MAX_INLINE_LIST = 12
_NUMERIC_CELL = re.compile(r"^(-?\d[\d.,]*(e-?\d+)?%?( \[[^\]]*\])?( ±[\d.]+)?|n/a)$")


def slug(text: str) -> str:
    """A file-name part from a label: letters and digits kept, lowercased, the rest "_"."""
    return "".join(c if c.isalnum() else "_" for c in text).strip("_").lower()


@dataclass
class Figure:
    path: Path
    caption: str


@dataclass
class Section:
    heading: str
    body: str
    level: int = 2


@dataclass
class Report:
    title: str
    intro: str = ""
    sections: list[Section] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)

    def add(self, heading: str, body: str, level: int = 2) -> None:
        self.sections.append(Section(heading, body, level))


# ----------------------------------------------------------------------------------------------------
# Cells and tables


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | bool) or _is_number(value)


def _is_flat(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        _is_scalar(v) or (str(k).endswith("_ci") and _is_interval(v)) for k, v in value.items()
    )


def decimals_for(values: Sequence[Any], digits: int = 1) -> int:
    """Decimals for a group of floats: `digits`, or digits + 2 when every non-zero magnitude is below 1
    (fractions such as ECE, Brier or PGR keep their precision)."""
    finite = [abs(float(v)) for v in values if isinstance(v, float) and math.isfinite(v) and v != 0]
    return digits + 2 if finite and max(finite) < 1 else digits


def fold_intervals(record: Mapping[str, Any], digits: int = 1) -> dict[str, str]:
    """Formats a flat record (each value with its own magnitude), folding `<key>_ci` into `<key>`."""
    out: dict[str, str] = {}
    for key, value in record.items():
        if key.endswith("_ci") and key[:-3] in record:
            continue
        out[key] = with_interval(value, record.get(f"{key}_ci"), decimals_for([value], digits))
    return out


def _escape_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    digits: int = 1,
    headers: Sequence[str] | None = None,
) -> str:
    """A GitHub-style markdown table, one line per row.

    rows: records; columns: keys to show in order (default: every key, in order of first appearance);
    headers: header texts (default: the column keys). Floats of a column share one number of decimals
    (decimals_for); a `<col>_ci` key in a row is folded into the `<col>` cell; strings are kept as they are.
    Numeric columns are right-aligned. Returns the table without a trailing newline ("" with no rows).
    """
    if not rows:
        return ""
    if columns is None:
        columns = [
            k
            for k in dict.fromkeys(key for row in rows for key in row)
            if not (str(k).endswith("_ci") and str(k)[:-3] in row_keys(rows))
        ]
    if headers is None:
        headers = list(columns)
    if len(headers) != len(columns):
        raise ValueError(f"{len(headers)} headers for {len(columns)} columns")
    decimals = {c: decimals_for([row.get(c) for row in rows], digits) for c in columns}
    cells = [
        [
            _escape_cell(
                row[c] if isinstance(row.get(c), str) else with_interval(row.get(c), row.get(f"{c}_ci"), decimals[c])
            )
            for c in columns
        ]
        for row in rows
    ]
    numeric = [
        all(_NUMERIC_CELL.match(row[j]) for row in cells) and any(row[j] != "n/a" for row in cells)
        for j in range(len(columns))
    ]
    lines = [
        "| " + " | ".join(_escape_cell(str(h)) for h in headers) + " |",
        "|" + "|".join("---:" if right else "---" for right in numeric) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def row_keys(rows: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(k) for row in rows for k in row}


def figure_markdown(path: str | Path, caption: str = "", base_dir: str | Path | None = None) -> str:
    """Markdown that shows an image (path relative to `base_dir` when inside it) and an italic caption."""
    target = Path(path)
    if base_dir is not None:
        with contextlib.suppress(ValueError):
            target = target.resolve().relative_to(Path(base_dir).resolve())
    alt = caption.replace("]", ")").replace("[", "(") or target.stem
    text = f"![{alt}]({target.as_posix()})"
    return f"{text}\n\n*{caption}*" if caption else text


# ----------------------------------------------------------------------------------------------------
# Automatic layout of a metrics dict


def _flat_table(record: Mapping[str, Any], digits: int) -> str:
    folded = fold_intervals(record, digits)
    return markdown_table([{"metric": k, "value": v} for k, v in folded.items()])


def _wide_table(name: str, table: Mapping[str, Mapping[str, Any]], digits: int, max_columns: int) -> str:
    metrics = [
        k
        for k in dict.fromkeys(k for values in table.values() for k in values)
        if not (k.endswith("_ci") and k[:-3] in {m for v in table.values() for m in v})
    ]
    if len(metrics) > max_columns:  # one row per metric: each row one quantity, formatted on its own
        rows = []
        for m in metrics:
            dec = decimals_for([values.get(m) for values in table.values()], digits)
            rows.append(
                {"metric": m, **{str(r): with_interval(v.get(m), v.get(f"{m}_ci"), dec) for r, v in table.items()}}
            )
        return markdown_table(rows, ["metric", *map(str, table)])
    rows = [{name: str(row), **values} for row, values in table.items()]
    return markdown_table(rows, [name, *metrics], digits=digits)


def _is_matrix(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(
            isinstance(r, list) and len(r) == len(value[0]) and all(_is_number(v) or v is None for v in r)
            for r in value
        )
    )


def _layout(mapping: Mapping[str, Any], level: int, lines: list[str], digits: int, max_columns: int) -> None:
    flat = {k: v for k, v in mapping.items() if _is_scalar(v) or (str(k).endswith("_ci") and _is_interval(v))}
    if flat:
        lines += [_flat_table(flat, digits), ""]
    by_length: dict[int, list[str]] = {}
    for key, value in mapping.items():
        if key not in flat and isinstance(value, list) and value and all(_is_scalar(v) for v in value):
            by_length.setdefault(len(value), []).append(key)
    tabulated = {k for keys in by_length.values() if len(keys) > 1 for k in keys}
    for keys in by_length.values():
        if len(keys) > 1:
            rows = [{"index": i, **{k: mapping[k][i] for k in keys}} for i in range(len(mapping[keys[0]]))]
            lines += [markdown_table(rows, digits=digits), ""]
    heading = "#" * min(level, 6)
    for key, value in mapping.items():
        if key in flat or key in tabulated:
            continue
        if isinstance(value, Mapping) and value and all(_is_flat(v) for v in value.values()):
            lines += [f"{heading} {key}", "", _wide_table(str(key), value, digits, max_columns), ""]
        elif isinstance(value, Mapping):
            lines += [f"{heading} {key}", ""]
            _layout(value, level + 1, lines, digits, max_columns)
        elif isinstance(value, list) and value and all(_is_flat(v) for v in value):
            lines += [f"{heading} {key}", "", markdown_table(value, digits=digits), ""]
        elif _is_matrix(value):
            rows = [{"": i, **{str(j): v for j, v in enumerate(row)}} for i, row in enumerate(value)]
            lines += [f"{heading} {key}", "", markdown_table(rows, digits=digits), ""]
        elif isinstance(value, list | tuple) and all(_is_scalar(v) for v in value):
            dec = decimals_for(list(value), digits)
            shown = format_value(list(value[:_MAX_INLINE_LIST]), dec)
            more = f" ... ({len(value)} values)" if len(value) > _MAX_INLINE_LIST else ""
            lines += [f"- {key}: {shown}{more}", ""]
        else:
            lines += [f"- {key}: `{json.dumps(value, default=str)[:200]}`", ""]


def metrics_markdown(metrics: Mapping[str, Any], *, level: int = 2, digits: int = 1, max_columns: int = 8) -> str:
    """Markdown laying out a metrics dict as described in the module docstring."""
    lines: list[str] = []
    _layout(metrics, level, lines, digits, max_columns)
    return "\n".join(lines).rstrip()


# ----------------------------------------------------------------------------------------------------
# Output

_CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:72rem;margin:2rem auto;
padding:0 1rem;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:0.5rem 0 1.5rem;font-size:0.92rem}th,td{border:1px solid #ccc;
padding:0.25rem 0.6rem}th{background:#f3f3f3}td[style*="right"]{font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto}code{background:#f3f3f3;padding:0 0.2rem}h1{font-size:1.6rem}
h2{font-size:1.3rem;margin-top:2rem;border-bottom:1px solid #ddd}"""


def report_markdown(report: Report, base_dir: str | Path | None = None) -> str:
    lines = [f"# {report.title}", ""]
    if report.intro:
        lines += [report.intro.strip(), ""]
    for section in report.sections:
        lines += [f"{'#' * min(section.level, 6)} {section.heading}", "", section.body.strip(), ""]
    if report.figures:
        lines += ["## Figures", ""]
        for fig in report.figures:
            lines += [figure_markdown(fig.path, fig.caption, base_dir), ""]
    return "\n".join(lines).rstrip() + "\n"


def markdown_to_html(markdown: str, title: str) -> str:
    """A standalone HTML page (CommonMark + tables, rendered by markdown-it-py) with inline CSS."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )


def write_report(report: Report, out_dir: str | Path, write: Any = None) -> tuple[Path, Path]:
    """Writes out_dir/report.md and out_dir/report.html. `write(name, text) -> Path` writes a file (a run
    folder's write_text, which checks ownership); default: an atomic write."""
    out = Path(out_dir)
    text = report_markdown(report, out)
    writer = write or (lambda name, content: atomic_write_text(out / name, content))
    md = writer("report.md", text)
    page = writer("report.html", markdown_to_html(text, report.title))
    return Path(md), Path(page)
