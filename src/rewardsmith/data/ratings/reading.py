"""Reading ratings files and model-score files, and the options every ratings source takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from rewardsmith.data.ratings.table import OnBadRow
from rewardsmith.errors import DataError


def read_table_file(path: str | Path) -> pd.DataFrame:
    """Reads a CSV, Parquet or JSON-lines file into a DataFrame (ids as strings)."""
    path = Path(path)
    if not path.exists():
        raise DataError("file not found", path=path)
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".jsonl", ".ndjson"):
            return pd.read_json(path, lines=True, dtype=False)
        if suffix in (".csv", ".tsv", ".txt"):
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype={"rater_id": str, "item_id": str})
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise DataError(f"cannot read: {exc}", path=path) from None
    raise DataError(f"unsupported file type {suffix!r}; use .csv, .tsv, .parquet or .jsonl", path=path)


def read_model_scores(path: str | Path, key: str = "item_id") -> dict[str, float]:
    """item id -> model score from a file with columns `key` and `model_score` (or `score`/`reward`)."""
    frame = read_table_file(path)
    value_col = next((c for c in ("model_score", "reward", "score") if c in frame.columns), None)
    if key not in frame.columns or value_col is None:
        raise DataError(f"a model-score file needs columns {key!r} and 'model_score'", path=path)
    values = pd.to_numeric(frame[value_col], errors="coerce")
    return dict(zip(frame[key].astype(str).str.strip(), values.astype(float), strict=True))


@dataclass(frozen=True)
class RatingsOptions:
    """What a caller asks of a ratings adapter.

    data_dir: the shared data directory (None = the default resolution in data.sources).
    path: the file (file adapter) or corpus folder (prism) to read.
    model_scores: a file of per-item model scores (item_id, model_score) that replaces the adapter's
        default model score (e.g. a rewardsmith model's scores).
    model_score: a named model-score source for corpora that offer several (dices-350: "panel" or "expert").
    unsure: DICES "Unsure" answers: "drop" (default) or "half" (scored 0.5).
    score_range: bounds of the rater scale for the file adapter (None = not checked).
    seed: seed of any random choice an adapter makes (the DICES reference panel).
    """

    data_dir: Path | None = None
    path: Path | None = None
    on_bad_row: OnBadRow = "skip"
    model_scores: Path | None = None
    model_score: str | None = None
    unsure: Literal["drop", "half"] = "drop"
    score_range: tuple[float, float] | None = None
    seed: int = 0
    columns: dict[str, str] = field(default_factory=dict)


def attach_model_scores(frame: pd.DataFrame, scores: dict[str, float], dropped: dict[str, int]) -> pd.DataFrame:
    frame = frame.copy()
    frame["model_score"] = frame["item_id"].astype(str).map(scores)
    n_missing = int(frame["model_score"].isna().sum())
    if n_missing:
        dropped["item_without_model_score"] = n_missing
        frame = frame.loc[frame["model_score"].notna()]
    return frame
