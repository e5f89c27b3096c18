"""Result blocks of docs/scale.md and the README's Scale section, from benchmarks/results/*.json."""

from __future__ import annotations

import json
from collections.abc import Callable

from blocks_common import BENCH, table

ENGINE_NAMES = {"duckdb": "DuckDB (2 threads)", "spark": "Spark SQL, local[2]", "numpy": "numpy in memory"}


def _rows_label(n: int) -> str:
    return f"{n / 1e9:g} B" if n >= 1e9 else f"{n / 1e6:g} M"


def block_rater_stats() -> str:
    """Per-rater sufficient statistics at scale (benchmarks/results/rater_stats.json): per size and engine the
    wall and CPU seconds, ns per rating, the marginal CPU cost between sizes and peak memory; what was skipped."""
    b = json.loads((BENCH / "rater_stats.json").read_text(encoding="utf-8"))
    rows = []
    for r in sorted(b["rows"], key=lambda r: (r["ratings"], list(ENGINE_NAMES).index(r["engine"]))):
        marginal = r.get("marginal_cpu_ns_per_rating")
        load = r["loadavg_1m"]
        rows.append(
            [
                _rows_label(r["ratings"]),
                ENGINE_NAMES[r["engine"]],
                f"{r['stats_seconds']:.1f}",
                f"{r['cpu_seconds']:.1f}",
                f"{r['ns_per_rating']:.0f}",
                f"{r['cpu_ns_per_rating']:.0f}",
                "-" if marginal is None else f"{marginal:.0f}",
                f"{r['peak_rss_mb'] / 1024:.2f}",
                f"{load['before']:.1f} / {load['after']:.1f}",
            ]
        )
    for s in b["skipped"]:
        rows.append(
            [
                _rows_label(s["ratings"]),
                ENGINE_NAMES.get(s.get("engine"), "all engines"),
                "not run",
                "",
                "",
                "",
                "",
                "",
                s["why"],
            ]
        )
    data = ", ".join(f"{_rows_label(d['rows'])} rows {d['parquet_gb']:.2f} GB" for d in b["data"])
    agree = "yes" if all(b["engines_agree"].values()) else "NO"
    return (
        f"Per-rater sufficient statistics from Parquet ({b['raters']:,} raters, rows in random rater order; "
        f"{data}), each measurement in a fresh process on 2 cores shared with other work "
        "(load: the 1-minute load average before / after; above 2 other processes ran beside it, which "
        "stretches wall time but not CPU time). Marginal: (CPU(n2) - CPU(n1)) / (n2 - n1), the cost of one more "
        f"rating; peak memory includes Spark's JVM. Engines agree on the statistics: {agree}.\n\n"
        + table(
            [
                "ratings",
                "engine",
                "wall s",
                "CPU s",
                "wall ns / rating",
                "CPU ns / rating",
                "marginal CPU ns / rating",
                "peak memory GB",
                "load",
            ],
            rows,
        )
        + f"\n\nCommand: `{b['command']}`; results: `benchmarks/results/rater_stats.json`; the SQL and the "
        "engines: `src/rewardsmith/calibrate/engines.py`, docs/scale.md."
    )


BLOCKS: dict[str, Callable[[], str]] = {"rater-stats": block_rater_stats}
