"""metrics.json -> report.md and report.html. Formatting only: every number shown was computed elsewhere.

Layout rules for a metrics dict (any nesting):
- numbers, strings, bools and None at one level form a "metric | value" table; a `<key>_ci` [low, high]
  companion is folded into its `<key>` cell as "61.2 [58.0, 64.1]";
- a mapping whose values are all flat mappings (e.g. {method: {metric: value}}) becomes one wide table,
  one row per entry, transposed when it has more than `max_columns` metrics;
- a list of flat mappings becomes a table of records; a list of equal-length numeric lists a matrix;
  two or more lists of numbers of the same length at one level share a table (one row per index);
- other mappings become sub-sections (deeper headings).
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardsmith.errors import DataError

Figure = tuple[str | Path, str]

_MAX_INLINE_LIST = 12
# A formatted number, optionally followed by its interval, or a missing value: right-aligned.
_NUMERIC_CELL = re.compile(r"^(-?\d[\d.]*(e-?\d+)?( \[[^\]]*\])?|n/a)$")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | bool) or _is_number(value)


def _is_interval(value: Any) -> bool:
    return (isinstance(value, list | tuple) and len(value) == 2
            and all(v is None or _is_number(v) for v in value))


def _is_flat(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        _is_scalar(v) or (str(k).endswith("_ci") and _is_interval(v)) for k, v in value.items())


def _decimals(value: float, digits: int) -> int:
    """`digits` decimals, two more for magnitudes below 1 so fractions such as ECE, Brier or PGR keep
    their precision."""
    return digits + 2 if value != 0 and abs(value) < 1 else digits


def format_value(value: Any, digits: int = 1, decimals: int | None = None) -> str:
    """A cell's text: floats with `digits` decimals (two more when |x| < 1, or exactly `decimals` when
    given), ints as is, None / NaN as "n/a", bools as "yes" / "no", [low, high] as "[a, b]"."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        return f"{value:.{_decimals(value, digits) if decimals is None else decimals}f}"
    if _is_interval(value):
        return f"[{format_value(value[0], digits, decimals)}, {format_value(value[1], digits, decimals)}]"
    if isinstance(value, list | tuple):
        return ", ".join(format_value(v, digits, decimals) for v in value)
    return str(value)


def fold_intervals(record: Mapping[str, Any], digits: int = 1) -> dict[str, str]:
    """Formats a flat record, folding each `<key>_ci` [low, high] into the `<key>` cell as
    "value [low, high]" (the interval with the value's number of decimals). A `_ci` key without its base
    key is kept as its own cell."""
    out: dict[str, str] = {}
    for key, value in record.items():
        if key.endswith("_ci") and key[:-3] in record:
            continue
        text = format_value(value, digits)
        interval = record.get(f"{key}_ci")
        if _is_number(value) and _is_interval(interval):
            decimals = _decimals(float(value), digits) if isinstance(value, float) else digits
            text = f"{text} {format_value(interval, digits, decimals)}"
        out[key] = text
    return out


def _escape_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
                   digits: int = 1, headers: Sequence[str] | None = None) -> str:
    """A GitHub-style markdown table, one line per row.

    rows: records; columns: keys to show in order (default: every key, in order of first appearance);
    headers: header texts (default: the column keys). Values go through `format_value` unless already
    strings; columns whose cells are all numbers are right-aligned. Returns the table without a
    trailing newline ("" when there are no rows).
    """
    if not rows:
        return ""
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    if headers is None:
        headers = list(columns)
    if len(headers) != len(columns):
        raise ValueError(f"{len(headers)} headers for {len(columns)} columns")
    cells = [[_escape_cell(v if isinstance(v, str) else format_value(v, digits))
              for v in (row.get(c) for c in columns)] for row in rows]
    numeric = [all(_NUMERIC_CELL.match(row[j]) for row in cells) and any(row[j] != "n/a" for row in cells)
               for j in range(len(columns))]
    lines = ["| " + " | ".join(_escape_cell(str(h)) for h in headers) + " |",
             "|" + "|".join("---:" if right else "---" for right in numeric) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def figure_markdown(path: str | Path, caption: str = "", base_dir: str | Path | None = None) -> str:
    """Markdown that shows an image, with its path relative to `base_dir` (the report's folder) when it
    lies inside it, followed by an italic caption line when one is given."""
    target = Path(path)
    if base_dir is not None:
        with contextlib.suppress(ValueError):  # outside base_dir: keep the path as given
            target = target.resolve().relative_to(Path(base_dir).resolve())
    alt = caption.replace("]", ")").replace("[", "(") or target.stem
    text = f"![{alt}]({target.as_posix()})"
    return f"{text}\n\n*{caption}*" if caption else text


def _section_for_flat(record: Mapping[str, Any], digits: int) -> str:
    folded = fold_intervals(record, digits)
    return markdown_table([{"metric": k, "value": v} for k, v in folded.items()], digits=digits)


def _wide_table(name: str, table: Mapping[str, Mapping[str, Any]], digits: int, max_columns: int) -> str:
    folded = {row: fold_intervals(values, digits) for row, values in table.items()}
    metrics = list(dict.fromkeys(k for values in folded.values() for k in values))
    if len(metrics) > max_columns:
        rows = [{"metric": m, **{row: folded[row].get(m, "") for row in folded}} for m in metrics]
        return markdown_table(rows, ["metric", *folded], digits=digits)
    rows = [{name: row, **values} for row, values in folded.items()]
    return markdown_table(rows, [name, *metrics], digits=digits)


def _is_matrix(value: Any) -> bool:
    return (isinstance(value, list) and len(value) > 0
            and all(isinstance(r, list) and len(r) == len(value[0])
                    and all(_is_number(v) or v is None for v in r) for r in value))


def _render(mapping: Mapping[str, Any], level: int, lines: list[str], digits: int, max_columns: int) -> None:
    flat = {k: v for k, v in mapping.items()
            if _is_scalar(v) or (str(k).endswith("_ci") and _is_interval(v))}
    if flat:
        lines += [_section_for_flat(flat, digits), ""]
    # Two or more numeric lists of one length (e.g. reliability-curve bins) share a table, one row per index.
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
            _render(value, level + 1, lines, digits, max_columns)
        elif isinstance(value, list) and value and all(_is_flat(v) for v in value):
            lines += [f"{heading} {key}", "", markdown_table(value, digits=digits), ""]
        elif _is_matrix(value):
            rows = [{"": i, **{str(j): v for j, v in enumerate(row)}} for i, row in enumerate(value)]
            lines += [f"{heading} {key}", "", markdown_table(rows, digits=digits), ""]
        elif isinstance(value, list | tuple) and all(_is_scalar(v) for v in value):
            shown = format_value(list(value[:_MAX_INLINE_LIST]), digits)
            more = f" ... ({len(value)} values)" if len(value) > _MAX_INLINE_LIST else ""
            lines += [f"- {key}: {shown}{more}", ""]
        else:
            lines += [f"- {key}: `{json.dumps(value, default=str)[:200]}`", ""]


def report_markdown(metrics: Mapping[str, Any], *, title: str = "rewardsmith report",
                    figures: Sequence[Figure] = (), base_dir: str | Path | None = None, digits: int = 1,
                    max_columns: int = 8, intro: str = "") -> str:
    """The markdown text of a report: title, optional intro paragraph, the metrics laid out as in the
    module docstring (top-level numbers under "Summary"), then a "Figures" section.

    figures: (path, caption) pairs; paths are written relative to `base_dir` when inside it.
    """
    lines = [f"# {title}", ""]
    if intro:
        lines += [intro, ""]
    top_flat = any(_is_scalar(v) for v in metrics.values())
    if top_flat:
        lines += ["## Summary", ""]
    _render(metrics, 2, lines, digits, max_columns)
    if figures:
        lines += ["## Figures", ""]
        for path, caption in figures:
            lines += [figure_markdown(path, caption, base_dir), ""]
    return "\n".join(lines).rstrip() + "\n"


# ----------------------------------------------------------------------------------------------------
# Markdown -> HTML (the subset report_markdown writes: headings, tables, images, lists, paragraphs)

_CSS = """body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:0.5rem 0 1.5rem}th,td{border:1px solid #ccc;padding:0.25rem 0.6rem}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%}code{background:#f3f3f3;padding:0 0.2rem}"""

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")


def _inline(text: str) -> str:
    """Escapes HTML, then renders `code`, **bold** and *italic*."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"(?<![\w*])\*([^*]+)\*(?![\w*])", r"<em>\1</em>", out)


def _split_row(line: str) -> list[str]:
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", text)]


def _table_html(block: list[str]) -> str:
    header = _split_row(block[0])
    aligns = [c.endswith(":") for c in _split_row(block[1])]
    parts = ["<table>", "<thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in header) + "</tr></thead>",
             "<tbody>"]
    for line in block[2:]:
        cells = _split_row(line)
        right = [i < len(aligns) and aligns[i] for i in range(len(cells))]
        parts.append("<tr>" + "".join(
            f'<td class="num">{_inline(c)}</td>' if r else f"<td>{_inline(c)}</td>"
            for c, r in zip(cells, right, strict=True)) + "</tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


def markdown_to_html(markdown: str, title: str = "rewardsmith report") -> str:
    """A standalone HTML page from the markdown subset `report_markdown` writes: ATX headings, pipe
    tables (with an alignment row), image lines, "- " bullet lists and paragraphs; inline code, bold and
    italic. Everything else is escaped and kept as paragraph text."""
    lines = markdown.splitlines()
    body: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        heading = re.match(r"^(#{1,6})\s+(.*)$", stripped)
        image = _IMAGE.match(stripped)
        if heading:
            level = len(heading.group(1))
            body.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            i += 1
        elif image:
            alt, src = image.groups()
            body.append(f'<p><img src="{html.escape(src)}" alt="{html.escape(alt)}"></p>')
            i += 1
        elif stripped.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$",
                                                                            lines[i + 1].strip()):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            body.append(_table_html(block))
        elif stripped.startswith("- "):
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            body.append("<ul>\n" + "\n".join(items) + "\n</ul>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not re.match(r"^(#|\||- |!\[)", lines[i].strip()):
                para.append(lines[i].strip())
                i += 1
            if not para:  # a line that looked like a block start but was not one
                para.append(stripped)
                i += 1
            body.append(f"<p>{_inline(' '.join(para))}</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


# ----------------------------------------------------------------------------------------------------
# Files


def render_report(metrics: Mapping[str, Any], out_dir: str | Path, *, title: str = "rewardsmith report",
                  figures: Sequence[Figure] | None = None, digits: int = 1, max_columns: int = 8,
                  intro: str = "") -> tuple[Path, Path]:
    """Writes `out_dir/report.md` and `out_dir/report.html` from a metrics dict.

    figures: (path, caption) pairs; None includes every `out_dir/plots/*.png` (sorted, captioned by file
    name). Returns (markdown path, HTML path).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if figures is None:
        figures = [(p, p.stem.replace("_", " ")) for p in sorted((out / "plots").glob("*.png"))]
    text = report_markdown(metrics, title=title, figures=figures, base_dir=out, digits=digits,
                           max_columns=max_columns, intro=intro)
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text(text, encoding="utf-8")
    html_path.write_text(markdown_to_html(text, title), encoding="utf-8")
    return md_path, html_path


def render_run_report(run_dir: str | Path, *, title: str | None = None,
                      figures: Sequence[Figure] | None = None) -> tuple[Path, Path]:
    """Reads `run_dir/metrics.json` and writes report.md and report.html beside it (see `render_report`).

    Raises DataError when metrics.json is missing or is not a JSON object.
    """
    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        raise DataError("metrics file not found", path=path)
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"not valid JSON ({err.msg} at line {err.lineno})", path=path) from None
    if not isinstance(metrics, dict):
        raise DataError("expected a JSON object at the top level", path=path)
    return render_report(metrics, run_dir, title=title or f"rewardsmith report: {Path(run_dir).name}",
                         figures=figures)
