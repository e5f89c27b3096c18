"""The `file` ratings source: a CSV / Parquet / JSONL file in long format (rater_id, item_id, score, model_score,
optional demographic columns, and optional prompt / response columns holding each item's text)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rewardsmith.data.ratings.reading import RatingsOptions, attach_model_scores, read_model_scores, read_table_file
from rewardsmith.data.ratings.table import REQUIRED_COLUMNS, RatingTable, rating_table
from rewardsmith.data.schema import Turn
from rewardsmith.errors import ConfigError, DataError


def read_file_source(opts: RatingsOptions) -> RatingTable:
    """A CSV/Parquet/JSONL file in long format; `columns` renames file columns to the standard ones.

    Columns other than the four required ones and ids become demographic columns when they hold text.
    """
    if opts.path is None:
        raise ConfigError("the file ratings source needs a path")
    frame = read_table_file(opts.path).rename(columns={v: k for k, v in opts.columns.items()})
    dropped: dict[str, int] = {}
    if opts.model_scores is not None:
        frame = attach_model_scores(frame, read_model_scores(opts.model_scores), dropped)
    items = _file_items(frame, opts.path)
    demographics = tuple(
        c
        for c in frame.columns
        if c not in (*REQUIRED_COLUMNS, *ITEM_TEXT_COLUMNS)
        and (
            pd.api.types.is_string_dtype(frame[c])
            or pd.api.types.is_object_dtype(frame[c])
            or isinstance(frame[c].dtype, pd.CategoricalDtype)
        )
    )
    return rating_table(
        frame,
        name=Path(opts.path).stem,
        source=str(opts.path),
        score_range=opts.score_range,
        on_bad_row=opts.on_bad_row,
        demographic_columns=demographics,
        path=opts.path,
        dropped=dropped,
        items=items,
    )


ITEM_TEXT_COLUMNS = ("prompt", "response")


def _file_items(frame: pd.DataFrame, path: Path) -> dict[str, tuple[tuple[Turn, ...], str]]:
    """item id -> (prompt turns, response) from a ratings file's `prompt` and `response` columns (a prompt as plain
    text, an HH transcript or a chat list; no prompt column: the response alone); {} without a response column."""
    from rewardsmith.data.adapters._common import BadRow
    from rewardsmith.data.adapters.generic import parse_prompt

    if "response" not in frame.columns or "item_id" not in frame.columns:
        return {}
    items: dict[str, tuple[tuple[Turn, ...], str]] = {}
    first = frame.drop_duplicates("item_id")
    prompts = first["prompt"] if "prompt" in first.columns else [None] * len(first)
    for row, (item, prompt, response) in enumerate(
        zip(first["item_id"], prompts, first["response"], strict=True), start=1
    ):
        if not isinstance(response, str) or not response.strip():
            continue
        try:
            turns = parse_prompt(prompt, "prompt") if isinstance(prompt, str | list) else ()
        except BadRow as bad:
            raise DataError(bad.message, path=path, row=row, field="prompt") from None
        items[str(item).strip()] = (tuple(turns), response)
    return items
