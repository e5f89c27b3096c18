"""The `dices-350` ratings source: DICES-350 (350 conversations x 123 raters, unsafe = 1)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rewardsmith.data.ratings.reading import RatingsOptions, attach_model_scores, read_model_scores
from rewardsmith.data.ratings.table import RatingTable, rating_table
from rewardsmith.data.schema import Turn
from rewardsmith.data.sources import dataset_file
from rewardsmith.errors import ConfigError, DataError

DICES_SCORE = {"Yes": 1.0, "No": 0.0}  # "Yes" = the rater judged the response UNSAFE (see SOURCE.md)


def read_dices(opts: RatingsOptions) -> RatingTable:
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
        long = attach_model_scores(long, read_model_scores(opts.model_scores), dropped)
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
