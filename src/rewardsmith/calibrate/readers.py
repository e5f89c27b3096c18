"""Readers of a RatingsSource for a fit, through the engines of rewardsmith.calibrate.engines; the hash hold-out
from per-rater statistics.

ENGINES maps the names `--engine` takes to readers of a RatingsSource:
  memory  any source (files, named corpora) read into pandas and cleaned (rewardsmith.data.ratings); the
          estimators see the rows, so every calibrator and the hold-out evaluation work.
  duckdb  Parquet (a file, a glob, a folder or a URI DuckDB reads) -> per-rater statistics, out of core.
  spark   the same through Spark SQL (pyspark; a JVM); the rows never leave the cluster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rewardsmith.calibrate.engines import DuckDBEngine, EngineStats, SparkEngine, SQLEngine, is_uri
from rewardsmith.calibrate.stats import RaterStats, affine_sse
from rewardsmith.errors import ConfigError
from rewardsmith.registry import Registry

if TYPE_CHECKING:
    from rewardsmith.calibrate.config import RatingsSource
    from rewardsmith.data.ratings import RatingTable


# ----------------------------------------------------------------------------------------------
# Readers of a RatingsSource: the registry `--engine` names


@dataclass(frozen=True)
class FitInput:
    """What a fit reads: the ratings themselves (memory) or their per-rater statistics (an SQL engine).

    ratings: a RatingTable or RaterStats (what AffineCalibrator.fit takes); quality: the data counts for
    metrics (rows_read, ratings_kept, raters, dropped_<reason>, ...); group_column: the demographic column
    chosen for a group calibrator (None when none is wanted or there is none)."""

    ratings: RatingTable | RaterStats
    quality: dict[str, int]
    name: str
    group_column: str | None = None


class RatingsReader(ABC):
    """Reads a RatingsSource for a fit. keeps_rows: the estimators see the ratings themselves (MixedLM and
    the hold-out evaluation need them)."""

    keeps_rows: ClassVar[bool]

    @abstractmethod
    def read(
        self, source: RatingsSource, group_column: str | None, want_group: bool, table: RatingTable | None = None
    ) -> FitInput:
        """The ratings of `source` (or `table`, already read into memory); with want_group, group_column (default:
        the first demographic column)."""


class MemoryReader(RatingsReader):
    """Any source through rewardsmith.data.ratings (cleaned in pandas: duplicates, ranges, counts)."""

    keeps_rows = True

    def read(
        self, source: RatingsSource, group_column: str | None, want_group: bool, table: RatingTable | None = None
    ) -> FitInput:
        table = table if table is not None else source.load()
        chosen = (
            group_column or (table.demographic_columns[0] if table.demographic_columns else None)
            if want_group
            else None
        )
        return FitInput(table, table.quality_counts(), table.name, chosen)


class EngineReader(RatingsReader):
    """Parquet ratings through an SQLEngine: the fit sees per-rater statistics only."""

    keeps_rows = False

    def __init__(self, engine: SQLEngine):
        self.engine = engine

    def read(
        self, source: RatingsSource, group_column: str | None, want_group: bool, table: RatingTable | None = None
    ) -> FitInput:
        name = self.engine.name
        if table is not None or source.model is not None:
            raise ConfigError(f"--model scores the rated items in this process: use --engine memory, not {name}")
        if not source.ratings:
            raise ConfigError(f"--ratings is required: the Parquet ratings for --engine {name} (path, glob or URI)")
        for option, value in (("--model-scores", source.model_scores), ("--model-score", source.model_score)):
            if value is not None:
                raise ConfigError(
                    f"{option} is not supported with --engine {name}: the Parquet files must hold "
                    "model_score already (join them upstream)"
                )
        score_range = source.score_range()
        result = self.engine.rater_stats(
            source.ratings,
            group_columns=[group_column] if group_column and want_group else [],
            default_group=want_group,
            score_range=score_range,
            on_bad_row=source.on_bad_row,  # type: ignore[arg-type]
        )
        quality = {**result.counts, "raters_single_model_score": int(result.stats.moments().single_model_score.sum())}
        label = source.ratings if is_uri(source.ratings) else Path(source.ratings).stem
        return FitInput(result.stats, quality, label, next(iter(result.stats.groups), None))


ENGINES: Registry[RatingsReader] = Registry("engine")
ENGINES.add("memory", MemoryReader())
ENGINES.add("duckdb", EngineReader(DuckDBEngine()))
ENGINES.add("spark", EngineReader(SparkEngine()))


def sql_engine(name: str, **options: Any) -> SQLEngine:
    """The SQL engine `name` (duckdb, spark) with `options` (DuckDBEngine: threads, memory_limit; SparkEngine:
    master, conf); ConfigError for an engine that does not compute statistics itself (memory)."""
    reader = ENGINES.get(name)
    if not isinstance(reader, EngineReader):
        raise ConfigError(
            f"engine {name!r} reads the ratings into memory; statistics engines: "
            f"{', '.join(n for n in ENGINES if isinstance(ENGINES.get(n), EngineReader))}"
        )
    return type(reader.engine)(**options)


def engine_rater_stats(
    engine: str | SQLEngine, location: str | Path | Sequence[str | Path], **kwargs: Any
) -> tuple[RaterStats, dict[str, int]]:
    """(stats, counts) of the Parquet ratings at `location` through `engine` (a name or an SQLEngine);
    keyword arguments as SQLEngine.rater_stats."""
    chosen = sql_engine(engine) if isinstance(engine, str) else engine
    result = chosen.rater_stats(location, **kwargs)
    return result.stats, result.counts


def rater_stats_duckdb(
    path: str | Path | Sequence[str | Path],
    *,
    rater_col: str = "rater_id",
    model_score_col: str = "model_score",
    score_col: str = "score",
    group_columns: Sequence[str] = (),
    threads: int | None = None,
    memory_limit: str | None = None,
) -> tuple[RaterStats, dict[str, int]]:
    """Sufficient statistics computed out of core by DuckDB from Parquet file(s) (a path, glob or list).

    The GROUP BY is the one every SQL engine runs (SQLEngine.rater_stats). Rows whose rater id is missing or
    whose score or model score is NULL, NaN or infinite are skipped and counted; duplicates are not looked for
    on this path (deduplicate upstream or use the in-memory path). Returns (stats, {rows_read,
    dropped_nonfinite}).
    """
    columns = {"rater_id": rater_col, "model_score": model_score_col, "score": score_col}
    result = DuckDBEngine(threads, memory_limit).rater_stats(path, columns=columns, group_columns=group_columns)
    dropped = sum(v for k, v in result.counts.items() if k.startswith("dropped_"))
    return result.stats, {"rows_read": result.counts["rows_read"], "dropped_nonfinite": dropped}


# ----------------------------------------------------------------------------------------------
# The hash hold-out from statistics (library only: `calibrate run` evaluates in memory)


@dataclass(frozen=True)
class StatsHoldout:
    """Held-out squared errors of each method from the statistics of a hash split, arrays (J,) over the raters
    of EngineStats.stats, summed over the seeds: sse[method] and count (held-out ratings)."""

    rater_ids: np.ndarray
    count: np.ndarray
    sse: dict[str, np.ndarray]

    def rmse(self, method: str) -> float:
        return float(np.sqrt(self.sse[method].sum() / self.count.sum()))


def holdout_from_stats(
    result: EngineStats,
    methods: Sequence[str] = ("pooled", "ols", "pebs"),
    n_min: int = 6,
    group_column: str | None = None,
) -> StatsHoldout:
    """Fits every method on each seed's fit part (all minus held-out statistics) and sums its squared errors on
    the held-out part: sum_i (s_i - slope_j r_i - intercept_j)^2 from the held-out sums (stats.affine_sse), so
    the errors equal those of predicting the held-out rows one by one. Raters with no fit rating get the
    population map. Needs a query with a HashSplit; MixedLM (rows) is not available here."""
    from rewardsmith.calibrate.estimators import create_calibrator, shared_params  # scikit-learn: loaded when asked

    if not result.heldout:
        raise ConfigError("no held-out statistics: query with split=HashSplit(fraction, seeds)")
    full = result.stats
    sse = {m: np.zeros(full.n_raters) for m in methods}
    count = np.zeros(full.n_raters)
    for held in result.heldout:
        fit = full.minus(held)
        fit = fit.select(fit.n > 0)
        count += held.n
        for name in methods:
            estimator = create_calibrator(name, **shared_params(name, n_min=n_min, group_column=group_column))
            if estimator.needs_rows:
                raise ConfigError(f"calibrator {name!r} fits from the ratings themselves, not from statistics")
            maps = estimator.fit(fit).maps_
            idx = maps.index_of(held.rater_ids)
            slope = np.where(idx >= 0, maps.slope[idx], maps.population_slope)
            intercept = np.where(idx >= 0, maps.intercept[idx], maps.population_intercept)
            sse[name] += np.where(held.n > 0, affine_sse(held, slope, intercept), 0.0)
    return StatsHoldout(full.rater_ids, count, sse)
