"""Per-rater rating tables for calibration (table.py) and the sources that build them: a ratings file
(file_source.py) or a named corpus (pluriharms.py, dices.py, prism.py), listed in RATINGS under the name the CLI's
--ratings option takes. A new source is one module with a reader `(RatingsOptions) -> RatingTable`, named here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal

from rewardsmith.data.ratings.dices import dices_turns, read_dices
from rewardsmith.data.ratings.file_source import read_file_source
from rewardsmith.data.ratings.pluriharms import read_pluriharms
from rewardsmith.data.ratings.prism import read_prism
from rewardsmith.data.ratings.reading import RatingsOptions, read_model_scores, read_table_file
from rewardsmith.data.ratings.table import (
    REQUIRED_COLUMNS,
    OnBadRow,
    RatingTable,
    cap_per_rater,
    clean_ratings,
    rating_table,
    require_ratings,
    subsample_per_rater,
    with_model_scores,
)
from rewardsmith.errors import DataError
from rewardsmith.registry import Registry

RatingsAdapter = Callable[[RatingsOptions], RatingTable]
RATINGS: Registry[RatingsAdapter] = Registry("ratings source")
for _name, _reader in (
    ("file", read_file_source),
    ("pluriharms", read_pluriharms),
    ("dices-350", read_dices),
    ("prism", read_prism),
):
    RATINGS.add(_name, _reader)

__all__ = [
    "RATINGS",
    "REQUIRED_COLUMNS",
    "OnBadRow",
    "RatingTable",
    "RatingsOptions",
    "cap_per_rater",
    "clean_ratings",
    "dices_turns",
    "load_ratings",
    "rating_table",
    "read_model_scores",
    "read_table_file",
    "require_ratings",
    "subsample_per_rater",
    "with_model_scores",
]


def load_ratings(
    source: str | Path,
    *,
    data_dir: str | Path | None = None,
    on_bad_row: OnBadRow = "skip",
    model_scores: str | Path | None = None,
    model_score: str | None = None,
    unsure: Literal["drop", "half"] = "drop",
    score_range: tuple[float, float] | None = None,
    seed: int = 0,
    columns: dict[str, str] | None = None,
) -> RatingTable:
    """Loads ratings from a registered source name (RATINGS) or, failing that, from a file path.

    Raises UnknownNameError when `source` is neither a registered name nor an existing file.
    """
    opts = RatingsOptions(
        Path(data_dir) if data_dir else None,
        None,
        on_bad_row,
        Path(model_scores) if model_scores else None,
        model_score,
        unsure,
        score_range,
        seed,
        dict(columns or {}),
    )
    name = str(source)
    if name in RATINGS and name != "file":
        return RATINGS.get(name)(opts)
    path = Path(source).expanduser()
    if path.exists():
        return RATINGS.get("file")(replace(opts, path=path))
    if ":" in name and name.split(":", 1)[0] in RATINGS:  # "prism:/path/to/folder"
        kind, where = name.split(":", 1)
        return RATINGS.get(kind)(replace(opts, path=Path(where).expanduser()))
    if "/" in name or path.suffix.lower() in (".csv", ".parquet", ".jsonl", ".json", ".gz", ".tsv"):
        raise DataError("ratings file not found", path=path)
    return RATINGS.get(name)(opts)  # raises UnknownNameError listing the known sources
