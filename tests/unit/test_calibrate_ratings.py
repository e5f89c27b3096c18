"""Rating tables: every bad-input case (clear error or counted drop), readers and adapters on built rows."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from rewardsmith.calibrate import PEBS
from rewardsmith.data.ratings import RATINGS, clean_ratings, load_ratings, rating_table, subsample_per_rater
from rewardsmith.errors import ConfigError, DataError, UnknownNameError


def _rows() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rater_id": ["a", "a", "a", "b", "b", "b"],
            "item_id": ["1", "2", "3", "1", "2", "3"],
            "score": [10.0, 50.0, 90.0, 20.0, 40.0, 60.0],
            "model_score": [0.1, 0.5, 0.9, 0.1, 0.5, 0.9],
        }
    )


@pytest.mark.parametrize(
    ("mutate", "reason", "field"),
    [
        (lambda f: f.assign(score=f.score.where(f.index != 2, np.nan)), "nonfinite_score", "score"),
        (
            lambda f: f.assign(model_score=f.model_score.where(f.index != 4, np.inf)),
            "nonfinite_model_score",
            "model_score",
        ),
        (
            lambda f: f.assign(score=f.score.astype(object).where(f.index != 1, "n/a")),
            "nonfinite_score",
            "score",
        ),
        (lambda f: f.assign(score=f.score.where(f.index != 3, 140.0)), "score_out_of_range", "score"),
        (lambda f: f.assign(rater_id=f.rater_id.where(f.index != 0, "  ")), "missing_rater_id", "rater_id"),
        (lambda f: pd.concat([f, f.iloc[[1]]], ignore_index=True), "duplicate_rows", "item_id"),
        (
            lambda f: pd.concat([f, f.iloc[[1]].assign(score=77.0)], ignore_index=True),
            "conflicting_duplicates",
            "score",
        ),
    ],
)
def test_each_bad_row_is_counted_or_named(mutate, reason, field):
    bad = mutate(_rows())
    clean, dropped = clean_ratings(bad, score_range=(0, 100), on_bad_row="skip")
    assert dropped == {reason: 1}
    assert len(clean) == len(bad) - 1
    assert not clean.duplicated(["rater_id", "item_id"]).any()
    with pytest.raises(DataError) as err:
        clean_ratings(bad, score_range=(0, 100), on_bad_row="error", path="ratings.csv")
    assert err.value.field == field
    assert err.value.row is not None and 1 <= err.value.row <= len(bad)
    assert "ratings.csv" in str(err.value) and "\n" not in str(err.value)


def test_conflicting_duplicate_keeps_the_first_score():
    bad = pd.concat([_rows(), _rows().iloc[[1]].assign(score=77.0)], ignore_index=True)
    clean, _ = clean_ratings(bad, on_bad_row="skip")
    assert clean.loc[(clean.rater_id == "a") & (clean.item_id == "2"), "score"].item() == 50.0


def test_missing_column_is_a_one_line_error():
    with pytest.raises(DataError, match="missing column"):
        clean_ratings(_rows().drop(columns="model_score"))


def test_rater_with_one_model_score_is_counted_and_gets_the_population_map():
    rows = _rows()
    flat = pd.DataFrame(
        {
            "rater_id": "c",
            "item_id": ["1", "2", "3", "4", "5", "6"],
            "score": [1.0, 2, 3, 4, 5, 6],
            "model_score": 0.5,
        }
    )
    table = rating_table(pd.concat([rows, flat], ignore_index=True))
    assert table.quality_counts()["raters_single_model_score"] == 1
    assert table.raters_single_model_score() == ["c"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        maps = PEBS(n_min=3).fit(table).maps_
    j = maps.index_of(["c"])[0]
    assert maps.slope[j] == pytest.approx(maps.population_slope)


def test_quality_counts_report_every_drop():
    bad = pd.concat([_rows(), _rows().iloc[[0]]], ignore_index=True)
    bad.loc[2, "score"] = np.nan
    table = rating_table(bad, score_range=(0, 100))
    counts = table.quality_counts()
    assert counts["rows_read"] == 7
    assert counts["ratings_kept"] == 5
    assert counts["dropped_nonfinite_score"] == 1
    assert counts["dropped_duplicate_rows"] == 1


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_file_source_reads_csv_parquet_jsonl(tmp_path, suffix):
    frame = _rows().assign(gender=["w", "w", "w", "m", "m", "m"])
    path = tmp_path / f"ratings{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".parquet":
        frame.to_parquet(path)
    else:
        frame.to_json(path, orient="records", lines=True)
    table = load_ratings(path, score_range=(0, 100))
    assert table.n_ratings == 6 and table.n_raters == 2
    assert table.demographic_columns == ("gender",)
    assert all(isinstance(r, str) for r in table.frame.rater_id)


def test_model_scores_file_replaces_model_score_and_counts_missing(tmp_path):
    frame = _rows().drop(columns="model_score")
    path = tmp_path / "ratings.csv"
    frame.to_csv(path, index=False)
    scores = tmp_path / "scores.csv"
    pd.DataFrame({"item_id": ["1", "2"], "model_score": [0.0, 1.0]}).to_csv(scores, index=False)
    table = load_ratings(path, model_scores=scores)
    assert table.dropped == {"item_without_model_score": 2}
    assert sorted(table.frame.model_score.unique()) == [0.0, 1.0]


def test_unknown_source_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match="pluriharms"):
        load_ratings("no-such-source-or-file")
    assert {"pluriharms", "dices-350", "prism", "file"} <= set(RATINGS.names())


def test_prism_adapter_on_rows_built_here(tmp_path):
    folder = tmp_path / "prism"
    folder.mkdir()
    utterances = [
        {
            "utterance_id": f"ut{k}",
            "interaction_id": f"int{k}",
            "conversation_id": f"c{k // 4}",
            "user_id": f"user{k % 3}",
            "turn": 0,
            "within_turn_id": k % 4,
            "model_name": "m",
            "model_provider": "p",
            "user_prompt": "hi",
            "model_response": "hello",
            "score": 10 + 7 * k,
            "if_chosen": k % 4 == 0,
            "included_in_balanced_subset": True,
            "conversation_type": "unguided",
        }
        for k in range(12)
    ]
    utterances.append({**utterances[0], "utterance_id": "ut99", "score": 150})  # outside the 1-100 slider
    (folder / "utterances.jsonl").write_text("\n".join(json.dumps(u) for u in utterances))
    survey = [
        {
            "user_id": f"user{j}",
            "age": "25-34 years old",
            "gender": "Female" if j else "Male",
            "ethnicity": {"simplified": "White", "self_described": "x"},
            "location": {"reside_region": "Europe"},
        }
        for j in range(3)
    ]
    (folder / "survey.jsonl").write_text("\n".join(json.dumps(s) for s in survey))
    scores = tmp_path / "rm_scores.csv"
    pd.DataFrame({"item_id": [f"ut{k}" for k in [*range(12), 99]], "model_score": np.linspace(-1, 1, 13)}).to_csv(
        scores, index=False
    )
    table = load_ratings(f"prism:{folder}", model_scores=scores)
    assert table.n_raters == 3 and table.n_ratings == 12
    assert table.dropped == {"score_out_of_range": 1}
    assert set(table.demographic_columns) == {"age", "gender", "ethnicity", "location"}
    assert set(table.frame.ethnicity) == {"White"}
    assert set(table.frame.location) == {"Europe"}
    with pytest.raises(ConfigError, match="model-scores"):
        load_ratings(f"prism:{folder}")


def test_subsample_keeps_at_most_n_per_rater():
    table = rating_table(pd.concat([_rows()] * 1, ignore_index=True))
    sub = subsample_per_rater(table, 2, seed=0)
    assert sub.frame.groupby("rater_id").size().tolist() == [2, 2]
