"""PPE human preference, lmarena-ai/PPE-Human-Preference-V1 (`test` split): 16,038 Chatbot Arena battles, a prompt
with two responses and the human vote.

Layout: <data dir>/ppe/PPE-Human-Preference-V1/data/*.parquet (the hub release; PPE's own name
human_preference_v1 is read too; .jsonl / .json also). Columns: question_id (str), prompt (str), response_1
(str, model_a's), response_2 (str, model_b's), winner ("model_a", "model_b", "tie" or "tie (bothbad)"); model_a,
model_b, language, is_code, is_refusal and category_tag (nested booleans) are kept when present.

Scoring (PPE, "How to Evaluate Reward Models for RLHF", arXiv:2410.14872, and the lmarena/PPE repository):
battles the human called a tie are left out; the accuracy is the share of the rest where the response the human
preferred has the higher reward (a tied reward counts 1/2, rewardsmith's convention), overall and per category
tag: every boolean leaf of category_tag, is_code, and hard_prompt (at least 6 of the 7 criteria_v0.1 flags,
Chatbot Arena's "hard prompts" rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.bench.build import load_release, pairwise_measure
from rewardsmith.bench.release import Column
from rewardsmith.bench.schema import BenchRow, Missing, SuiteData
from rewardsmith.bench.suite import EvalOptions, LoadRequest, Measure, RowRewards, Suite, SuiteMeasures
from rewardsmith.data.schema import user_prompt
from rewardsmith.errors import DataError

NAME = "ppe-human-preference"
HUB_ID = "lmarena-ai/PPE-Human-Preference-V1"
FOLDERS = ("PPE-Human-Preference-V1", "human_preference_v1")
SET = "human_preference_v1"
COLUMNS = (
    Column("question_id", "id"),
    Column("prompt", "str"),
    Column("response_1", "str"),
    Column("response_2", "str"),
    Column("winner", "str"),
    Column("model_a", "str", required=False),
    Column("model_b", "str", required=False),
    Column("language", "str", required=False),
    Column("is_code", "bool", required=False),
    Column("is_refusal", "bool", required=False),
    Column("category_tag", "mapping", required=False),
)
WINNERS = {"model_a": 0, "model_b": 1}
TIES = ("tie", "tie (bothbad)")
HARD_PROMPT_CRITERIA = 6
ACCURACY = "accuracy"


def category_tags(record: Mapping[str, Any]) -> list[str]:
    """The categories a battle belongs to: "<group>/<flag>" for every true boolean leaf of category_tag,
    "is_code" when set, and "hard_prompt" when at least 6 criteria_v0.1 flags are true."""
    tags: list[str] = []
    groups = record.get("category_tag") or {}
    for group, flags in groups.items():
        if isinstance(flags, Mapping):
            tags += [f"{group}/{flag}" for flag, value in flags.items() if value is True]
    criteria = groups.get("criteria_v0.1")
    if isinstance(criteria, Mapping) and sum(v is True for v in criteria.values()) >= HARD_PROMPT_CRITERIA:
        tags.append("hard_prompt")
    if record.get("is_code") is True:
        tags.append("is_code")
    return tags


def _row(where: Any, row_no: int, record: dict[str, Any]) -> BenchRow | str:
    winner = record["winner"]
    if winner in TIES:
        return "tie"
    if winner not in WINNERS:
        raise DataError(
            f"expected one of model_a, model_b, tie, tie (bothbad), got {winner!r}"[:160],
            path=where,
            row=row_no,
            field="winner",
        )
    return BenchRow(
        record["question_id"],
        SET,
        user_prompt(record["prompt"]),
        (record["response_1"], record["response_2"]),
        {"preferred": WINNERS[winner], "categories": tuple(category_tags(record))},
    )


def load(request: LoadRequest) -> SuiteData | Missing:
    """Battles with a winner (responses = (response_1, response_2); fields preferred 0 / 1 and categories), at
    most request.limit; ties are counted under dropped["tie"]. Missing when no release folder holds data files."""
    folders = [request.data_dir / "ppe" / name for name in FOLDERS]
    return load_release(request, NAME, folders, COLUMNS, _row, hub_id=HUB_ID, split="test", what="data/test-*.parquet")


def _preferred(row: BenchRow) -> int:
    return int(row.fields["preferred"])


def measure(data: SuiteData, rewards: RowRewards, options: EvalOptions) -> SuiteMeasures:
    """Accuracy overall and per category tag (categories in order of first appearance)."""
    everything = list(range(len(data.rows)))
    measures: list[Measure] = []
    if everything:
        measures.append(
            pairwise_measure(
                "overall", ACCURACY, data, rewards, everything, strict=False, preferred=_preferred, level="overall"
            )
        )
    by_tag: dict[str, list[int]] = {}
    for i, row in enumerate(data.rows):
        for tag in row.fields["categories"]:
            by_tag.setdefault(tag, []).append(i)
    for tag, rows in by_tag.items():
        measures.append(
            pairwise_measure(
                tag,
                ACCURACY,
                data,
                rewards,
                rows,
                strict=False,
                preferred=_preferred,
                level="category",
                correlation=False,
            )
        )
    return SuiteMeasures(measures, {"categories": {tag: len(rows) for tag, rows in by_tag.items()}})


SUITE = Suite(
    name=NAME,
    title="PPE human preference",
    order=30,
    release=f"{HUB_ID} (test split) at <data dir>/ppe/PPE-Human-Preference-V1/data/*.parquet",
    source="the PPE paper (arXiv:2410.14872) and the lmarena/PPE repository (human preference "
    "accuracy, ties excluded); dataset card of lmarena-ai/PPE-Human-Preference-V1 for the columns",
    load=load,
    measure=measure,
    group="ppe",
)
