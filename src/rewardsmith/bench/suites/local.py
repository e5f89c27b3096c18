"""The preference sets rewardsmith already reads, scored as one "local" suite: HH-RLHF (harmless, helpful),
PKU-SafeRLHF (harmless, helpful preference), HelpSteer2, UltraFeedback and MoralChoice (low ambiguity), each
through rewardsmith.data.registry on its evaluation split.

Scoring: the pairwise accuracy rewardsmith reports everywhere (rewardsmith.evaluate.metrics): a pair scores 1
when the preferred response has the higher reward, 0 when lower, 1/2 on a tie; a pair whose label is below 1/2
is read with its sides exchanged and one whose label is exactly 1/2 (no preference) is left out. "overall" is the
plain mean of the sets' accuracies, each set weighing the same.
"""

from __future__ import annotations

from pathlib import Path

from rewardsmith.bench.build import composite_measure, equal_weights, pairwise_measure, rows_by_subset
from rewardsmith.bench.schema import BenchRow, Missing, SuiteData
from rewardsmith.bench.suite import EvalOptions, LoadRequest, RowRewards, Suite, SuiteMeasures
from rewardsmith.data.registry import load_dataset
from rewardsmith.errors import DataError

NAME = "local"
ACCURACY = "accuracy"
# (dataset registry name, split): each set's evaluation split.
SETS: tuple[tuple[str, str | None], ...] = (
    ("hh-rlhf/harmless-base", "test"),
    ("hh-rlhf/helpful-base", "test"),
    ("pku-saferlhf/harmless", "test"),
    ("pku-saferlhf/helpful", "test"),
    ("helpsteer2", "validation"),
    ("ultrafeedback", "eval"),
    ("moralchoice/low", "test"),
)


def load(request: LoadRequest) -> SuiteData | Missing:
    """Pairs of every set whose files are present (responses = (preferred, dispreferred)), at most request.limit
    per set; a set whose file is absent is noted, a malformed one raises. Missing when no set is present."""
    data = SuiteData(NAME, [])
    for name, split in SETS:
        try:
            pairs = load_dataset(name, data_dir=request.data_dir, split=split, limit=request.limit)
        except DataError as err:
            if err.path is not None and not Path(err.path).exists():
                data.notes.append(f"{name}: missing: {err}")
                continue
            raise
        data.sources.append(pairs.source)
        data.read += pairs.n_rows
        for reason, count in pairs.dropped.items():
            data.drop(f"{name}: {reason}", count)
        for pair in pairs.pairs:
            if pair.label == 0.5:
                data.drop(f"{name}: no preference (label 0.5)")
                continue
            responses = (pair.chosen, pair.rejected) if pair.label > 0.5 else (pair.rejected, pair.chosen)
            data.rows.append(BenchRow(pair.pair_id or f"{name}:{len(data.rows)}", name, pair.prompt, responses))
    if not data.sources:
        return Missing(
            NAME,
            "missing: put the local preference sets (hh-rlhf/, pku-saferlhf/, helpsteer2/, "
            f"ultrafeedback/, moralchoice/, each as its SOURCE.md describes) under {request.data_dir}",
            str(request.data_dir),
        )
    return data


def measure(data: SuiteData, rewards: RowRewards, options: EvalOptions) -> SuiteMeasures:
    """Accuracy per set (ties 1/2) and "overall": the plain mean of the sets' accuracies (each set weighs the
    same, whatever its size)."""
    sets = [
        pairwise_measure(name, ACCURACY, data, rewards, rows, strict=False)
        for name, rows in rows_by_subset(data).items()
    ]
    if not sets:
        return SuiteMeasures([])
    overall = composite_measure("overall", ACCURACY, equal_weights(sets), level="overall", chance=50.0)
    return SuiteMeasures([overall, *sets])


SUITE = Suite(
    name=NAME,
    title="Local preference sets",
    order=60,
    release="hh-rlhf, pku-saferlhf, helpsteer2, ultrafeedback, moralchoice under <data dir> (see each SOURCE.md)",
    source="rewardsmith.evaluate.metrics (pairwise accuracy, ties 1/2)",
    load=load,
    measure=measure,
    group="local",
)
