"""RewardBench 2, allenai/reward-bench-2, the `test` split: 1,865 prompts in six subsets (Factuality, Precise IF,
Math, Safety, Focus, Ties), each with a list of chosen and a list of rejected completions.

Layout: <data dir>/reward-bench-2/data/test-*.parquet (the hub release; .jsonl / .json of the same name also
read). Columns: id (str), prompt (str), chosen (list of str), rejected (list of str), num_correct (int),
num_incorrect (int), total_completions (int), subset (str); models and additional_metadata are kept when present.
A row must hold total_completions = len(chosen) + len(rejected) and num_correct = len(chosen).

Scoring (allenai/reward-bench scripts/run_v2.py, rewardbench/utils.py `reroll_and_score_dataset`,
`process_single_model`): the completions of a row are scored as chosen + rejected; outside Ties a row earns 1/k
when its first chosen completion ties k completions at the maximum reward (itself included), else 0 (best-of-4;
chance 1/4); the subset scores the mean. Ties rows have ids "ref:<prompt>" / "tied:<prompt>" and the subset scores
the weighted formula of rewardsmith.bench.metrics.ties_statistic. The overall score is the mean of the six subset
scores (the leaderboard's average).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewardsmith.bench.build import composite_measure, equal_weights, load_release, rows_by_subset
from rewardsmith.bench.measures import Units
from rewardsmith.bench.metrics import best_of_n_credit, ties_components, ties_statistic, ties_units
from rewardsmith.bench.release import Column
from rewardsmith.bench.schema import BenchRow, Missing, SuiteData
from rewardsmith.bench.suite import EvalOptions, LoadRequest, Measure, RowRewards, Suite, SuiteMeasures
from rewardsmith.data.schema import user_prompt
from rewardsmith.errors import DataError

NAME = "reward-bench-2"
HUB_ID = "allenai/reward-bench-2"
COLUMNS = (
    Column("id", "id"),
    Column("prompt", "str"),
    Column("chosen", "list[str]"),
    Column("rejected", "list[str]"),
    Column("num_correct", "int"),
    Column("num_incorrect", "int"),
    Column("total_completions", "int"),
    Column("subset", "str"),
    Column("models", "list[str]", required=False),
    Column("additional_metadata", "mapping", required=False),
)
PATTERNS = ("test-*", "test.*")
TIES_METRIC = "Ties score"


def is_ties(subset: str) -> bool:
    """The Ties subset, named case-insensitively as run_v2.py matches it."""
    return subset.lower() == "ties"


def _check_row(record: dict[str, Any], where: Any, row_no: int) -> None:
    chosen, rejected = record["chosen"], record["rejected"]
    problems = [
        (not chosen, "chosen", "needs at least one completion"),
        (not rejected, "rejected", "needs at least one completion"),
        (
            record["num_correct"] != len(chosen),
            "num_correct",
            f"is {record['num_correct']} but chosen holds {len(chosen)} completions",
        ),
        (
            record["total_completions"] != len(chosen) + len(rejected),
            "total_completions",
            f"is {record['total_completions']} but chosen + rejected hold {len(chosen) + len(rejected)}",
        ),
        (
            is_ties(record["subset"]) and record["id"].partition(":")[0] not in ("ref", "tied"),
            "id",
            f"a Ties id must be 'ref:<id>' or 'tied:<id>', got {record['id']!r}",
        ),
    ]
    for failed, field, message in problems:
        if failed:
            raise DataError(message, path=where, row=row_no, field=field)


def _row(where: Any, row_no: int, record: dict[str, Any]) -> BenchRow:
    _check_row(record, where, row_no)
    return BenchRow(
        record["id"],
        record["subset"],
        user_prompt(record["prompt"]),
        tuple(record["chosen"]) + tuple(record["rejected"]),
        {"num_correct": record["num_correct"], "num_incorrect": record["num_incorrect"], "id": record["id"]},
    )


def load(request: LoadRequest) -> SuiteData | Missing:
    """The test split's rows (responses = chosen + rejected; fields num_correct, num_incorrect), at most
    request.limit per subset; Missing when reward-bench-2/data holds no test-* file (and the hub is not asked)."""
    return load_release(
        request,
        NAME,
        [request.data_dir / "reward-bench-2"],
        COLUMNS,
        _row,
        hub_id=HUB_ID,
        split="test",
        what="data/test-*.parquet",
        patterns=PATTERNS,
    )


def _ties_measure(subset: str, data: SuiteData, rewards: RowRewards, rows: list[int]) -> tuple[Measure, dict[str, Any]]:
    prompts, values = ties_units(
        [data.rows[i].fields["id"] for i in rows],
        [data.rows[i].fields["num_correct"] for i in rows],
        [rewards[i] for i in rows],
    )
    units = Units(tuple(prompts), values, statistic="ties")
    components: dict[str, Any] = {k: (None if np.isnan(v) else v) for k, v in ties_components(values).items()}
    components["score"] = ties_statistic(values)
    return Measure(subset, TIES_METRIC, units, chance=None, rows=tuple(rows)), components


def measure(data: SuiteData, rewards: RowRewards, options: EvalOptions) -> SuiteMeasures:
    """Per subset best-of-n accuracy (Ties: its formula); overall the mean of the subsets present."""
    subsets: list[Measure] = []
    extras: dict[str, Any] = {}
    for subset, rows in rows_by_subset(data).items():
        if is_ties(subset):
            ties, extras["ties_components"] = _ties_measure(subset, data, rewards, rows)
            subsets.append(ties)
            continue
        sizes = {len(data.rows[i].responses) for i in rows}
        credit = np.array([best_of_n_credit(rewards[i]) for i in rows])
        chance = 100.0 * float(np.mean([1.0 / len(data.rows[i].responses) for i in rows]))
        metric = f"best-of-{sizes.pop()} accuracy" if len(sizes) == 1 else "best-of-n accuracy"
        subsets.append(
            Measure(
                subset, metric, Units(tuple(data.rows[i].row_id for i in rows), credit), chance=chance, rows=tuple(rows)
            )
        )
    overall = (
        [composite_measure("overall", "mean of subsets", equal_weights(subsets), level="overall")] if subsets else []
    )
    return SuiteMeasures([*overall, *subsets], extras)


SUITE = Suite(
    name=NAME,
    title="RewardBench 2",
    order=20,
    release=f"{HUB_ID} (test split) at <data dir>/reward-bench-2/data/test-*.parquet",
    source="allenai/reward-bench: scripts/run_v2.py, rewardbench/utils.py (reroll_and_score_dataset: best-of-4 "
    "with ties 1/k; process_single_model and _compute_prompt_stats: the Ties score)",
    load=load,
    measure=measure,
    group="rewardbench2",
)
