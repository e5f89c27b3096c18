"""RM-Bench (THU-KEG/RM-Bench, arXiv:2410.16184): each prompt has a chosen and a rejected response in three styles
(concise, detailed plain text, detailed markdown), compared in all nine combinations.

Layout: <data dir>/rm-bench/<domain>_filtered.json, read by rewardsmith.data.adapters.rm_bench (every
single-file dataset it registers: chat, code, safety-refuse, safety-response).

Scoring (THU-KEG/RM-Bench README `compute_accuracy`, scripts/utils.py; rewardsmith.evaluate.rmbench): the 3x3
matrix M[i, j] = share of prompts whose chosen response in style i outscores the rejected one in style j (a tie
is wrong); hard = mean of the upper-right cells (i < j: the chosen response is the less styled one), normal = the
diagonal, easy = the lower-left cells, avg = all nine. Each domain file is scored on its own, as the authors score
a data file; "overall" scores every prompt together (as on their total_dataset.json). The style gap is
hard - easy, per prompt, with its CI.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewardsmith.bench.build import missing_release, rows_by_subset
from rewardsmith.bench.measures import Units
from rewardsmith.bench.schema import BenchRow, Missing, SuiteData
from rewardsmith.bench.suite import EvalOptions, LoadRequest, Measure, PairView, RowRewards, Suite, SuiteMeasures
from rewardsmith.data.adapters.rm_bench import RMBENCH_FILES, rmbench_difficulty
from rewardsmith.data.registry import load_dataset
from rewardsmith.evaluate.rmbench import STYLE_NAMES, rmbench_accuracy, rmbench_pair_matrix

NAME = "rm-bench"
STYLES = len(STYLE_NAMES)
DIFFICULTIES = ("easy", "normal", "hard")
AVG, GAP = "avg", "hard - easy"


def domains() -> list[str]:
    """The RM-Bench datasets that are one file each (the combined "safety" is both safety files)."""
    return [name for name, files in RMBENCH_FILES.items() if len(files) == 1]


def load(request: LoadRequest) -> SuiteData | Missing:
    """Rows of every domain file present (responses = the 3 chosen then the 3 rejected style variants), at most
    request.limit per domain; Missing when none is."""
    folder = request.data_dir / "rm-bench"
    data = SuiteData(NAME, [])
    for domain in domains():
        path = folder / f"{RMBENCH_FILES[domain][0]}_filtered.json"
        if not path.is_file():
            data.notes.append(f"{domain}: missing: put {path.name} of THU-KEG/RM-Bench at {path}")
            continue
        pairs = load_dataset(f"rm-bench/{domain}", data_dir=request.data_dir, limit=request.limit)
        data.sources.append(pairs.source)
        data.read += pairs.n_rows
        for reason, count in pairs.dropped.items():
            data.drop(reason, count)
        for pair in pairs.pairs:
            variants = tuple(pair.metadata["chosen_variants"]) + tuple(pair.metadata["rejected_variants"])
            data.rows.append(BenchRow(pair.pair_id, domain, pair.prompt, variants))
    if not data.sources:
        return missing_release(
            NAME, folder, "chat_filtered.json, code_filtered.json, safety-*_filtered.json", "THU-KEG/RM-Bench"
        )
    return data


def _masks() -> dict[str, np.ndarray]:
    cells = [[rmbench_difficulty(i, j) for j in range(STYLES)] for i in range(STYLES)]
    return {d: np.array([[c == d for c in row] for row in cells]) for d in DIFFICULTIES}


def _block(
    subset: str, level: str, data: SuiteData, rewards: RowRewards, rows: list[int]
) -> tuple[list[Measure], dict[str, Any]]:
    scores = np.array([rewards[i] for i in rows], dtype=np.float64).reshape(len(rows), 2 * STYLES)
    chosen, rejected = scores[:, :STYLES], scores[:, STYLES:]
    per_prompt = rmbench_pair_matrix(chosen, rejected, tie_credit=0.0)  # (N, 3, 3)
    ids = tuple(data.rows[i].row_id for i in rows)
    masks = _masks()
    per_difficulty = {d: per_prompt[:, mask].mean(axis=1) for d, mask in masks.items()}
    lengths = np.array([data.rows[i].lengths() for i in rows]).reshape(len(rows), 2 * STYLES)
    margins = (chosen[:, :, None] - rejected[:, None, :]).ravel()
    pairs = PairView(
        margins,
        np.repeat(lengths[:, :STYLES], STYLES, axis=1).ravel(),
        np.tile(lengths[:, STYLES:], (1, STYLES)).ravel(),
        strict=True,
    )
    measures = [
        Measure(
            subset,
            AVG,
            Units(ids, per_prompt.reshape(len(rows), -1).mean(axis=1)),
            level=level,
            chance=50.0,
            pairs=pairs,
            rows=tuple(rows),
        )
    ]
    measures += [
        Measure(subset, d, Units(ids, per_difficulty[d]), level=level, primary=False, chance=50.0) for d in DIFFICULTIES
    ]
    measures.append(
        Measure(
            subset,
            GAP,
            Units(ids, per_difficulty["hard"] - per_difficulty["easy"]),
            level=level,
            primary=False,
            chance=0.0,
            unit="pp",
        )
    )
    matrix = rmbench_accuracy(chosen, rejected, n_boot=0)["matrix"]
    return measures, {"matrix": matrix, "n": len(rows)}


def measure(data: SuiteData, rewards: RowRewards, options: EvalOptions) -> SuiteMeasures:
    """Per domain and overall: avg (primary), easy, normal, hard and hard - easy; extras["matrices"]: the 3x3
    matrices (%, rows the chosen style, columns the rejected style)."""
    measures: list[Measure] = []
    matrices: dict[str, Any] = {}
    if data.rows:
        block, matrices["overall"] = _block("overall", "overall", data, rewards, list(range(len(data.rows))))
        measures += block
    for domain, rows in rows_by_subset(data).items():
        block, matrices[domain] = _block(domain, "subset", data, rewards, rows)
        measures += block
    return SuiteMeasures(measures, {"matrices": matrices, "styles": list(STYLE_NAMES)})


SUITE = Suite(
    name=NAME,
    title="RM-Bench",
    order=50,
    release="THU-KEG/RM-Bench at <data dir>/rm-bench/<domain>_filtered.json",
    source="THU-KEG/RM-Bench: README.md and scripts/utils.py (compute_accuracy: hard = upper-right triangle, "
    "easy = lower-left, normal = diagonal; a tie is wrong)",
    load=load,
    measure=measure,
    group="rm-bench",
)
