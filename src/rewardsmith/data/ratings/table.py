"""The rating table every calibrator reads: long format, cleaned with counted drops.

A RatingTable holds one row per (rater, item) rating with columns

    rater_id (str), item_id (str), score (float64, the rater's own scale),
    model_score (float64, the shared reward model's scalar for the item), [demographic columns (str)]

Bad rows (missing ids, NaN or infinite scores, scores outside the declared range, duplicate (rater, item) rows)
either raise a DataError naming file, row and field (`on_bad_row="error"`) or are dropped and counted
(`on_bad_row="skip"`); the counts go to metrics.json. A rater whose ratings all share one model score cannot have a
slope fitted; it is kept and counted, and the estimators give it the population map.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from rewardsmith.data.schema import Turn
from rewardsmith.errors import DataError

OnBadRow = Literal["error", "skip"]
REQUIRED_COLUMNS = ("rater_id", "item_id", "score", "model_score")


@dataclass
class RatingTable:
    """Ratings in long format plus an account of what was read and dropped.

    frame: one row per rating; columns REQUIRED_COLUMNS then `demographic_columns`.
    n_rows: rows read before cleaning. dropped: reason -> rows dropped. score_range: declared bounds of
    the rater scale (None = unbounded). items: item id -> (prompt turns, response), the text a reward model
    scores for the item, where the source carries it (`calibrate --model` scores them itself).
    """

    frame: pd.DataFrame
    name: str = "ratings"
    source: str = ""
    n_rows: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    demographic_columns: tuple[str, ...] = ()
    score_range: tuple[float, float] | None = None
    notes: dict[str, str] = field(default_factory=dict)
    items: dict[str, tuple[tuple[Turn, ...], str]] = field(default_factory=dict)

    @property
    def n_ratings(self) -> int:
        return len(self.frame)

    @property
    def n_raters(self) -> int:
        return int(self.frame["rater_id"].nunique())

    def with_frame(self, frame: pd.DataFrame) -> RatingTable:
        """The same table description around another frame (a split or subsample of this one)."""
        return replace(self, frame=frame.reset_index(drop=True))

    def raters_single_model_score(self) -> list[str]:
        """Raters whose ratings all share one model score (no slope can be fitted for them)."""
        distinct = self.frame.groupby("rater_id", sort=True)["model_score"].nunique()
        return [str(r) for r in distinct.index[distinct.to_numpy() < 2]]

    def quality_counts(self) -> dict[str, int]:
        """Data-quality counts for metrics.json: rows read, kept, dropped by reason, flagged raters."""
        counts = {
            "rows_read": int(self.n_rows),
            "ratings_kept": self.n_ratings,
            "raters": self.n_raters,
            "items": int(self.frame["item_id"].nunique()),
        }
        counts.update({f"dropped_{k}": int(v) for k, v in sorted(self.dropped.items())})
        counts["raters_single_model_score"] = len(self.raters_single_model_score())
        return counts

    def summary(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            "score_range": self.score_range,
            "demographic_columns": list(self.demographic_columns),
            "notes": dict(self.notes),
            **self.quality_counts(),
        }


def with_model_scores(table: RatingTable, scores: dict[str, float], note: str) -> RatingTable:
    """The table with its model scores replaced by `scores` (item id -> score); ratings of items without a score are
    dropped and counted ("item_without_model_score")."""
    frame = table.frame.copy()
    frame["model_score"] = frame["item_id"].map(scores).astype("float64")
    missing = frame["model_score"].isna()
    dropped = dict(table.dropped)
    if missing.any():
        dropped["item_without_model_score"] = dropped.get("item_without_model_score", 0) + int(missing.sum())
    return replace(
        table,
        frame=frame.loc[~missing].reset_index(drop=True),
        dropped=dropped,
        notes={**table.notes, "model_score": note},
    )


def require_ratings(table: RatingTable, what: str = "calibrate") -> None:
    """DataError (one line) saying why when `table` holds nothing to `what` on: no rows read (a header only), every
    row dropped (by reason, with the first reason explained), or every score the same value."""
    if table.n_ratings > 0:
        scores = table.frame["score"].to_numpy(np.float64)
        if np.all(scores == scores[0]):
            raise DataError(
                f"all {table.n_ratings} ratings of {table.name} have the same score ({scores[0]:g}): "
                f"there is nothing to {what}",
                path=table.source or None,
            )
        return
    if table.n_rows == 0:
        raise DataError(f"no ratings to {what}: the file holds no rows (a header only?)", path=table.source or None)
    reasons = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(table.dropped.items()) if v)
    hint = _DROP_HINTS.get(max(table.dropped, key=lambda k: table.dropped[k]), "") if table.dropped else ""
    raise DataError(
        f"no ratings to {what}: {table.n_rows} rows read, all dropped ({reasons or 'no reason'})"
        + (f"; {hint}" if hint else ""),
        path=table.source or None,
    )


_DROP_HINTS = {
    "nonfinite_score": "the score column must hold numbers",
    "nonfinite_model_score": "the model_score column must hold numbers (or give --model-scores FILE)",
    "score_out_of_range": "check --score-min / --score-max against the scale of the scores",
    "missing_rater_id": "every row needs a rater_id",
    "missing_item_id": "every row needs an item_id",
    "item_without_model_score": "the --model-scores file has no score for these items",
}


def clean_ratings(
    frame: pd.DataFrame,
    *,
    score_range: tuple[float, float] | None = None,
    on_bad_row: OnBadRow = "skip",
    path: str | Path | None = None,
    demographic_columns: tuple[str, ...] = (),
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Validates and cleans a long-format ratings frame.

    Returns (clean frame with REQUIRED_COLUMNS + demographic_columns, dropped counts by reason).
    Row numbers in errors are 1-based data rows (the header is not counted).
    """
    missing = [c for c in (*REQUIRED_COLUMNS, *demographic_columns) if c not in frame.columns]
    if missing:
        raise DataError(
            f"missing column(s) {', '.join(missing)}; found {', '.join(map(str, frame.columns))}", path=path
        )
    out = frame.loc[:, [*REQUIRED_COLUMNS, *demographic_columns]].copy()
    out.index = np.arange(1, len(out) + 1)
    dropped: dict[str, int] = {}

    def reject(mask: pd.Series, reason: str, fieldname: str, what: str) -> None:
        nonlocal out
        mask = pd.Series(mask, index=out.index).fillna(True).astype(bool)
        n_bad = int(mask.sum())
        if n_bad == 0:
            return
        if on_bad_row == "error":
            first = int(mask.index[mask.to_numpy()][0])
            raise DataError(
                f"{what} ({n_bad} such rows; pass on_bad_row='skip' / --on-bad-row skip to drop and count them)",
                path=path,
                row=first,
                field=fieldname,
            )
        dropped[reason] = dropped.get(reason, 0) + n_bad
        out = out.loc[~mask]

    for col in ("rater_id", "item_id"):
        as_text = out[col].astype("string").str.strip()
        reject(as_text.isna() | (as_text == ""), f"missing_{col}", col, f"empty {col}")
        out[col] = out[col].astype("string").str.strip().astype(str)
    for col in ("score", "model_score"):
        values = pd.to_numeric(out[col], errors="coerce").astype("float64")
        reject(~np.isfinite(values), f"nonfinite_{col}", col, f"{col} is missing, NaN, infinite or not a number")
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("float64")
    if score_range is not None:
        low, high = score_range
        reject(
            (out["score"] < low) | (out["score"] > high),
            "score_out_of_range",
            "score",
            f"score outside the declared range [{low:g}, {high:g}]",
        )
    key = out[["rater_id", "item_id"]]
    dup = key.duplicated(keep="first")
    if dup.any():
        first_score = out.loc[~dup].set_index(["rater_id", "item_id"])["score"]
        dup_rows = out.loc[dup]
        conflicting = pd.Series(
            first_score.reindex(pd.MultiIndex.from_frame(dup_rows[["rater_id", "item_id"]])).to_numpy()
            != dup_rows["score"].to_numpy(),
            index=dup_rows.index,
        )
        # An exact repeat is harmless to drop; a repeat with another score is a conflict, kept first.
        reject(
            dup & ~conflicting.reindex(out.index, fill_value=False),
            "duplicate_rows",
            "item_id",
            "duplicate (rater_id, item_id) row",
        )
        dup = out[["rater_id", "item_id"]].duplicated(keep="first")
        reject(
            dup,
            "conflicting_duplicates",
            "score",
            "(rater_id, item_id) rated twice with different scores (the first is kept)",
        )
    for col in demographic_columns:
        out[col] = out[col].astype("string").str.strip().fillna("unknown").astype(str)
    return out.reset_index(drop=True), dropped


def rating_table(
    frame: pd.DataFrame,
    *,
    name: str = "ratings",
    source: str = "",
    score_range: tuple[float, float] | None = None,
    on_bad_row: OnBadRow = "skip",
    demographic_columns: tuple[str, ...] = (),
    path: str | Path | None = None,
    dropped: dict[str, int] | None = None,
    n_rows: int | None = None,
    notes: dict[str, str] | None = None,
    items: dict[str, tuple[tuple[Turn, ...], str]] | None = None,
) -> RatingTable:
    """Cleans `frame` (see clean_ratings) and wraps it in a RatingTable.

    dropped / n_rows: counts from an earlier stage (e.g. an adapter's own drops) to add to the account; items: the
    texts of the rated items (RatingTable.items).
    """
    clean, more = clean_ratings(
        frame,
        score_range=score_range,
        on_bad_row=on_bad_row,
        path=path,
        demographic_columns=demographic_columns,
    )
    counts = dict(dropped or {})
    for k, v in more.items():
        counts[k] = counts.get(k, 0) + v
    return RatingTable(
        clean,
        name=name,
        source=source,
        n_rows=len(frame) if n_rows is None else n_rows,
        dropped=counts,
        demographic_columns=tuple(demographic_columns),
        score_range=score_range,
        notes=dict(notes or {}),
        items=dict(items or {}),
    )


def cap_per_rater(frame: pd.DataFrame, n_per_rater: int, seed: int) -> pd.DataFrame:
    """At most `n_per_rater` randomly chosen rows of each rater of a long ratings frame (seeded), in their
    original order."""
    rng = np.random.default_rng(seed)
    shuffled = frame.iloc[rng.permutation(len(frame))]
    rank = shuffled.groupby("rater_id", sort=False).cumcount().to_numpy()
    return shuffled.loc[rank < n_per_rater].sort_index()


def subsample_per_rater(table: RatingTable, n_per_rater: int, seed: int) -> RatingTable:
    """Keeps at most `n_per_rater` randomly chosen ratings of each rater (seeded)."""
    return table.with_frame(cap_per_rater(table.frame, n_per_rater, seed))


def natural_key(col: pd.Series) -> pd.Series:
    """A sort key that orders numeric ids as numbers ("2" before "10") and any other ids as text."""
    numeric = pd.to_numeric(col, errors="coerce")
    return numeric if numeric.notna().all() else col
