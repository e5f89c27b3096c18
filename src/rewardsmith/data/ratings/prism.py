"""The `prism` ratings source: PRISM's utterance ratings (1-100 per user), read from the published schema."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rewardsmith.data.ratings.reading import RatingsOptions, attach_model_scores, read_model_scores, read_table_file
from rewardsmith.data.ratings.table import RatingTable, rating_table
from rewardsmith.data.sources import resolve_data_dir
from rewardsmith.errors import ConfigError, DataError

PRISM_DEMOGRAPHICS = (
    "age",
    "gender",
    "education",
    "ethnicity",
    "religion",
    "location",
    "english_proficiency",
)


def read_prism(opts: RatingsOptions) -> RatingTable:
    """PRISM (arXiv:2404.16019): `utterances.jsonl` rows rated 1-100 by `user_id`; item = `utterance_id`.

    Written from the published schema (utterances: utterance_id, user_id, conversation_id, turn,
    within_turn_id, model_name, model_response, score, if_chosen; survey: user_id plus demographics, some
    of them nested objects whose `simplified` or `categorised` field is used). PRISM has no model score,
    so a model-scores file keyed by utterance_id is required.
    """
    folder = opts.path or resolve_data_dir(opts.data_dir) / "prism"
    utterances_path = folder / "utterances.jsonl"
    if not utterances_path.exists():
        raise DataError("file not found (PRISM is not in the shared data; pass its folder)", path=utterances_path)
    if opts.model_scores is None:
        raise ConfigError("PRISM has no model score: pass a model-scores file (utterance_id, model_score)")
    utterances = read_table_file(utterances_path)
    needed = {"utterance_id", "user_id", "score"}
    if not needed <= set(utterances.columns):
        raise DataError(f"utterances need columns {sorted(needed)}", path=utterances_path)
    long = pd.DataFrame(
        {
            "rater_id": utterances["user_id"].astype(str),
            "item_id": utterances["utterance_id"].astype(str),
            "score": utterances["score"],
        }
    )
    dropped: dict[str, int] = {}
    long = attach_model_scores(long, read_model_scores(opts.model_scores), dropped)
    demographics: tuple[str, ...] = ()
    survey_path = folder / "survey.jsonl"
    if survey_path.exists():
        survey = read_table_file(survey_path)
        demographics = tuple(c for c in PRISM_DEMOGRAPHICS if c in survey.columns)
        flat = survey[["user_id", *demographics]].copy()
        for col in demographics:
            flat[col] = flat[col].map(_flatten_survey_value)
        flat["user_id"] = flat["user_id"].astype(str)
        long = long.merge(flat.rename(columns={"user_id": "rater_id"}), on="rater_id", how="left")
    return rating_table(
        long,
        name="prism",
        source=str(folder),
        score_range=(1.0, 100.0),
        on_bad_row=opts.on_bad_row,
        demographic_columns=demographics,
        path=utterances_path,
        dropped=dropped,
        n_rows=len(utterances),
        notes={"model_score": f"model scores from {opts.model_scores}"},
    )


def _flatten_survey_value(value: object) -> str:
    if isinstance(value, dict):
        for key in ("simplified", "categorised", "reside_region", "self_described"):
            if value.get(key) is not None:
                return str(value[key])
        return "unknown"
    return "unknown" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)
