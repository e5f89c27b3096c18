"""PPE correctness, the five best-of-K sets of lmarena-ai (`train` split): MMLU-Pro, MATH, GPQA, IFEval and
MBPP-Plus prompts, each with 32 sampled responses and a verified correctness label per response.

Layout: <data dir>/ppe/<set>/data/*.parquet with <set> the hub name (PPE-MMLU-Pro-Best-of-K, PPE-MATH-Best-of-K,
PPE-GPQA-Best-of-K, PPE-IFEval-Best-of-K, PPE-MBPP-Plus-Best-of-K) or PPE's own (mmlu_pro_best_of_k, ...); sets
present are scored, the others listed in the notes. Columns: prompt (str), response_1 .. response_K (str),
scores (K booleans: response k is correct), sampled_conflict_pairs (pairs [i, j] of 0-based response indices, one
correct and one incorrect); question_id and model_name name the row when present.

Scoring (PPE, "How to Evaluate Reward Models for RLHF", arXiv:2410.14872, and the lmarena/PPE repository):
- conflict accuracy: the share of sampled conflict pairs whose correct response has the higher reward (a tied
  reward counts 1/2), resampled by prompt;
- best-of-K curve, K = 1..32: the expected correctness of the highest-reward response among K drawn without
  replacement from a prompt's responses (computed exactly, a tie at the top broken at random), averaged over
  prompts; reported by its area (the mean over K), its end (K = 32: the top-reward response) and its maximum;
  the oracle curve (some correct response among K) and a random pick (the mean correctness) bound it;
- ROC AUC: rewards as a classifier of correctness, pooled over every response of the set (a tie counts 1/2).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rewardsmith.bench.build import (
    add_rows,
    composite_measure,
    equal_weights,
    missing_release,
    release_rows,
    rows_by_subset,
)
from rewardsmith.bench.measures import Units
from rewardsmith.bench.metrics import conflict_pairs, oracle_best_of_k
from rewardsmith.bench.release import Column, SubsetLimit, UniqueIds, numbered_columns
from rewardsmith.bench.schema import BenchRow, Missing, SuiteData
from rewardsmith.bench.suite import EvalOptions, LoadRequest, Measure, PairView, RowRewards, Suite, SuiteMeasures
from rewardsmith.data.schema import user_prompt
from rewardsmith.errors import DataError
from rewardsmith.evaluate.best_of_n import best_of_n_curve
from rewardsmith.stats import bootstrap_indices, percentile_interval

NAME = "ppe-correctness"
# Set name -> (hub id, PPE's benchmark name); the hub id's last part is the release folder.
SETS: dict[str, tuple[str, str]] = {
    "mmlu_pro": ("lmarena-ai/PPE-MMLU-Pro-Best-of-K", "mmlu_pro_best_of_k"),
    "math": ("lmarena-ai/PPE-MATH-Best-of-K", "math_best_of_k"),
    "gpqa": ("lmarena-ai/PPE-GPQA-Best-of-K", "gpqa_best_of_k"),
    "ifeval": ("lmarena-ai/PPE-IFEval-Best-of-K", "ifeval_best_of_k"),
    "mbpp_plus": ("lmarena-ai/PPE-MBPP-Plus-Best-of-K", "mbpp_plus_best_of_k"),
}
COLUMNS = (
    Column("prompt", "str"),
    Column("scores", "list[bool]"),
    Column("sampled_conflict_pairs", "list[pair]"),
    Column("question_id", "id", required=False),
    Column("model_name", "str", required=False),
)
CONFLICT = "conflict accuracy"
AREA, END, PEAK, AUC = "best-of-K area", "best-of-K end", "best-of-K max", "ROC AUC"


def _set_row(set_name: str, where: Any, row_no: int, record: dict[str, Any]) -> BenchRow:
    """One row of a set (subset = the set's name), its id '<set>:<question_id or row N>[:<model_name>]'."""
    try:
        names = numbered_columns(list(record))
    except ValueError as err:
        raise DataError(str(err), path=where, row=row_no, field="response_*") from None
    correct = record["scores"]
    if not names or len(names) != len(correct):
        raise DataError(
            f"{len(names)} response columns for {len(correct)} correctness labels",
            path=where,
            row=row_no,
            field="scores",
        )
    responses = []
    for name in names:
        if not isinstance(record[name], str):
            raise DataError(f"expected str, got {type(record[name]).__name__}", path=where, row=row_no, field=name)
        responses.append(record[name])
    for i, j in record["sampled_conflict_pairs"]:
        if not (0 <= i < len(responses) and 0 <= j < len(responses)):
            raise DataError(
                f"pair ({i}, {j}) outside responses 0..{len(responses) - 1}",
                path=where,
                row=row_no,
                field="sampled_conflict_pairs",
            )
    question = record["question_id"] if record["question_id"] is not None else f"row {row_no}"
    return BenchRow(
        f"{set_name}:{question}" + (f":{record['model_name']}" if record["model_name"] else ""),
        set_name,
        user_prompt(record["prompt"]),
        tuple(responses),
        {"correct": tuple(correct), "pairs": tuple(record["sampled_conflict_pairs"])},
    )


def load(request: LoadRequest) -> SuiteData | Missing:
    """The rows of every set present (subset = set name), at most request.limit per set; Missing when none is."""
    root = request.data_dir / "ppe"
    data = SuiteData(NAME, [])
    limit, unique = SubsetLimit(request.limit), UniqueIds()
    for set_name, (hub_id, ppe_name) in SETS.items():
        folder = hub_id.split("/")[1]
        source = release_rows(
            request,
            NAME,
            [root / folder, root / ppe_name],
            COLUMNS,
            hub_id=hub_id,
            split="train",
            what="data/train-*.parquet",
        )
        if isinstance(source, Missing):
            data.notes.append(f"{set_name}: {source.message}")
            continue
        rows, sources = source
        data.sources += sources
        add_rows(data, rows, functools.partial(_set_row, set_name), limit, unique)
    if not data.sources:
        folders = ", ".join(hub_id.split("/")[1] for hub_id, _ in SETS.values())
        return missing_release(NAME, root, f"{folders}: each with data/train-*.parquet", "lmarena-ai/PPE-*-Best-of-K")
    return data


def _curve_extras(curves: np.ndarray, oracle: np.ndarray, ks: list[int], options: EvalOptions) -> dict[str, Any]:
    """Mean curve over prompts with a bootstrap band per K (prompts resampled), and the oracle curve."""
    mean = curves.mean(axis=0) * 100.0
    low: list[float | None] = [None] * len(ks)
    high: list[float | None] = [None] * len(ks)
    if options.n_boot > 0 and len(curves):
        idx = bootstrap_indices(len(curves), options.n_boot, options.seed)
        reps = curves[idx].mean(axis=1) * 100.0  # (B, len(ks))
        bands = [percentile_interval(reps[:, j], options.confidence) for j in range(len(ks))]
        low, high = [b[0] for b in bands], [b[1] for b in bands]
    return {
        "k": ks,
        "curve": mean.tolist(),
        "low": list(low),
        "high": list(high),
        "oracle": (oracle.mean(axis=0) * 100.0).tolist(),
    }


def _set_measures(
    set_name: str, data: SuiteData, rewards: RowRewards, rows: list[int], options: EvalOptions
) -> tuple[list[Measure], dict[str, Any]]:
    ids = tuple(data.rows[i].row_id for i in rows)
    k_max = min(len(data.rows[i].responses) for i in rows)
    ks = list(range(1, k_max + 1))
    counts, margins, good_len, bad_len, curves, oracle, auc_values = [], [], [], [], [], [], []
    for i in rows:
        row, r = data.rows[i], np.asarray(rewards[i], dtype=np.float64)
        correct = np.asarray(row.fields["correct"], dtype=np.float64)
        credit, margin, oriented = conflict_pairs(r, correct, row.fields["pairs"])
        lengths = row.lengths()
        counts.append((credit.sum(), credit.size))
        margins.append(margin)
        good_len.append(lengths[oriented[:, 0]])
        bad_len.append(lengths[oriented[:, 1]])
        curves.append(best_of_n_curve(r, correct, ks))
        oracle.append(oracle_best_of_k(correct, ks))
        auc_values.append(np.concatenate([r[:k_max], correct[:k_max]]))
    curve_arr, oracle_arr = np.array(curves), np.array(oracle)
    random_pick = 100.0 * float(np.mean([np.mean(data.rows[i].fields["correct"]) for i in rows]))
    pairs = PairView(np.concatenate(margins), np.concatenate(good_len), np.concatenate(bad_len))
    measures = [
        Measure(
            set_name,
            CONFLICT,
            Units(ids, np.array(counts, dtype=np.float64), "ratio"),
            chance=50.0,
            pairs=pairs,
            rows=tuple(rows),
        ),
        Measure(set_name, AREA, Units(ids, curve_arr.mean(axis=1)), primary=False, chance=random_pick),
        Measure(set_name, END, Units(ids, curve_arr[:, -1]), primary=False, chance=random_pick),
        Measure(set_name, PEAK, Units(ids, curve_arr, "max_of_means"), primary=False, chance=random_pick),
        Measure(
            set_name, AUC, Units(ids, np.array(auc_values), "pooled_auc", scale=1.0), primary=False, chance=0.5, unit=""
        ),
    ]
    extras = _curve_extras(curve_arr, oracle_arr, ks, options)
    extras["random"] = random_pick
    extras["peak_k"] = ks[int(np.argmax(curve_arr.mean(axis=0)))]
    return measures, extras


def measure(data: SuiteData, rewards: RowRewards, options: EvalOptions) -> SuiteMeasures:
    """Per set: conflict accuracy (primary), best-of-K area / end / max and ROC AUC; "overall" of each metric is
    the mean over the sets present. extras["curves"][set]: the best-of-K curve (%, with its band and the oracle)."""
    per_set: dict[str, list[Measure]] = {}
    curves: dict[str, Any] = {}
    for set_name, rows in rows_by_subset(data).items():
        per_set[set_name], curves[set_name] = _set_measures(set_name, data, rewards, rows, options)
    overall = []
    for column, metric in enumerate((CONFLICT, AREA, END, PEAK, AUC)):
        parts = [measures[column] for measures in per_set.values()]
        if parts:
            overall.append(
                composite_measure(
                    "overall",
                    metric,
                    equal_weights(parts),
                    level="overall",
                    primary=metric == CONFLICT,
                    unit=parts[0].unit,
                    chance=parts[0].chance if metric in (CONFLICT, AUC) else None,
                )
            )
    return SuiteMeasures([*overall, *(m for ms in per_set.values() for m in ms)], {"curves": curves})


SUITE = Suite(
    name=NAME,
    title="PPE correctness (best-of-K)",
    order=40,
    release="lmarena-ai/PPE-{MMLU-Pro,MATH,GPQA,IFEval,MBPP-Plus}-Best-of-K (train split) at "
    "<data dir>/ppe/<set>/data/*.parquet",
    source="the PPE paper (arXiv:2410.14872) and the lmarena/PPE repository (conflict-pair "
    "accuracy, best-of-K curve, ROC AUC); the sets' dataset cards for the columns",
    load=load,
    measure=measure,
    group="ppe",
)
