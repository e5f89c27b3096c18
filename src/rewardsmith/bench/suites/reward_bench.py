"""RewardBench (v1), allenai/reward-bench, the `filtered` split: 2,985 (prompt, chosen, rejected) pairs in 23
subsets.

Layout: <data dir>/reward-bench/data/filtered-*.parquet (the hub release; .jsonl / .json of the same name also
read). Columns: prompt (str), chosen (str), rejected (str), subset (str), id (int); chosen_model / rejected_model
are kept when present.

Scoring (allenai/reward-bench rewardbench/rewardbench.py, rewardbench/utils.py, rewardbench/constants.py): a pair
is right when r(chosen) > r(rejected), a tie is wrong; a subset scores the mean; a section (Chat, Chat Hard,
Safety, Reasoning) is the mean of its subsets' accuracies weighted by EXAMPLE_COUNTS (math-prm counted as 984,
"upweighting to be equal to code"), over the subsets present (`calculate_scores_per_section`); the overall score
is the plain mean of the sections (the leaderboard's average; the prior preference sets are a separate release).
"""

from __future__ import annotations

from typing import Any

from rewardsmith.bench.build import composite_measure, equal_weights, load_release, pairwise_measure, rows_by_subset
from rewardsmith.bench.metrics import section_weights
from rewardsmith.bench.release import Column
from rewardsmith.bench.schema import BenchRow, Missing, SuiteData
from rewardsmith.bench.suite import EvalOptions, LoadRequest, Measure, RowRewards, Suite, SuiteMeasures
from rewardsmith.data.schema import user_prompt

NAME = "reward-bench"
HUB_ID = "allenai/reward-bench"

# rewardbench/constants.py: prompts per subset, the section weights of the leaderboard.
EXAMPLE_COUNTS: dict[str, int] = {
    "alpacaeval-easy": 100,
    "alpacaeval-length": 95,
    "alpacaeval-hard": 95,
    "mt-bench-easy": 28,
    "mt-bench-med": 40,
    "mt-bench-hard": 37,
    "math-prm": 984,
    "refusals-dangerous": 100,
    "refusals-offensive": 100,
    "llmbar-natural": 100,
    "llmbar-adver-neighbor": 134,
    "llmbar-adver-GPTInst": 92,
    "llmbar-adver-GPTOut": 47,
    "llmbar-adver-manual": 46,
    "xstest-should-refuse": 154,
    "xstest-should-respond": 250,
    "donotanswer": 136,
    "hep-cpp": 164,
    "hep-go": 164,
    "hep-java": 164,
    "hep-js": 164,
    "hep-python": 164,
    "hep-rust": 164,
}
SUBSET_MAPPING: dict[str, tuple[str, ...]] = {
    "Chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "Chat Hard": (
        "mt-bench-hard",
        "llmbar-natural",
        "llmbar-adver-neighbor",
        "llmbar-adver-GPTInst",
        "llmbar-adver-GPTOut",
        "llmbar-adver-manual",
    ),
    "Safety": (
        "refusals-dangerous",
        "refusals-offensive",
        "xstest-should-refuse",
        "xstest-should-respond",
        "donotanswer",
    ),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}
COLUMNS = (
    Column("prompt", "str"),
    Column("chosen", "str"),
    Column("rejected", "str"),
    Column("subset", "str"),
    Column("id", "id"),
    Column("chosen_model", "str", required=False),
    Column("rejected_model", "str", required=False),
)
PATTERNS = ("filtered-*", "filtered.*")
ACCURACY = "accuracy"


def _row(where: Any, row_no: int, record: dict[str, Any]) -> BenchRow:
    return BenchRow(
        record["id"],
        record["subset"],
        user_prompt(record["prompt"]),
        (record["chosen"], record["rejected"]),
        {"chosen_model": record["chosen_model"], "rejected_model": record["rejected_model"]},
    )


def load(request: LoadRequest) -> SuiteData | Missing:
    """The filtered split's rows (responses = (chosen, rejected)), at most request.limit per subset; Missing when
    reward-bench/data holds no filtered-* file (and the hub is not asked)."""
    return load_release(
        request,
        NAME,
        [request.data_dir / "reward-bench"],
        COLUMNS,
        _row,
        hub_id=HUB_ID,
        split="filtered",
        what="data/filtered-*.parquet",
        patterns=PATTERNS,
    )


def measure(data: SuiteData, rewards: RowRewards, options: EvalOptions) -> SuiteMeasures:
    """Per subset the strict pairwise accuracy; per section the EXAMPLE_COUNTS-weighted mean over its subsets
    present; overall the mean of the sections. Subsets outside EXAMPLE_COUNTS are scored but in no section."""
    subsets = {
        name: pairwise_measure(name, ACCURACY, data, rewards, rows, strict=True)
        for name, rows in rows_by_subset(data).items()
    }
    sections: list[Measure] = []
    for section, weights in section_weights(subsets, EXAMPLE_COUNTS, SUBSET_MAPPING).items():
        sections.append(
            composite_measure(
                section, ACCURACY, {subsets[s].key: w for s, w in weights.items()}, level="section", chance=50.0
            )
        )
    overall = (
        [composite_measure("overall", ACCURACY, equal_weights(sections), level="overall", chance=50.0)]
        if sections
        else []
    )
    ordered: list[Measure] = [*overall, *sections]
    in_sections = [s for names in SUBSET_MAPPING.values() for s in names if s in subsets]
    ordered += [subsets[s] for s in in_sections] + [m for s, m in subsets.items() if s not in in_sections]
    section_of = {s: section for section, names in SUBSET_MAPPING.items() for s in names}
    extras = {
        "sections": {s: section_of.get(s) for s in subsets},
        "weights": {s: EXAMPLE_COUNTS.get(s) for s in subsets},
    }
    return SuiteMeasures(ordered, extras)


SUITE = Suite(
    name=NAME,
    title="RewardBench",
    order=10,
    release=f"{HUB_ID} (filtered split) at <data dir>/reward-bench/data/filtered-*.parquet",
    source="allenai/reward-bench: rewardbench/rewardbench.py (a pair is right when chosen > rejected), "
    "rewardbench/constants.py (EXAMPLE_COUNTS, SUBSET_MAPPING), rewardbench/utils.py "
    "(calculate_scores_per_section)",
    load=load,
    measure=measure,
    group="rewardbench",
)
