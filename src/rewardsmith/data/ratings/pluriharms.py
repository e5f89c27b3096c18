"""The `pluriharms` ratings source: PluriHarms (100 raters x 150 prompts, harm on a 0-100 slider)."""

from __future__ import annotations

import pandas as pd

from rewardsmith.data.ratings.reading import RatingsOptions, attach_model_scores, read_model_scores
from rewardsmith.data.ratings.table import RatingTable, natural_key, rating_table
from rewardsmith.data.schema import Turn
from rewardsmith.data.sources import dataset_file
from rewardsmith.errors import DataError

PLURIHARMS_DEMOGRAPHICS = (
    "Race_Ethnicity",
    "Gender",
    "Sexual_Orientation",
    "Age",
    "Political_Affiliation",
    "Education",
    "Religion_Importance",
    "Income",
)


def read_pluriharms(opts: RatingsOptions) -> RatingTable:
    """PluriHarms: 100 raters x 150 prompts, harm on a 0-100 slider; model score = the prompt's Harm_Level.

    Blank ratings ("Unsure") are not ratings and are not counted as dropped. A multi-select
    Race_Ethnicity answer is recorded as "Multiple" so that the audit's groups are not singletons.
    """
    annotations_path = dataset_file(opts.data_dir, "pluriharms", "annotations.csv")
    prompts_path = dataset_file(opts.data_dir, "pluriharms", "prompts.csv")
    annotations = pd.read_csv(annotations_path)
    prompts = pd.read_csv(prompts_path)
    rating_cols = [c for c in annotations.columns if c.startswith("Rating_")]
    if not rating_cols or "Participant_ID" not in annotations.columns:
        raise DataError("expected Participant_ID and Rating_1..Rating_150 columns", path=annotations_path)
    long = annotations.melt(
        id_vars=["Participant_ID", *PLURIHARMS_DEMOGRAPHICS],
        value_vars=rating_cols,
        var_name="item",
        value_name="score",
    )
    long = long.loc[long["score"].notna()].copy()
    long["item_id"] = long["item"].str.removeprefix("Rating_")
    long["rater_id"] = long["Participant_ID"].astype(int).astype(str)
    long["Race_Ethnicity"] = long["Race_Ethnicity"].where(~long["Race_Ethnicity"].str.contains(","), "Multiple")
    dropped: dict[str, int] = {}
    if opts.model_scores is not None:
        long = attach_model_scores(long, read_model_scores(opts.model_scores), dropped)
        model_note = f"model scores from {opts.model_scores}"
    else:
        harm = dict(zip(prompts["Question_Index"].astype(str), prompts["Harm_Level"].astype(float), strict=True))
        long["model_score"] = long["item_id"].map(harm)
        model_note = "model score = prompts.csv Harm_Level (0-1 classifier)"
    n_rows = len(long)
    long = long.sort_values(["rater_id", "item_id"], key=natural_key)
    # The rated text is the prompt itself: a reward model scores it as a text to no prompt.
    no_prompt: tuple[Turn, ...] = ()
    items = {
        str(i): (no_prompt, str(text))
        for i, text in zip(prompts["Question_Index"], prompts["Question_Content"], strict=True)
        if isinstance(text, str) and text.strip()
    }
    return rating_table(
        long,
        name="pluriharms",
        source=str(annotations_path.parent),
        score_range=(0.0, 100.0),
        on_bad_row=opts.on_bad_row,
        demographic_columns=PLURIHARMS_DEMOGRAPHICS,
        path=annotations_path,
        dropped=dropped,
        n_rows=n_rows,
        notes={"model_score": model_note},
        items=items,
    )
