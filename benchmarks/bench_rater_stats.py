"""Per-rater sufficient statistics at scale: DuckDB and Spark (local mode) from Parquet, numpy in memory.

Synthetic ratings (int64 rater and item ids in random order, as a time-ordered log has them; 1,000,000 raters
by default, so 10 ratings per rater at 10 M rows and 1,000 at 1 B) are written to Parquet under /tmp in
chunks (memory stays bounded), one folder per size with files of at most 50 M rows. Every measurement runs in
a fresh process (benchmarks/_common.run_worker) and computes the statistics PEBS fits from:
- duckdb: calibrate.engines.DuckDBEngine(threads=2): the two queries of engines.py (means, then GROUP BY);
- spark: calibrate.engines.SparkEngine("local[2]"), the same SQL text through Spark SQL; JVM start is timed
  apart (spark.driver.memory 4g: the local-mode JVM is the driver and the executor at once);
- numpy: the three columns read with pyarrow into memory, rater ids factorised, two bincount passes
  (stats.stats_from_arrays); only where the rows fit in memory (--numpy-max).
Recorded per size and engine: wall seconds of the statistics and of the whole process, CPU seconds of the
statistics (the process's threads and, for Spark, its JVM), peak resident memory of the process and the JVM
sampled every 50 ms, ns per rating (wall and CPU), and the 1-minute load average before and after. The
marginal cost between two sizes, (t2 - t1) / (n2 - n1), is the part that must stay flat as the work grows; the
totals include fixed costs (imports, the 1 M-row result) that amortise. On the shared 2 cores the CPU figures
are the steadier ones: other processes stretch wall time, not the CPU time the statistics need.

    .venv/bin/python benchmarks/bench_rater_stats.py                               # 10M, 100M, 1B if disk allows
    .venv/bin/python benchmarks/bench_rater_stats.py --sizes 10000000 100000000 --engines duckdb numpy
    .venv/bin/python benchmarks/bench_rater_stats.py --keep                       # keep the Parquet under /tmp

Writes benchmarks/results/rater_stats.json and prints a table. The Parquet folders are deleted afterwards
unless --keep (only folders this script wrote: each holds a marker file).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_worker, write_results

RESULTS = Path(__file__).resolve().parent / "results" / "rater_stats.json"
DATA_ROOT = Path("/tmp/rewardsmith-bench-rater-stats")
MARKER = ".written-by-bench_rater_stats"
CHUNK = 5_000_000  # rows generated at a time
FILE_ROWS = 50_000_000  # rows per Parquet file
ROW_GROUP = 1_000_000
BYTES_PER_ROW = 26  # on disk, measured at 10 M rows (two random doubles, a random int64, a 17-bit item id)
SPARK_CONF = {"spark.driver.memory": "4g"}


# ----------------------------------------------------------------------------------------------- data


def generate(folder: Path, n_rows: int, n_raters: int, seed: int = 0) -> dict[str, Any]:
    """Writes n_rows synthetic ratings to folder/part-*.parquet in chunks; returns seconds and size on disk.

    Rater j has slope a_j ~ N(1, 0.3^2) and intercept b_j ~ N(0, 0.5^2); s = a_j r + b_j + N(0, 1), r ~ N(0, 1).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text("synthetic ratings written by benchmarks/bench_rater_stats.py\n")
    rng = np.random.default_rng(seed)
    slope = rng.normal(1.0, 0.3, n_raters)
    intercept = rng.normal(0.0, 0.5, n_raters)
    start = time.perf_counter()
    written, part, writer, in_file = 0, 0, None, 0
    while written < n_rows:
        size = min(CHUNK, n_rows - written)
        rater = rng.integers(0, n_raters, size, dtype=np.int64)
        r = rng.standard_normal(size)
        s = slope[rater] * r + intercept[rater] + rng.standard_normal(size)
        item = rng.integers(0, 100_000, size, dtype=np.int64)
        table = pa.table({"rater_id": rater, "item_id": item, "score": s, "model_score": r})
        if writer is None:
            writer = pq.ParquetWriter(folder / f"part-{part:05d}.parquet", table.schema)
        writer.write_table(table, row_group_size=ROW_GROUP)
        written += size
        in_file += size
        if in_file >= FILE_ROWS:
            writer.close()
            writer, in_file, part = None, 0, part + 1
    if writer is not None:
        writer.close()
    seconds = time.perf_counter() - start
    disk = sum(p.stat().st_size for p in folder.glob("*.parquet"))
    return {
        "rows": n_rows,
        "raters": n_raters,
        "write_seconds": round(seconds, 2),
        "parquet_gb": round(disk / 2**30, 3),
    }


def remove_generated(folder: Path) -> None:
    """Deletes a data folder only when this script wrote it (its marker file is there)."""
    if (folder / MARKER).exists():
        shutil.rmtree(folder)


# ----------------------------------------------------------------------------------------------- worker


def _tree_sum(root: int, value: Callable[[int, list[str]], float]) -> float:
    """Sum of value(pid, stat fields after the command name) over process `root` and its live descendants, read from
    /proc; processes that vanish while being read are skipped."""
    children: dict[int, list[int]] = {}
    values: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            values[int(entry)] = value(int(entry), fields)
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += values.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def _rss_bytes(pid: int, fields: list[str]) -> float:
    with open(f"/proc/{pid}/statm") as fh:
        return float(int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))


def _cpu_seconds(pid: int, fields: list[str]) -> float:
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime


def _tree_rss_bytes(root: int) -> int:
    """Resident bytes of process `root` and all its descendants."""
    return int(_tree_sum(root, _rss_bytes))


def _tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system, with reaped children) of process `root` and its live descendants: the worker's
    threads and, for Spark, the JVM it launched."""
    return _tree_sum(root, _cpu_seconds)


class PeakMemory:
    """Samples the resident memory of this process tree every `interval` s in a thread; peak_mb when stopped."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux; exact for this process
        return round(max(self.peak / 2**20, own), 1)


def worker(engine: str, folder: str) -> dict[str, Any]:
    """One measurement in this fresh process: the statistics of the Parquet ratings in `folder`."""
    out: dict[str, Any] = {"engine": engine}
    with PeakMemory() as memory:
        start = time.perf_counter()
        cpu_start = _tree_cpu_seconds(os.getpid())
        if engine == "numpy":
            import numpy as np
            import pandas as pd
            import pyarrow.parquet as pq

            from rewardsmith.calibrate.stats import stats_from_arrays

            table = pq.read_table(folder, columns=["rater_id", "score", "model_score"])
            rater = table.column("rater_id").to_numpy()
            s = table.column("score").to_numpy()
            r = table.column("model_score").to_numpy()
            del table
            out["read_seconds"] = round(time.perf_counter() - start, 3)
            codes, uniques = pd.factorize(rater, sort=True)
            stats = stats_from_arrays(
                codes, r.astype(np.float64), s.astype(np.float64), np.asarray(uniques).astype(str), len(uniques)
            )
        else:
            from rewardsmith.calibrate.engines import DuckDBEngine, SparkEngine, spark_session

            if engine == "spark":
                spark, _ = spark_session("local[2]", SPARK_CONF)  # started here, so the engine reuses it
                out["startup_seconds"] = round(time.perf_counter() - start, 3)
                cpu_start = _tree_cpu_seconds(os.getpid())  # the JVM's start is not the statistics' cost
                sql_engine: Any = SparkEngine("local[2]", SPARK_CONF)
            else:
                sql_engine = DuckDBEngine(threads=2)
            t0 = time.perf_counter()
            stats = sql_engine.rater_stats(folder).stats
            out["query_seconds"] = round(time.perf_counter() - t0, 3)
        out["stats_seconds"] = round(time.perf_counter() - start - out.get("startup_seconds", 0.0), 3)
        out["cpu_seconds"] = round(_tree_cpu_seconds(os.getpid()) - cpu_start, 2)
        if engine == "spark":
            spark.stop()
    out.update(
        ratings=stats.n_ratings,
        raters=stats.n_raters,
        peak_rss_mb=memory.peak_mb,
        checksum={"sum_rs": float(stats.sum_rs.sum()), "sum_ss": float(stats.sum_ss.sum()), "r_shift": stats.r_shift},
    )
    return out


# ----------------------------------------------------------------------------------------------- driver


def contention() -> dict[str, Any]:
    """Load average and core count when the benchmark starts and ends (the machine is shared)."""
    return {"loadavg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


def table_text(rows: list[dict[str, Any]]) -> str:
    header = (
        f"{'ratings':>14s} {'engine':>7s} {'stats s':>9s} {'CPU s':>8s} {'ns/rating':>10s} {'CPU ns':>8s} "
        f"{'marginal CPU ns':>16s} {'peak RSS MB':>12s} {'load before/after':>18s}"
    )
    lines = [header]
    for row in rows:
        marginal = row.get("marginal_cpu_ns_per_rating")
        load = row["loadavg_1m"]
        lines.append(
            f"{row['ratings']:>14,d} {row['engine']:>7s} {row['stats_seconds']:9.2f} "
            f"{row['cpu_seconds']:8.1f} {row['ns_per_rating']:10.1f} {row['cpu_ns_per_rating']:8.1f} "
            f"{marginal if marginal is not None else float('nan'):16.1f} {row['peak_rss_mb']:12.0f} "
            f"{load['before']:>9.1f}/{load['after']:<8.1f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000_000, 100_000_000, 1_000_000_000])
    parser.add_argument(
        "--engines", nargs="+", default=["duckdb", "spark", "numpy"], choices=["duckdb", "spark", "numpy"]
    )
    parser.add_argument("--raters", type=int, default=1_000_000)
    parser.add_argument(
        "--numpy-max",
        type=int,
        default=100_000_000,
        help="largest size numpy reads into memory (about 80 bytes a row at its peak)",
    )
    parser.add_argument(
        "--spark-max",
        type=int,
        default=100_000_000,
        help="largest size Spark local mode runs (time budget of a 2-core machine)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the Parquet folders under /tmp")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return

    begin = contention()
    t_begin = time.perf_counter()
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    data: list[dict[str, Any]] = []
    for n_rows in sorted(args.sizes):
        free = shutil.disk_usage("/tmp").free
        need = n_rows * BYTES_PER_ROW
        if need > 0.8 * free:
            skipped.append(
                {
                    "ratings": n_rows,
                    "why": f"needs about {need / 2**30:.0f} GiB of Parquet under /tmp; {free / 2**30:.0f} GiB free",
                }
            )
            print(f"skipping {n_rows:,}: {skipped[-1]['why']}", flush=True)
            continue
        folder = DATA_ROOT / f"n{n_rows}"
        if folder.exists() and (folder / MARKER).exists() and (folder / "_meta.json").exists():
            info = json.loads((folder / "_meta.json").read_text())
        else:
            remove_generated(folder)
            print(f"writing {n_rows:,} ratings to {folder} ...", flush=True)
            info = generate(folder, n_rows, args.raters)
            (folder / "_meta.json").write_text(json.dumps(info))
        data.append(info)
        for engine in args.engines:
            limit = {"numpy": args.numpy_max, "spark": args.spark_max}.get(engine)
            if limit is not None and n_rows > limit:
                why = (
                    "the rows do not fit in memory (24 GiB)"
                    if engine == "numpy"
                    else "beyond the time budget of this benchmark on 2 shared cores"
                )
                skipped.append({"ratings": n_rows, "engine": engine, "why": why})
                continue
            print(f"{engine} on {n_rows:,} ratings ...", flush=True)
            load_before = round(os.getloadavg()[0], 2)
            record = run_worker(__file__, ["--worker", engine, str(folder)], f"{engine} at {n_rows:,}")
            record["loadavg_1m"] = {"before": load_before, "after": round(os.getloadavg()[0], 2)}
            record["ns_per_rating"] = round(1e9 * record["stats_seconds"] / n_rows, 2)
            record["cpu_ns_per_rating"] = round(1e9 * record["cpu_seconds"] / n_rows, 2)
            rows.append(record)
        if not args.keep:
            remove_generated(folder)
    for engine in args.engines:
        mine = sorted((r for r in rows if r["engine"] == engine), key=lambda r: r["ratings"])
        for before, after in itertools.pairwise(mine):
            extra = after["ratings"] - before["ratings"]
            after["marginal_ns_per_rating"] = round(1e9 * (after["stats_seconds"] - before["stats_seconds"]) / extra, 2)
            after["marginal_cpu_ns_per_rating"] = round(1e9 * (after["cpu_seconds"] - before["cpu_seconds"]) / extra, 2)
    rows.sort(key=lambda r: (r["ratings"], r["engine"]))
    # Every engine must have computed the same statistics (checksums agree to rounding).
    agree = {}
    for n_rows in {r["ratings"] for r in rows}:
        sums = [r["checksum"]["sum_rs"] for r in rows if r["ratings"] == n_rows]
        agree[str(n_rows)] = bool(max(sums) - min(sums) <= 1e-9 * max(abs(x) for x in sums))
    end = contention()
    out = {
        "what": "per-rater sufficient statistics (n, sums of r, s, r^2, rs, s^2) from Parquet",
        "raters": args.raters,
        "data": data,
        "rows": rows,
        "skipped": skipped,
        "engines_agree": agree,
        "spark_conf": {"master": "local[2]", **SPARK_CONF},
        "duckdb_threads": 2,
        "load": {
            "start": begin,
            "end": end,
            "shared": bool(
                max([begin["loadavg_1m"], end["loadavg_1m"], *(max(r["loadavg_1m"].values()) for r in rows)]) > 2.5
            ),
            "note": "2 cores shared with other work; each row records the 1-minute load average before and "
            "after its process: above about 2 (the benchmark's own two threads) other processes ran "
            "beside it and the times are inflated",
        },
        "benchmark_seconds": round(time.perf_counter() - t_begin, 1),
        "command": " ".join(["OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rater_stats.py", *sys.argv[1:]]),
    }
    write_results(args.out, out, table_text(rows))


if __name__ == "__main__":
    main()
