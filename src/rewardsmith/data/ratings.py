"""Per-rater rating tables for calibration: long format, cleaning with counted drops, and adapters.

A RatingTable holds one row per (rater, item) rating with columns

    rater_id (str), item_id (str), score (float64, the rater's own scale),
    model_score (float64, the shared reward model's scalar for the item), [demographic columns (str)]

Adapters build it from a CSV/Parquet file or from a named corpus (`pluriharms`, `dices-350`, `prism`);
they are registered in RATINGS under the name the CLI's --ratings option takes. Bad rows (missing ids,
NaN or infinite scores, scores outside the declared range, duplicate (rater, item) rows) either raise a
DataError naming file, row and field (`on_bad_row="error"`) or are dropped and counted
(`on_bad_row="skip"`); the counts go to metrics.json. A rater whose ratings all share one model score
cannot have a slope fitted; it is kept and counted, and the estimators give it the population map.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from rewardsmith.data.schema import Turn
from rewardsmith.data.sources import dataset_file, resolve_data_dir
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.registry import Registry

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
    return replace(table, frame=frame.loc[~missing].reset_index(drop=True), dropped=dropped,
                   notes={**table.notes, "model_score": note})


def require_ratings(table: RatingTable, what: str = "calibrate") -> None:
    """DataError (one line) saying why when `table` holds nothing to `what` on: no rows read (a header only), every
    row dropped (by reason, with the first reason explained), or every score the same value."""
    if table.n_ratings > 0:
        scores = table.frame["score"].to_numpy(np.float64)
        if np.all(scores == scores[0]):
            raise DataError(f"all {table.n_ratings} ratings of {table.name} have the same score ({scores[0]:g}): "
                            f"there is nothing to {what}", path=table.source or None)
        return
    if table.n_rows == 0:
        raise DataError(f"no ratings to {what}: the file holds no rows (a header only?)", path=table.source or None)
    reasons = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(table.dropped.items()) if v)
    hint = _DROP_HINTS.get(max(table.dropped, key=lambda k: table.dropped[k]), "") if table.dropped else ""
    raise DataError(f"no ratings to {what}: {table.n_rows} rows read, all dropped ({reasons or 'no reason'})"
                    + (f"; {hint}" if hint else ""), path=table.source or None)


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
                f"{what} ({n_bad} such rows; pass on_bad_row='skip' / --on-bad-row skip to drop "
                "and count them)",
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
        reject(
            ~np.isfinite(values), f"nonfinite_{col}", col, f"{col} is missing, NaN, infinite or not a number"
        )
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
            return pd.read_csv(
                path, sep="\t" if suffix == ".tsv" else ",", dtype={"rater_id": str, "item_id": str}
            )
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


# ----------------------------------------------------------------------------------------------
# Adapters


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


RatingsAdapter = Callable[[RatingsOptions], RatingTable]
RATINGS: Registry[RatingsAdapter] = Registry("ratings source")


@RATINGS.register("file")
def _file_adapter(opts: RatingsOptions) -> RatingTable:
    """A CSV/Parquet/JSONL file in long format; `columns` renames file columns to the standard ones.

    Columns other than the four required ones and ids become demographic columns when they hold text.
    """
    if opts.path is None:
        raise ConfigError("the file ratings source needs a path")
    frame = read_table_file(opts.path).rename(columns={v: k for k, v in opts.columns.items()})
    dropped: dict[str, int] = {}
    if opts.model_scores is not None:
        frame = _attach_model_scores(frame, read_model_scores(opts.model_scores), dropped)
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
    for row, (item, prompt, response) in enumerate(zip(first["item_id"], prompts, first["response"], strict=True),
                                                   start=1):
        if not isinstance(response, str) or not response.strip():
            continue
        try:
            turns = parse_prompt(prompt, "prompt") if isinstance(prompt, str | list) else ()
        except BadRow as bad:
            raise DataError(bad.message, path=path, row=row, field="prompt") from None
        items[str(item).strip()] = (tuple(turns), response)
    return items


def _attach_model_scores(
    frame: pd.DataFrame, scores: dict[str, float], dropped: dict[str, int]
) -> pd.DataFrame:
    frame = frame.copy()
    frame["model_score"] = frame["item_id"].astype(str).map(scores)
    n_missing = int(frame["model_score"].isna().sum())
    if n_missing:
        dropped["item_without_model_score"] = n_missing
        frame = frame.loc[frame["model_score"].notna()]
    return frame


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


@RATINGS.register("pluriharms")
def _pluriharms_adapter(opts: RatingsOptions) -> RatingTable:
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
    long["Race_Ethnicity"] = long["Race_Ethnicity"].where(
        ~long["Race_Ethnicity"].str.contains(","), "Multiple"
    )
    dropped: dict[str, int] = {}
    if opts.model_scores is not None:
        long = _attach_model_scores(long, read_model_scores(opts.model_scores), dropped)
        model_note = f"model scores from {opts.model_scores}"
    else:
        harm = dict(
            zip(prompts["Question_Index"].astype(str), prompts["Harm_Level"].astype(float), strict=True)
        )
        long["model_score"] = long["item_id"].map(harm)
        model_note = "model score = prompts.csv Harm_Level (0-1 classifier)"
    n_rows = len(long)
    long = long.sort_values(["rater_id", "item_id"], key=_natural_key)
    # The rated text is the prompt itself: a reward model scores it as a text to no prompt.
    no_prompt: tuple[Turn, ...] = ()
    items = {str(i): (no_prompt, str(text)) for i, text in zip(prompts["Question_Index"], prompts["Question_Content"],
                                                        strict=True) if isinstance(text, str) and text.strip()}
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


def _natural_key(col: pd.Series) -> pd.Series:
    numeric = pd.to_numeric(col, errors="coerce")
    return numeric if numeric.notna().all() else col


DICES_SCORE = {"Yes": 1.0, "No": 0.0}  # "Yes" = the rater judged the response UNSAFE (see SOURCE.md)


@RATINGS.register("dices-350")
def _dices_adapter(opts: RatingsOptions) -> RatingTable:
    """DICES-350: 350 conversations x 123 pseudo-raters (list position), score 1 = unsafe, 0 = safe.

    "Unsure" is dropped and counted (unsure="drop") or scored 0.5 (unsure="half").
    Model score (model_score=):
      "panel" (default): the item's unsafe rate among a seeded reference panel of one third of the raters;
          the panel's raters are then removed from the table, so no calibrated rater's rating (fit or
          held out) enters any model score. A leave-one-rater-out crowd mean would instead put rater k's
          held-out answers into the model score used for rater j and make every rater's score a different
          function; the disjoint panel avoids both.
      "expert": the expert gold label (1 = unsafe), independent of the crowd but binary.
      or a model-scores file (item_id = DICES id).
    """
    crowd_path = dataset_file(opts.data_dir, "dices-350", "dices_350_crowdsourced.json")
    try:
        crowd = json.loads(crowd_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read: {exc}", path=crowd_path) from None
    ids: list[str] = []
    raters: list[str] = []
    answers: list[str] = []
    items: dict[str, tuple[tuple[Turn, ...], str]] = {}
    for row, inst in enumerate(crowd.get("instances", []), start=1):
        try:
            scores = inst["annotations"]["safety"]["individual_human_scores"]
            item = str(inst["id"])
        except (KeyError, TypeError):
            raise DataError(
                "instance lacks annotations.safety.individual_human_scores", path=crowd_path, row=row
            ) from None
        ids.extend([item] * len(scores))
        raters.extend(f"r{k:03d}" for k in range(len(scores)))
        answers.extend(scores)
        conversation = inst.get("instance") or {}
        if isinstance(conversation.get("response"), str):
            items[item] = (dices_turns(str(conversation.get("user_prompt", ""))), conversation["response"])
    long = pd.DataFrame({"rater_id": raters, "item_id": ids, "answer": answers})
    n_rows = len(long)
    dropped: dict[str, int] = {}
    unsure = long["answer"] == "Unsure"
    if opts.unsure == "drop":
        dropped["unsure"] = int(unsure.sum())
        long = long.loc[~unsure].copy()
        long["score"] = long["answer"].map(DICES_SCORE)
    elif opts.unsure == "half":
        long["score"] = long["answer"].map({**DICES_SCORE, "Unsure": 0.5})
    else:
        raise ConfigError(f"unsure must be 'drop' or 'half', got {opts.unsure!r}")
    source = opts.model_score or ("file" if opts.model_scores else "panel")
    notes = {"score": "1 = unsafe (Yes), 0 = safe (No)", "unsure": opts.unsure}
    if opts.model_scores is not None:
        long = _attach_model_scores(long, read_model_scores(opts.model_scores), dropped)
        notes["model_score"] = f"model scores from {opts.model_scores}"
    elif source == "panel":
        all_raters = np.array(sorted(long["rater_id"].unique()))
        rng = np.random.default_rng(opts.seed)
        panel = set(rng.choice(all_raters, size=len(all_raters) // 3, replace=False).tolist())
        in_panel = long["rater_id"].isin(panel)
        panel_mean = long.loc[in_panel].groupby("item_id")["score"].mean()
        long = long.loc[~in_panel].copy()
        long["model_score"] = long["item_id"].map(panel_mean)
        notes["model_score"] = (
            f"unsafe rate among a disjoint reference panel of {len(panel)} raters "
            f"(seed {opts.seed}), removed from the table"
        )
        notes["panel_raters_removed"] = str(len(panel))
    elif source == "expert":
        expert_path = dataset_file(opts.data_dir, "dices-350", "dices_350_expert.json")
        expert = json.loads(expert_path.read_text())
        gold = {
            str(i["id"]): DICES_SCORE.get(i["annotations"]["safety"]["individual_human_scores"][0], np.nan)
            for i in expert["instances"]
        }
        long["model_score"] = long["item_id"].map(gold)
        notes["model_score"] = "expert gold label (1 = unsafe)"
    else:
        raise ConfigError(
            f"dices-350 model_score must be 'panel' or 'expert' (or pass a model-scores file), got {source!r}"
        )
    return rating_table(
        long,
        name="dices-350",
        source=str(crowd_path.parent),
        score_range=(0.0, 1.0),
        on_bad_row=opts.on_bad_row,
        path=crowd_path,
        dropped=dropped,
        n_rows=n_rows,
        notes=notes,
        items=items,
    )


def dices_turns(context: str) -> tuple[Turn, ...]:
    """The turns of a DICES conversation: lines opening "USER:" and "LAMDA:" start user and assistant turns (a line
    without either continues the turn before)."""
    turns: list[Turn] = []
    for line in context.splitlines():
        head, _, rest = line.partition(":")
        role = {"USER": "user", "LAMDA": "assistant"}.get(head.strip().upper())
        if role is not None:
            turns.append(Turn(role, rest.strip()))  # type: ignore[arg-type]
        elif turns:
            turns[-1] = Turn(turns[-1].role, f"{turns[-1].content}\n{line}")
        elif line.strip():
            turns.append(Turn("user", line.strip()))
    return tuple(turns)


PRISM_DEMOGRAPHICS = (
    "age",
    "gender",
    "education",
    "ethnicity",
    "religion",
    "location",
    "english_proficiency",
)


@RATINGS.register("prism")
def _prism_adapter(opts: RatingsOptions) -> RatingTable:
    """PRISM (arXiv:2404.16019): `utterances.jsonl` rows rated 1-100 by `user_id`; item = `utterance_id`.

    Written from the published schema (utterances: utterance_id, user_id, conversation_id, turn,
    within_turn_id, model_name, model_response, score, if_chosen; survey: user_id plus demographics, some
    of them nested objects whose `simplified` or `categorised` field is used). PRISM has no model score,
    so a model-scores file keyed by utterance_id is required.
    """
    folder = opts.path or resolve_data_dir(opts.data_dir) / "prism"
    utterances_path = folder / "utterances.jsonl"
    if not utterances_path.exists():
        raise DataError(
            "file not found (PRISM is not in the shared data; pass its folder)", path=utterances_path
        )
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
    long = _attach_model_scores(long, read_model_scores(opts.model_scores), dropped)
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
