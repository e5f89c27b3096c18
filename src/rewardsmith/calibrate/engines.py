"""Per-rater sufficient statistics from the engine the ratings live in: one GROUP BY text that DuckDB
(embedded) and Spark SQL (a cluster, or local mode) both execute unchanged.

    stats, counts = engine_rater_stats("duckdb", "ratings/*.parquet")        # rewardsmith.calibrate.readers
    stats, counts = engine_rater_stats("spark", "s3a://logs/ratings/")     # SparkEngine(master=...) too
    PEBS().fit(stats)

The readers `--engine` names (memory, duckdb, spark) are rewardsmith.calibrate.readers.

How one SQL text serves both engines: each engine only makes a view `ratings` of the Parquet data with fixed
column names (rater_key, item_key, model_score, score, group_0, ...), since reading files and quoting
identifiers are the parts the two dialects spell differently. The statistics are then asked of that view in
the subset both accept: CAST / TRY_CAST to DOUBLE and STRING, CASE, abs, md5, substr, ||, count, sum, min.
Sums are of values shifted by the global means (a first, one-row query), as rater_stats does in memory, so
that sums of squares do not cancel at scale. A value is finite when abs(x) <= the largest double: NULL and
NaN (which both engines order above every number) and infinities fail that test.

The within-rater hold-out can be computed the same way: a rating is held out for seed k when the first 8 hex
digits of md5("rater|item|k") fall below fraction * 16^8 (`hash_heldout_mask` is the same rule in Python),
and the query adds each seed's held-out sums; fitting on (all - held-out) and summing squared errors on the
held-out part needs nothing else (stats.affine_sse).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from rewardsmith.calibrate.stats import RaterStats
from rewardsmith.errors import ConfigError, DataError, first_line, one_line

if TYPE_CHECKING:
    import pandas as pd


OnBadRow = Literal["error", "skip"]
# Reasons a row is dropped, in the order they are checked (as in data.ratings.clean_ratings); code k + 1 in SQL.
DROP_REASONS = ("missing_rater_id", "missing_item_id", "nonfinite_score", "nonfinite_model_score", "score_out_of_range")
_DROP_TEXT = {
    "missing_rater_id": "empty rater_id",
    "missing_item_id": "empty item_id",
    "nonfinite_score": "score is missing, NaN, infinite or not a number",
    "nonfinite_model_score": "model_score is missing, NaN, infinite or not a number",
    "score_out_of_range": "score outside the declared range",
}
_DROP_FIELD = {
    "missing_rater_id": "rater_id",
    "missing_item_id": "item_id",
    "nonfinite_score": "score",
    "nonfinite_model_score": "model_score",
    "score_out_of_range": "score",
}
_LARGEST_DOUBLE = "1.7976931348623157E308"  # a DOUBLE literal in both dialects (exponent notation)
_HASH_DIGITS = 8  # hex digits of md5 compared for the hold-out split (2^32 levels)
PARQUET_SUFFIXES = (".parquet", ".pq")


# ----------------------------------------------------------------------------------------------
# The SQL (pure functions of the query's shape)


@dataclass(frozen=True)
class HashSplit:
    """The hash hold-out: rating (rater, item) is held out for seed k when md5("rater|item|k")[:8] < threshold.

    fraction: expected share held out, in (0, 1); seeds: one set of held-out sums per seed."""

    fraction: float
    seeds: tuple[int, ...]

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction < 1.0:
            raise ConfigError(f"hold-out fraction must lie in (0, 1), got {self.fraction}")
        if not self.seeds:
            raise ConfigError("a hash split needs at least one seed")

    @property
    def threshold(self) -> str:
        """fraction * 16^8 as 8 lower-case hex digits: fixed-width hex strings compare as their numbers."""
        return f"{min(round(self.fraction * 16**_HASH_DIGITS), 16**_HASH_DIGITS - 1):0{_HASH_DIGITS}x}"


@dataclass(frozen=True)
class StatsQuery:
    """The shape of a statistics query over the view `ratings`.

    rater_is_text: the rater column holds text (then an empty id is a bad row, as in memory).
    n_groups: demographic columns group_0 .. group_{n-1} whose per-rater label is wanted.
    score_range: (low, high) bounds of a valid score, or None. split: the hash hold-out, or None.
    """

    rater_is_text: bool = True
    item_is_text: bool = True
    n_groups: int = 0
    score_range: tuple[float, float] | None = None
    split: HashSplit | None = None


def double_literal(value: float) -> str:
    """A DOUBLE literal both dialects read back to the same float (17 significant digits, exponent form)."""
    if not np.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return f"{float(value):.16e}"


def _finite(expr: str) -> str:
    return f"abs({expr}) <= {_LARGEST_DOUBLE}"


def _reason_sql(query: StatsQuery) -> str:
    """CASE giving 0 for a valid row, else 1 + the index of its first failed check in DROP_REASONS.
    A NULL condition falls through to ELSE, so missing values count as failures."""
    r, s = "TRY_CAST(model_score AS DOUBLE)", "TRY_CAST(score AS DOUBLE)"
    checks = [
        "rater_key IS NOT NULL" + (" AND rater_key <> ''" if query.rater_is_text else ""),
        ("item_key IS NOT NULL" + (" AND item_key <> ''" if query.item_is_text else "")) if query.split else "",
        _finite(s),
        _finite(r),
    ]
    if query.score_range is not None:
        low, high = map(double_literal, query.score_range)
        checks.append(f"{s} >= {low} AND {s} <= {high}")
    else:
        checks.append("")
    text = "0"
    for code in range(len(checks), 0, -1):  # innermost check last: CASE WHEN c1 THEN (CASE WHEN c2 ...) ELSE 1
        if checks[code - 1]:
            text = f"CASE WHEN {checks[code - 1]} THEN {text} ELSE {code} END"
    return text


def summary_sql(query: StatsQuery) -> str:
    """One row: rows_read, dropped_<reason> per DROP_REASONS, r_mean and s_mean of the valid rows."""
    reason = _reason_sql(query)
    drops = ", ".join(
        f"sum(CASE WHEN reason = {k + 1} THEN 1 ELSE 0 END) AS dropped_{name}" for k, name in enumerate(DROP_REASONS)
    )
    return (
        f"SELECT count(*) AS rows_read, {drops}, "
        "avg(CASE WHEN reason = 0 THEN r END) AS r_mean, avg(CASE WHEN reason = 0 THEN s END) AS s_mean "
        f"FROM (SELECT {reason} AS reason, TRY_CAST(model_score AS DOUBLE) AS r, "
        "TRY_CAST(score AS DOUBLE) AS s FROM ratings) AS checked"
    )


_SUMS = (("n", "1"), ("sum_r", "r"), ("sum_s", "s"), ("sum_rr", "r * r"), ("sum_rs", "r * s"), ("sum_ss", "s * s"))


def group_by_sql(query: StatsQuery, r_shift: float, s_shift: float) -> str:
    """One row per rater: rater (text), n, sum_r, sum_s, sum_rr, sum_rs, sum_ss of r - r_shift and s - s_shift,
    group_<i> (the smallest non-empty label of the rater, 'unknown' if none) and, with a split, the same six
    sums over the held-out ratings of each seed k as <name>__h<k>."""
    inner = [
        f"rater_key, TRY_CAST(model_score AS DOUBLE) - {double_literal(r_shift)} AS r",
        f"TRY_CAST(score AS DOUBLE) - {double_literal(s_shift)} AS s",
    ]
    inner += [f"group_{i}" for i in range(query.n_groups)]
    outer = ["CAST(rater_key AS STRING) AS rater"]
    outer += [f"CAST(sum({expr}) AS DOUBLE) AS {name}" for name, expr in _SUMS]
    outer += [f"coalesce(min(CAST(group_{i} AS STRING)), 'unknown') AS group_{i}" for i in range(query.n_groups)]
    if query.split is not None:
        key = "CAST(rater_key AS STRING) || '|' || CAST(item_key AS STRING) || '|'"
        for k, seed in enumerate(query.split.seeds):
            digest = f"substr(md5({key} || '{int(seed)}'), 1, {_HASH_DIGITS})"
            inner.append(f"CASE WHEN {digest} < '{query.split.threshold}' THEN 1 ELSE 0 END AS h{k}")
            outer += [f"CAST(sum(h{k} * {expr}) AS DOUBLE) AS {name}__h{k}" for name, expr in _SUMS]
    return (
        f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} FROM ratings "
        f"WHERE {_reason_sql(query)} = 0) AS valid_ratings GROUP BY rater_key"
    )


def hash_heldout_mask(
    rater_ids: Sequence[str] | np.ndarray, item_ids: Sequence[str] | np.ndarray, fraction: float, seed: int
) -> np.ndarray:
    """The split of HashSplit in Python: held-out mask (N,) of ratings given as text ids (N,) and (N,)."""
    threshold = HashSplit(fraction, (seed,)).threshold
    return np.array(
        [
            hashlib.md5(f"{r}|{i}|{seed}".encode()).hexdigest()[:_HASH_DIGITS] < threshold
            for r, i in zip(np.asarray(rater_ids, str), np.asarray(item_ids, str), strict=True)
        ],
        dtype=bool,
    )


@dataclass(frozen=True)
class EngineStats:
    """What a statistics query returns: `stats` over all valid ratings (raters sorted by id), `heldout[k]` the
    held-out part of seed k (same raters and shifts; empty without a split) and the row counts
    (rows_read, ratings_kept, raters, dropped_<reason> for each reason that dropped rows)."""

    stats: RaterStats
    heldout: tuple[RaterStats, ...]
    counts: dict[str, int]


def stats_from_frame(
    frame: pd.DataFrame, r_shift: float, s_shift: float, group_names: Sequence[str], n_splits: int = 0
) -> tuple[RaterStats, tuple[RaterStats, ...]]:
    """RaterStats (raters sorted by id) from the rows of group_by_sql; group_names name group_0, group_1, ..."""
    ids = frame["rater"].to_numpy().astype(str)
    order = np.argsort(ids, kind="stable")

    def one(suffix: str, groups: Mapping[str, np.ndarray]) -> RaterStats:
        n, sum_r, sum_s, sum_rr, sum_rs, sum_ss = (
            frame[f"{name}{suffix}"].to_numpy(np.float64)[order] for name, _ in _SUMS
        )
        return RaterStats(ids[order], n, sum_r, sum_s, sum_rr, sum_rs, sum_ss, float(r_shift), float(s_shift), groups)

    groups = {name: frame[f"group_{i}"].to_numpy().astype(str)[order] for i, name in enumerate(group_names)}
    return one("", groups), tuple(one(f"__h{k}", groups) for k in range(n_splits))


# ----------------------------------------------------------------------------------------------
# Engines: how each one opens Parquet as the view `ratings` and runs SQL


class SQLSession(ABC):
    """An open connection of one engine to one Parquet location."""

    @abstractmethod
    def schema(self) -> dict[str, bool]:
        """Column name -> whether it holds text, of the data at the location."""

    @abstractmethod
    def register(self, columns: Mapping[str, str]) -> None:
        """Creates the view `ratings` holding the data's column columns[alias] under each alias."""

    @abstractmethod
    def query(self, sql: str) -> pd.DataFrame:
        """The result of `sql` as a DataFrame."""


def is_uri(location: str) -> bool:
    """A location with a scheme (s3://, s3a://, gs://, hdfs://, abfss://, https://, file://) is passed on
    unchanged: the engine reads it."""
    return "://" in location


def check_parquet_location(location: str, engine: str) -> str:
    """The location as given, after checking a local one: an existing Parquet file or folder, or a glob that
    matches at least one file. DataError / ConfigError (one line) otherwise; URIs are not checked."""
    if is_uri(location):
        return location
    path = Path(location).expanduser()
    if glob.has_magic(str(path)):
        if not glob.glob(str(path), recursive=True):
            raise DataError("no file matches this pattern", path=path)
        return str(path)
    if not path.exists():
        from rewardsmith.data.ratings import RATINGS

        if location in RATINGS:
            raise ConfigError(
                f"{location!r} is a named ratings source, read with --engine memory; --engine "
                f"{engine} reads Parquet files (a path, a glob, a folder or a URI)"
            )
        raise DataError("ratings file not found", path=path)
    if path.is_file() and path.suffix.lower() not in PARQUET_SUFFIXES:
        raise ConfigError(
            f"--engine {engine} reads Parquet, not {path.suffix or 'this file'} ({path}); convert "
            "it (e.g. duckdb -c \"COPY (FROM 'in.csv') TO 'out.parquet'\") or use --engine memory"
        )
    if path.is_dir():
        _check_parquet_folder(path, engine)
    return str(path)


def _folder_files(folder: Path) -> list[Path]:
    """The data files under `folder`, in sorted order: hidden and metadata entries ("." or "_" names, as Spark
    writes _SUCCESS and .crc files) and what lies under them left aside."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts)
    )


def _check_parquet_folder(folder: Path, engine: str) -> None:
    """A folder of ratings holds Parquet files only: another file (a CSV export beside them) would be left out
    without a word, so it is a ConfigError naming it; a folder without a Parquet file is a DataError."""
    files = _folder_files(folder)
    stray = next((p for p in files if p.suffix.lower() not in PARQUET_SUFFIXES), None)
    if stray is not None:
        raise ConfigError(
            f"{stray}: not a Parquet file, in the ratings folder {folder} that --engine {engine} reads; move it "
            f"out, or give the Parquet files as a glob ({folder / '*.parquet'})"
        )
    if not files:
        raise DataError("no Parquet file in this folder", path=folder)


def _parquet_globs(folder: Path) -> list[str]:
    """The globs of a checked ratings folder's Parquet files, one per suffix it holds."""
    suffixes = {p.suffix.lower() for p in _folder_files(folder)}
    return [str(folder / "**" / f"*{suffix}") for suffix in PARQUET_SUFFIXES if suffix in suffixes]


def _locations(location: str | Path | Sequence[str | Path], engine: str) -> tuple[str, ...]:
    items = [location] if isinstance(location, str | Path) else list(location)
    if not items:
        raise ConfigError("no ratings location given")
    return tuple(check_parquet_location(str(item), engine) for item in items)


def _local_dir(location: str) -> bool:
    return not is_uri(location) and Path(location).is_dir()


def _as_count(value: Any) -> int:
    """An integer count from a query cell (NULL / NaN, the sum over no rows, is 0)."""
    return 0 if value is None or value != value else int(value)


class SQLEngine(ABC):
    """An engine that computes the statistics where the ratings are; subclasses only open sessions."""

    name: ClassVar[str]

    @abstractmethod
    def session(self, locations: Sequence[str]) -> AbstractContextManager[SQLSession]:
        """A context manager yielding an SQLSession on the Parquet data at `locations` (checked already)."""

    def rater_stats(
        self,
        location: str | Path | Sequence[str | Path],
        *,
        columns: Mapping[str, str] | None = None,
        group_columns: Sequence[str] = (),
        score_range: tuple[float, float] | None = None,
        on_bad_row: OnBadRow = "skip",
        split: HashSplit | None = None,
        default_group: bool = False,
    ) -> EngineStats:
        """Per-rater statistics of the Parquet ratings at `location` (a path, glob, folder or URI, or a list).

        columns: standard name (rater_id, item_id, score, model_score) -> the data's column, for other names.
        group_columns: demographic columns whose per-rater label is kept (RaterStats.groups); with none given
        and default_group, the data's first text column other than the standard ones (if any).
        on_bad_row: "skip" drops and counts bad rows; "error" raises a DataError naming the first reason.
        split: also the held-out sums of each seed of a hash hold-out (item_id is then needed).
        Raises DataError for missing columns or when no rating is valid.
        """
        names = {
            "rater_id": "rater_id",
            "item_id": "item_id",
            "score": "score",
            "model_score": "model_score",
            **dict(columns or {}),
        }
        locations = _locations(location, self.name)
        where = locations[0]
        with self.session(locations) as session:
            schema = session.schema()
            if default_group and not group_columns:
                from rewardsmith.data.ratings import REQUIRED_COLUMNS

                standard = {*REQUIRED_COLUMNS, *names.values()}
                group_columns = [c for c, text in schema.items() if text and c not in standard][:1]
            needed = [names["rater_id"], names["score"], names["model_score"], *group_columns]
            needed += [names["item_id"]] if split is not None else []
            missing = [c for c in needed if c not in schema]
            if missing:
                raise DataError(f"missing column(s) {', '.join(missing)}; found {', '.join(schema)}", path=where)
            view = {
                "rater_key": names["rater_id"],
                "model_score": names["model_score"],
                "score": names["score"],
                **{f"group_{i}": g for i, g in enumerate(group_columns)},
            }
            view.update({"item_key": names["item_id"]} if split is not None else {})
            session.register(view)
            query = StatsQuery(
                schema[names["rater_id"]], schema.get(names["item_id"], True), len(group_columns), score_range, split
            )
            summary = session.query(summary_sql(query)).iloc[0]
            dropped = {name: _as_count(summary[f"dropped_{name}"]) for name in DROP_REASONS}
            bad = next((name for name in DROP_REASONS if dropped[name]), None)
            if on_bad_row == "error" and bad is not None:
                raise DataError(
                    f"{_DROP_TEXT[bad]} ({dropped[bad]} such rows; pass --on-bad-row skip to drop and count them)",
                    path=where,
                    field=names[_DROP_FIELD[bad]],
                )
            r0, s0 = summary["r_mean"], summary["s_mean"]
            if r0 is None or s0 is None or not np.isfinite(float(r0)) or not np.isfinite(float(s0)):
                raise DataError("no valid ratings (every row has a missing or non-finite field)", path=where)
            frame = session.query(group_by_sql(query, float(r0), float(s0)))
        stats, heldout = stats_from_frame(
            frame, float(r0), float(s0), list(group_columns), len(split.seeds) if split else 0
        )
        counts = {
            "rows_read": _as_count(summary["rows_read"]),
            "ratings_kept": stats.n_ratings,
            "raters": stats.n_raters,
            **{f"dropped_{k}": v for k, v in dropped.items() if v},
        }
        return EngineStats(stats, heldout, counts)


class DuckDBEngine(SQLEngine):
    """DuckDB in this process, out of core. threads: worker threads (None = DuckDB's default, every core);
    memory_limit: e.g. "4GB" (None = DuckDB's default, 80 % of RAM); beyond it DuckDB spills to disk."""

    name = "duckdb"

    def __init__(self, threads: int | None = None, memory_limit: str | None = None):
        self.threads = threads
        self.memory_limit = memory_limit

    @contextmanager
    def session(self, locations: Sequence[str]) -> Iterator[SQLSession]:
        import duckdb

        con = duckdb.connect()
        try:
            if self.threads:
                con.execute(f"SET threads TO {int(self.threads)}")
            if self.memory_limit:
                con.execute("SET memory_limit = '" + str(self.memory_limit).replace("'", "''") + "'")
            yield _DuckDBSession(con, locations)
        except duckdb.Error as exc:
            raise DataError(f"DuckDB: {first_line(exc)}", path=locations[0]) from None
        finally:
            con.close()


class _DuckDBSession(SQLSession):
    def __init__(self, con: Any, locations: Sequence[str]):
        self.con = con
        # read_parquet takes files, globs and URIs; a local folder becomes the globs of its Parquet files.
        sources = [glob_ for loc in locations for glob_ in (_parquet_globs(Path(loc)) if _local_dir(loc) else [loc])]
        self.source = "read_parquet([" + ", ".join("'" + s.replace("'", "''") + "'" for s in sources) + "])"

    def schema(self) -> dict[str, bool]:
        rows = self.con.execute(f"DESCRIBE SELECT * FROM {self.source}").fetchall()
        return {str(row[0]): str(row[1]).upper() == "VARCHAR" for row in rows}

    def register(self, columns: Mapping[str, str]) -> None:
        select = ", ".join('"' + src.replace('"', '""') + f'" AS {alias}' for alias, src in columns.items())
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW ratings AS SELECT {select} FROM {self.source}")

    def query(self, sql: str) -> pd.DataFrame:
        return self.con.execute(sql).df()


def java_available() -> bool:
    """Whether a `java` launcher is on PATH or in $JAVA_HOME/bin (Spark's classic mode starts a JVM)."""
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java")) or bool(home and (Path(home) / "bin" / "java").exists())


SPARK_DEFAULTS = {
    "spark.ui.showConsoleProgress": "false",  # no progress bars in the command's output
    "spark.sql.execution.arrow.pyspark.enabled": "true",  # per-rater rows come back through Arrow
}


class SparkEngine(SQLEngine):
    """Spark SQL through pyspark. master: e.g. "local[2]", "yarn", "spark://host:7077", "k8s://..." (None: what
    pyspark resolves: $SPARK_REMOTE for Spark Connect, spark-submit arguments in $PYSPARK_SUBMIT_ARGS or
    spark-defaults.conf, else local[*]). conf: extra Spark settings. An active session (a notebook's, a job's)
    is used as it is and left running; a session this engine starts is stopped when the query is done."""

    name = "spark"

    def __init__(self, master: str | None = None, conf: Mapping[str, str] | None = None):
        self.master = master
        self.conf = dict(conf or {})

    @contextmanager
    def session(self, locations: Sequence[str]) -> Iterator[SQLSession]:
        spark, owned = spark_session(self.master, self.conf)
        try:
            yield _SparkSession(spark, locations)
        except (DataError, ConfigError):
            raise
        except Exception as exc:  # py4j and Spark analysis errors: one line naming the location
            raise DataError(f"Spark: {_spark_error(exc)}", path=locations[0]) from None
        finally:
            if owned:
                spark.stop()


def _spark_error(exc: BaseException) -> str:
    """The first line of a Spark error: the Java exception's for a py4j error (whose own first line only names
    the call), the message for a pyspark one."""
    java = getattr(exc, "java_exception", None)
    return one_line(first_line(Exception(str(java)) if java is not None else exc))


def spark_session(master: str | None, conf: Mapping[str, str]) -> tuple[Any, bool]:
    """(session, whether this call started it). ConfigError (one line) when pyspark or Java is missing."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ConfigError("--engine spark needs pyspark: pip install 'rewardsmith[spark]'") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if not os.environ.get("SPARK_REMOTE") and not java_available():
        raise ConfigError(
            "--engine spark needs a Java runtime (17 or newer): no java on PATH or in $JAVA_HOME "
            "(Debian: apt-get install default-jre-headless)"
        )
    builder = SparkSession.builder.appName("rewardsmith-calibrate")
    if master:
        builder = builder.master(master)
    settings = dict(SPARK_DEFAULTS)
    if master and master.startswith("local"):
        settings["spark.ui.enabled"] = "false"  # no web UI port for a local run
    for key, value in {**settings, **conf}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        raise ConfigError(
            f"Spark did not start ({_spark_error(exc)}); check `java -version` (17 or newer) and the master"
        ) from None
    with suppress(Exception):  # Spark Connect has no SparkContext
        spark.sparkContext.setLogLevel("ERROR")
    return spark, True


class _SparkSession(SQLSession):
    def __init__(self, spark: Any, locations: Sequence[str]):
        self.spark = spark
        self.frame = spark.read.parquet(*locations)

    def schema(self) -> dict[str, bool]:
        return {str(name): str(kind) == "string" for name, kind in self.frame.dtypes}

    def register(self, columns: Mapping[str, str]) -> None:
        from pyspark.sql import functions

        picked = [functions.col("`" + src.replace("`", "``") + "`").alias(alias) for alias, src in columns.items()]
        self.frame.select(*picked).createOrReplaceTempView("ratings")

    def query(self, sql: str) -> pd.DataFrame:
        return self.spark.sql(sql).toPandas()
