"""The statistics engines: the one GROUP BY text on DuckDB against hand-computed sums and numpy, bad rows,
the hash hold-out from statistics, `calibrate fit --engine duckdb`, and the errors a user meets. (Spark runs
the same SQL in tests/integration/test_calibrate_spark.py.)"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import rk
from rewardsmith.calibrate import PEBS, create_calibrator, load_maps, rater_stats
from rewardsmith.calibrate.config import CalibrateFitConfig, CalibrateRunConfig, RatingsSource
from rewardsmith.calibrate.engines import (
    DuckDBEngine,
    HashSplit,
    StatsQuery,
    double_literal,
    group_by_sql,
    hash_heldout_mask,
    spark_session,
    summary_sql,
)
from rewardsmith.calibrate.estimators import shared_params
from rewardsmith.calibrate.readers import ENGINES, engine_rater_stats, holdout_from_stats, sql_engine
from rewardsmith.calibrate.run import evaluate_calibration, fit_calibration
from rewardsmith.calibrate.synthetic import simulate_parameters, simulate_ratings
from rewardsmith.errors import ConfigError, DataError, UnknownNameError

MOMENTS = ("n", "mean_r", "mean_s", "sxx", "sxy", "syy")


def assert_same_moments(got, want, rtol: float = 1e-9) -> None:
    assert got.rater_ids.tolist() == want.rater_ids.tolist()
    mg, mw = got.moments(), want.moments()
    for name in MOMENTS:
        np.testing.assert_allclose(getattr(mg, name), getattr(mw, name), rtol=rtol, atol=rtol, err_msg=name)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """60 simulated raters with uneven counts, model scores far from 0 (the shift matters), a group column
    constant per rater and a column named like an SQL keyword."""
    params = simulate_parameters(60, slope=2.0, intercept=10.0, slope_sd=0.5, seed=3)
    counts = np.random.default_rng(4).integers(2, 40, size=60)
    out = simulate_ratings(params, counts, r_mean=100.0, r_sd=3.0, seed=5).frame
    return out.assign(group=np.where(out.rater_id < "r000030", "x", "y"))


def test_sums_of_a_hand_table(tmp_path: Path) -> None:
    """Rater a: (r, s) = (0, 1), (1, 3), (2, 5), the line s = 2r + 1; rater b: (0, 0), (1, 1), (2, 2), s = r.
    Global means r0 = 6/6 = 1, s0 = 12/6 = 2, so the centred values are a: r -1, 0, 1, s -1, 1, 3 and
    b: r -1, 0, 1, s -2, -1, 0; the sums follow by hand, then the OLS lines."""
    pd.DataFrame(
        {
            "rater_id": ["a", "a", "a", "b", "b", "b"],
            "item_id": list("123456"),
            "model_score": [0.0, 1.0, 2.0, 0.0, 1.0, 2.0],
            "score": [1.0, 3.0, 5.0, 0.0, 1.0, 2.0],
        }
    ).to_parquet(tmp_path / "r.parquet")
    stats, counts = engine_rater_stats("duckdb", tmp_path / "r.parquet")
    assert counts == {"rows_read": 6, "ratings_kept": 6, "raters": 2}
    assert stats.rater_ids.tolist() == ["a", "b"]
    assert (stats.r_shift, stats.s_shift) == (1.0, 2.0)
    np.testing.assert_array_equal(stats.n, [3, 3])
    np.testing.assert_array_equal(stats.sum_r, [0, 0])
    np.testing.assert_array_equal(stats.sum_s, [3, -3])
    np.testing.assert_array_equal(stats.sum_rr, [2, 2])
    np.testing.assert_array_equal(stats.sum_rs, [4, 2])
    np.testing.assert_array_equal(stats.sum_ss, [11, 5])
    maps = create_calibrator("ols").fit(stats).maps_
    np.testing.assert_allclose(maps.slope, [2.0, 1.0])
    np.testing.assert_allclose(maps.intercept, [1.0, 0.0], atol=1e-12)


def test_duckdb_matches_numpy_to_1e9_across_files_and_orders(tmp_path: Path, frame: pd.DataFrame) -> None:
    """One file, a folder of shuffled parts, a glob and a list give numpy's statistics (and group labels)."""
    frame.to_parquet(tmp_path / "one.parquet")
    parts = tmp_path / "parts"
    parts.mkdir()
    shuffled = frame.sample(frac=1.0, random_state=0)
    for k, start in enumerate(range(0, len(shuffled), 400)):
        shuffled.iloc[start : start + 400].to_parquet(parts / f"part-{k}.parquet")
    want = rater_stats(frame, group_columns=["group"])
    for location in (tmp_path / "one.parquet", parts, str(parts / "*.parquet"), sorted(parts.glob("*.parquet"))):
        got, counts = engine_rater_stats("duckdb", location, group_columns=["group"])
        assert_same_moments(got, want)
        assert got.groups["group"].tolist() == want.groups["group"].tolist()
        assert counts["rows_read"] == len(frame) and counts["raters"] == 60
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(PEBS().fit(got).maps_.slope, PEBS().fit(want).maps_.slope, rtol=1e-9)


def test_a_ratings_folder_is_read_whole_or_refused_naming_a_stray_file(tmp_path: Path, frame: pd.DataFrame) -> None:
    """Every Parquet part of a folder is read (.parquet and .pq, in subfolders), hidden and metadata files
    (_SUCCESS, .crc) are left aside, and any other file (a CSV beside the parts) is refused by name: it would
    otherwise be left out without a word."""
    folder = tmp_path / "ratings"
    (folder / "year=2025").mkdir(parents=True)
    half = len(frame) // 2
    frame.iloc[:half].to_parquet(folder / "part-0.parquet")
    frame.iloc[half:].to_parquet(folder / "year=2025" / "part-1.pq")
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0.parquet.crc").write_bytes(b"crc")
    got, counts = engine_rater_stats("duckdb", folder)
    assert counts["rows_read"] == len(frame)
    assert_same_moments(got, rater_stats(frame))
    frame.iloc[:10].to_csv(folder / "year=2025" / "extra.csv", index=False)
    with pytest.raises(ConfigError, match=r"extra\.csv: not a Parquet file"):
        engine_rater_stats("duckdb", folder)
    (folder / "year=2025" / "extra.csv").unlink()
    (folder / "notes.txt").write_text("where these came from")
    with pytest.raises(ConfigError, match=r"notes\.txt: not a Parquet file"):
        engine_rater_stats("duckdb", folder)
    empty = tmp_path / "empty"
    (empty / "_logs").mkdir(parents=True)
    (empty / "_logs" / "run.txt").write_text("log")
    with pytest.raises(DataError, match="no Parquet file"):
        engine_rater_stats("duckdb", empty)


def test_integer_ids_and_other_column_names(tmp_path: Path) -> None:
    """Integer rater ids come back as their text, as the memory path reads them; columns may be renamed."""
    data = pd.DataFrame(
        {
            "user": [7, 7, 7, 12, 12, 12],
            "reward": [0.0, 1.0, 2.0, 0.0, 1.0, 3.0],
            "rating": [1.0, 2.0, 3.0, 0.0, 1.0, 2.0],
        }
    )
    data.to_parquet(tmp_path / "r.parquet")
    stats, _ = engine_rater_stats(
        DuckDBEngine(threads=1),
        tmp_path / "r.parquet",
        columns={"rater_id": "user", "model_score": "reward", "score": "rating"},
    )
    assert stats.rater_ids.tolist() == ["12", "7"]  # sorted as text
    np.testing.assert_allclose(stats.n, [3, 3])


def test_bad_rows_are_counted_by_reason_or_refused(tmp_path: Path, frame: pd.DataFrame) -> None:
    good = frame.iloc[:20].copy()
    bad = frame.iloc[:6].copy()
    bad["rater_id"] = [None, "", "r000001", "r000001", "r000001", "r000001"]
    bad["score"] = [1.0, 1.0, np.nan, np.inf, 1.0, 1e6]
    bad["model_score"] = [1.0, 1.0, 1.0, 1.0, -np.inf, 1.0]
    pd.concat([good, bad]).to_parquet(tmp_path / "r.parquet")
    result = DuckDBEngine().rater_stats(tmp_path / "r.parquet", score_range=(-1e5, 1e5))
    assert result.counts == {
        "rows_read": 26,
        "ratings_kept": 20,
        "raters": good.rater_id.nunique(),
        "dropped_missing_rater_id": 2,
        "dropped_nonfinite_score": 2,
        "dropped_nonfinite_model_score": 1,
        "dropped_score_out_of_range": 1,
    }
    assert_same_moments(result.stats, rater_stats(good))
    with pytest.raises(DataError, match=r"field 'rater_id': empty rater_id \(2 such rows"):
        DuckDBEngine().rater_stats(tmp_path / "r.parquet", on_bad_row="error")


def test_missing_columns_no_valid_rows_and_locations_are_one_line_errors(tmp_path: Path, frame: pd.DataFrame) -> None:
    frame.drop(columns="model_score").to_parquet(tmp_path / "no_model.parquet")
    with pytest.raises(DataError, match="missing column"):
        engine_rater_stats("duckdb", tmp_path / "no_model.parquet")
    frame.assign(score=np.nan).to_parquet(tmp_path / "nan.parquet")
    with pytest.raises(DataError, match="no valid ratings"):
        engine_rater_stats("duckdb", tmp_path / "nan.parquet")
    with pytest.raises(DataError, match="not found"):
        engine_rater_stats("duckdb", tmp_path / "absent.parquet")
    with pytest.raises(DataError, match="no file matches"):
        engine_rater_stats("duckdb", str(tmp_path / "none-*.parquet"))
    frame.to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(ConfigError, match="reads Parquet"):
        engine_rater_stats("duckdb", tmp_path / "r.csv")
    with pytest.raises(ConfigError, match="named ratings source"):
        engine_rater_stats("duckdb", "pluriharms")
    with pytest.raises(ConfigError, match="reads the ratings into memory"):
        sql_engine("memory")
    with pytest.raises(UnknownNameError, match="known: duckdb, memory, spark"):
        ENGINES.get("polars")


def test_double_literals_read_back_exactly() -> None:
    import duckdb

    values = [0.1, 1 / 3, -1e-300, 1.2345678e15, 5e-324, -(2.0**60) + 1]
    got = duckdb.connect().execute("SELECT " + ", ".join(double_literal(v) for v in values)).fetchone()
    assert got is not None and list(got) == values


def test_the_sql_uses_only_the_common_dialect() -> None:
    """No DuckDB-only (isfinite, FILTER, ::, read_parquet, double quotes) or Spark-only (backticks) syntax in
    the statistics queries."""
    query = StatsQuery(True, True, 2, (0.0, 100.0), HashSplit(0.2, (0, 1)))
    for sql in (summary_sql(query), group_by_sql(query, 0.5, -3.25)):
        for token in ("isfinite", "FILTER", "::", "read_parquet", '"', "`", "first("):
            assert token not in sql, token


def test_hash_split_and_heldout_errors_match_the_rows(tmp_path: Path, frame: pd.DataFrame) -> None:
    """The held-out sums of the SQL split are those of hash_heldout_mask, and the held-out squared errors from
    statistics equal fitting each method on the fit rows and predicting the held-out rows one by one."""
    frame.to_parquet(tmp_path / "r.parquet")
    split = HashSplit(0.25, (0, 1, 2))
    result = DuckDBEngine().rater_stats(tmp_path / "r.parquet", split=split, group_columns=["group"])
    methods = ("pooled", "group", "ols", "pebs", "pebs-uncentred")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # tau^2 clipped on some fit parts (both paths alike)
        scores = holdout_from_stats(result, methods, n_min=6, group_column="group")
    codes = pd.Categorical(frame.rater_id, categories=result.stats.rater_ids).codes
    for k, seed in enumerate(split.seeds):
        held = hash_heldout_mask(frame.rater_id, frame.item_id, split.fraction, seed)
        assert 0.15 < held.mean() < 0.35
        np.testing.assert_array_equal(result.heldout[k].n, np.bincount(codes[held], minlength=60))
        fit = result.stats.minus(result.heldout[k])  # the fit part: all minus held out
        assert_same_moments(fit.select(fit.n > 0), rater_stats(frame.loc[~held]))
    for name in methods:
        direct = np.zeros(60)
        for seed in split.seeds:
            held = hash_heldout_mask(frame.rater_id, frame.item_id, split.fraction, seed)
            est = create_calibrator(name, **shared_params(name, n_min=6, group_column="group"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                est.fit(frame.loc[~held])
            test = frame.loc[held]
            err = est.predict(test.rater_id.to_numpy(), test.model_score.to_numpy()) - test.score.to_numpy()
            direct += np.bincount(codes[held], weights=err**2, minlength=60)
        np.testing.assert_allclose(scores.sse[name], direct, rtol=1e-9, err_msg=name)
    assert scores.rmse("pebs") < scores.rmse("pooled")


def _fit_config(ratings: str, engine: str, method: str, **source: object) -> CalibrateFitConfig:
    return CalibrateFitConfig(RatingsSource(ratings, engine=engine, **source), method=method)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["pooled", "group", "ols", "pebs", "pebs-uncentred"])
def test_fit_from_duckdb_statistics_equals_the_memory_fit(tmp_path: Path, frame: pd.DataFrame, method: str) -> None:
    frame.to_parquet(tmp_path / "r.parquet")
    memory = fit_calibration(_fit_config(str(tmp_path / "r.parquet"), "memory", method))
    engine = fit_calibration(_fit_config(str(tmp_path / "r.parquet"), "duckdb", method))
    assert engine.rater_ids.tolist() == memory.rater_ids.tolist()
    for name in ("slope", "intercept", "noise_var", "var_slope", "var_intercept"):
        np.testing.assert_allclose(getattr(engine, name), getattr(memory, name), rtol=1e-9, atol=1e-12, err_msg=name)
    assert engine.info["engine"] == "duckdb" and engine.info["data"]["ratings_kept"] == len(frame)
    if method == "group":
        for group, fit in memory.info["groups"].items():
            assert engine.info["groups"][group] == pytest.approx(fit, rel=1e-9)


def test_what_the_engines_do_not_serve_is_a_config_error(tmp_path: Path, frame: pd.DataFrame) -> None:
    frame.to_parquet(tmp_path / "r.parquet")
    with pytest.raises(ConfigError, match="fits from the ratings themselves"):
        fit_calibration(_fit_config(str(tmp_path / "r.parquet"), "duckdb", "mixedlm"))
    with pytest.raises(ConfigError, match="--model-scores is not supported"):
        fit_calibration(_fit_config(str(tmp_path / "r.parquet"), "duckdb", "pebs", model_scores="m.csv"))
    with pytest.raises(ConfigError, match="calibrate run evaluates on the ratings themselves"):
        evaluate_calibration(CalibrateRunConfig(RatingsSource(str(tmp_path / "r.parquet"), engine="duckdb")))


def test_cli_fit_with_duckdb_engine(tmp_path: Path, frame: pd.DataFrame) -> None:
    ratings = tmp_path / "r.parquet"
    frame.to_parquet(ratings)
    for engine in ("memory", "duckdb"):
        result = rk("calibrate", "fit", "--ratings", ratings, "--engine", engine, "--out", tmp_path / f"{engine}.json")
        assert result.exit_code == 0, result.output
    memory, duck = load_maps(tmp_path / "memory.json"), load_maps(tmp_path / "duckdb.json")
    np.testing.assert_allclose(duck.slope, memory.slope, rtol=1e-9)
    assert f"read {len(frame)} ratings from 60 raters" in result.stdout
    bad = rk("calibrate", "fit", "--ratings", "pluriharms", "--engine", "duckdb", "--out", tmp_path / "x.json")
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1 and "named ratings source" in bad.stderr


@pytest.mark.slow
def test_importing_rewardsmith_starts_no_engine() -> None:
    """Importing the package, the engines and the CLI imports neither pyspark nor duckdb."""
    code = (
        "import sys, rewardsmith, rewardsmith.calibrate.engines, rewardsmith.calibrate.run, rewardsmith.cli; "
        "print(sorted(m for m in ('pyspark', 'py4j', 'duckdb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_spark_without_pyspark_or_java_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # makes `import pyspark...` raise ImportError
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(ConfigError, match=r"pip install 'rewardsmith\[spark\]'"):
        spark_session("local[1]", {})
    monkeypatch.undo()
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'rewardsmith[spark]')")
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        pytest.skip("a Spark session is active in this process, so no JVM would be started")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    with pytest.raises(ConfigError, match="needs a Java runtime"):
        spark_session("local[1]", {})
