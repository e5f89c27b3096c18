"""Spark SQL (pyspark, local[2]) runs the same GROUP BY as DuckDB on the real ratings tables and matches DuckDB
and numpy to 1e-9; `rewardsmith calibrate fit --engine spark` writes the maps `--engine duckdb` writes.

The real tables (PluriHarms, DICES-350) are read through rewardsmith's rating sources and written to Parquet
in a temporary folder, as a platform's log would hold them. Skipped with the reason when pyspark, Java or the
data directory is absent (CI installs a headless JRE; pyspark comes with rewardsmith[spark]).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import one_line_error, rk
from rewardsmith.calibrate import PEBS, load_maps, rater_stats
from rewardsmith.calibrate.config import RatingsSource
from rewardsmith.calibrate.engines import DuckDBEngine, HashSplit, SparkEngine, java_available, spark_session

pytestmark = pytest.mark.slow
MOMENTS = ("n", "mean_r", "mean_s", "sxx", "sxy", "syy")


@pytest.fixture(scope="module")
def spark():
    """One local[2] session for the module (the engine uses an active session and leaves it running)."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'rewardsmith[spark]')")
    if not java_available():
        pytest.skip("no Java runtime on PATH or in $JAVA_HOME (Debian: apt-get install default-jre-headless)")
    session, _ = spark_session("local[2]", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def tables(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[pd.DataFrame, Path]]:
    """name -> (cleaned long frame, its Parquet file) of each real ratings table."""
    folder = tmp_path_factory.mktemp("real-ratings")
    out = {}
    for name in ("pluriharms", "dices-350"):
        frame = RatingsSource(name, data_dir=str(data_dir)).load().frame
        frame.to_parquet(folder / f"{name}.parquet")
        out[name] = (frame, folder / f"{name}.parquet")
    return out


def assert_same(got, want, rtol: float = 1e-9) -> None:
    assert got.rater_ids.tolist() == want.rater_ids.tolist()
    mg, mw = got.moments(), want.moments()
    for name in MOMENTS:
        np.testing.assert_allclose(getattr(mg, name), getattr(mw, name), rtol=rtol, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("name", ["pluriharms", "dices-350"])
def test_spark_matches_duckdb_and_numpy_on_real_ratings(spark, tables, name: str) -> None:
    frame, path = tables[name]
    groups = ["Gender"] if name == "pluriharms" else []
    spark_result = SparkEngine().rater_stats(path, group_columns=groups)
    duck_result = DuckDBEngine().rater_stats(path, group_columns=groups)
    numpy_stats = rater_stats(frame, group_columns=groups)
    assert spark_result.counts == duck_result.counts
    assert spark_result.counts["ratings_kept"] == len(frame)
    assert_same(spark_result.stats, duck_result.stats)
    assert_same(spark_result.stats, numpy_stats)
    for g in groups:
        assert spark_result.stats.groups[g].tolist() == numpy_stats.groups[g].tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fits = [PEBS().fit(s).maps_ for s in (spark_result.stats, duck_result.stats, numpy_stats)]
    for other in fits[1:]:
        np.testing.assert_allclose(fits[0].slope, other.slope, rtol=1e-9)
        np.testing.assert_allclose(fits[0].intercept, other.intercept, rtol=1e-9, atol=1e-9)


def test_spark_hash_split_and_bad_rows_equal_duckdb(spark, tables, tmp_path: Path) -> None:
    frame, _ = tables["pluriharms"]
    bad = frame.iloc[:5].copy()
    bad["rater_id"] = [None, "", "1", "1", "1"]
    bad["score"] = [1.0, 1.0, np.nan, np.inf, 500.0]
    path = tmp_path / "with-bad.parquet"
    pd.concat([frame, bad]).to_parquet(path)
    split = HashSplit(0.2, (0, 1))
    kwargs = {"split": split, "score_range": (0.0, 100.0)}
    spark_result = SparkEngine().rater_stats(path, **kwargs)
    duck_result = DuckDBEngine().rater_stats(path, **kwargs)
    assert spark_result.counts == duck_result.counts
    assert spark_result.counts["dropped_missing_rater_id"] == 2
    assert spark_result.counts["dropped_nonfinite_score"] == 2
    assert spark_result.counts["dropped_score_out_of_range"] == 1
    for held_spark, held_duck in zip(spark_result.heldout, duck_result.heldout, strict=True):
        np.testing.assert_array_equal(held_spark.n, held_duck.n)
        assert_same(held_spark.select(held_spark.n > 0), held_duck.select(held_duck.n > 0))


def test_cli_fit_with_spark_matches_duckdb(spark, tables, tmp_path: Path) -> None:
    _, path = tables["pluriharms"]
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"{engine}.parquet"
        result = rk("calibrate", "fit", "--ratings", path, "--engine", engine, "--method", "pebs", "--out", out)
        assert result.exit_code == 0, result.output
        assert "read 14725 ratings from 100 raters" in result.stdout
    duck, spark_maps = load_maps(tmp_path / "duckdb.parquet"), load_maps(tmp_path / "spark.parquet")
    assert spark_maps.info["engine"] == "spark" and spark_maps.rater_ids.tolist() == duck.rater_ids.tolist()
    for field in ("slope", "intercept", "noise_var", "var_slope", "var_intercept", "cov_slope_intercept"):
        np.testing.assert_allclose(
            getattr(spark_maps, field), getattr(duck, field), rtol=1e-9, atol=1e-12, err_msg=field
        )


def test_spark_errors_are_one_line(spark, tmp_path: Path) -> None:
    ratings = tmp_path / "r.parquet"
    pd.DataFrame({"rater_id": ["a"], "score": [1.0]}).to_parquet(ratings)
    result = rk("calibrate", "fit", "--ratings", ratings, "--engine", "spark", "--out", tmp_path / "m.json")
    one_line_error(result, "missing column(s) model_score")
