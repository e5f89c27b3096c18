"""Pieces the suite modules share: finding a release's rows (files, else the hub, else a Missing note in one
format), grouping rows by subset, pairwise measures (credit per row, the pairs behind it) and composites."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from rewardsmith.bench.measures import Composite, Units
from rewardsmith.bench.metrics import strict_correct
from rewardsmith.bench.release import Column, SubsetLimit, UniqueIds, hub_rows, open_hub, read_release, release_files
from rewardsmith.bench.schema import BenchRow, Missing, SuiteData
from rewardsmith.bench.suite import LoadRequest, Measure, PairView, measure_key
from rewardsmith.errors import DataError
from rewardsmith.evaluate.metrics import pairwise_correct

# Checked rows of a release, (file or hub id, 1-based row number, record), and the sources they come from.
RowSource: TypeAlias = tuple[Iterator[tuple[Any, int, dict[str, Any]]], list[str]]
# A suite's reading of one checked record (file or hub id, 1-based row number, record): its BenchRow (the release's
# own id, made unique on admission), or the reason it is dropped; DataError for a record that is wrong.
RowOf: TypeAlias = Callable[[Any, int, dict[str, Any]], BenchRow | str]


def rows_by_subset(data: SuiteData) -> dict[str, list[int]]:
    """Subset -> indices of its rows, subsets in order of first appearance."""
    out: dict[str, list[int]] = {}
    for i, row in enumerate(data.rows):
        out.setdefault(row.subset, []).append(i)
    return out


def first_is_preferred(row: BenchRow) -> int:
    """The preferred response of a (chosen, rejected) row: index 0."""
    return 0


def pairwise_measure(
    subset: str,
    metric: str,
    data: SuiteData,
    rewards: Sequence[np.ndarray],
    rows: Sequence[int],
    *,
    strict: bool,
    preferred: Callable[[BenchRow], int] = first_is_preferred,
    level: str = "subset",
    chance: float | None = 50.0,
    correlation: bool = True,
) -> Measure:
    """Accuracy (%) over two-response rows: a row scores 1 when its preferred response has the higher reward, 0
    when the lower, and on a tie 0 (strict, RewardBench's rule) or 1/2.

    rows: indices into data.rows; preferred(row) -> 0 or 1. Carries the pairs for the length-controlled accuracy
    and, with correlation=True, the rows for the reward-length correlation.
    """
    pref = np.array([preferred(data.rows[i]) for i in rows], dtype=np.int64)
    rr = np.array([rewards[i] for i in rows], dtype=np.float64).reshape(len(rows), 2)
    ll = np.array([data.rows[i].lengths() for i in rows], dtype=np.float64).reshape(len(rows), 2)
    take = np.arange(len(rows))
    margins = rr[take, pref] - rr[take, 1 - pref]
    credit = strict_correct(margins) if strict else pairwise_correct(margins)
    units = Units(tuple(data.rows[i].row_id for i in rows), credit)
    pairs = PairView(margins, ll[take, pref], ll[take, 1 - pref], strict=strict)
    return Measure(
        subset, metric, units, level=level, chance=chance, pairs=pairs, rows=tuple(rows) if correlation else None
    )


def composite_measure(
    subset: str,
    metric: str,
    weights: Mapping[str, float],
    *,
    level: str,
    chance: float | None = None,
    unit: str = "%",
    primary: bool = True,
) -> Measure:
    """A measure that is the weighted mean of other measures (weights: measure key -> weight)."""
    return Measure(subset, metric, Composite(dict(weights)), level=level, chance=chance, unit=unit, primary=primary)


def equal_weights(measures: Sequence[Measure]) -> dict[str, float]:
    """{key: 1.0} for each measure: the plain mean of them."""
    return {m.key: 1.0 for m in measures}


def key(subset: str, metric: str) -> str:
    return measure_key(subset, metric)


def release_rows(
    request: LoadRequest,
    suite: str,
    folders: Sequence[Path],
    columns: Sequence[Column],
    *,
    hub_id: str,
    split: str,
    what: str,
    patterns: Sequence[str] = ("*",),
) -> RowSource | Missing:
    """The rows of a release: its data files in the first of `folders` that has any, else (request.hub) the hub
    dataset, else Missing naming folders[0]. A hub that cannot be read is Missing too, with the reason."""
    for folder in folders:
        files = release_files(folder, patterns)
        if files:
            return read_release(files, columns), [str(p) for p in files]
    if request.hub:
        try:
            table = open_hub(hub_id, split)
        except DataError as err:
            return Missing(
                suite, f"missing: {err}; or put the {hub_id} release folder ({what}) at {folders[0]}", str(folders[0])
            )
        return hub_rows(table, hub_id, columns), [f"{hub_id} ({split})"]
    return missing_release(suite, folders[0], what, hub_id)


def missing_release(suite: str, folder: Path, what: str, hub_id: str) -> Missing:
    """The note of an absent release: 'missing: put the <hub id> release folder (<what>) at <folder>'."""
    return Missing(suite, f"missing: put the {hub_id} release folder ({what}) at {folder}", str(folder))


def add_rows(
    data: SuiteData,
    rows: Iterable[tuple[Any, int, dict[str, Any]]],
    row_of: RowOf,
    limit: SubsetLimit,
    unique: UniqueIds,
) -> None:
    """Reads `rows` into data: each record counted in data.read, then read by row_of (a reason: counted under
    data.dropped); a row is kept when `limit` admits its subset, its id made unique by `unique` (both may be shared
    by several calls: the sets of one suite)."""
    for where, row_no, record in rows:
        data.read += 1
        row = row_of(where, row_no, record)
        if isinstance(row, str):
            data.drop(row)
        elif limit.admit(row.subset):
            data.rows.append(dataclasses.replace(row, row_id=unique(row.row_id)))


def load_release(
    request: LoadRequest,
    suite: str,
    folders: Sequence[Path],
    columns: Sequence[Column],
    row_of: RowOf,
    *,
    hub_id: str,
    split: str,
    what: str,
    patterns: Sequence[str] = ("*",),
) -> SuiteData | Missing:
    """A one-release suite's data: the release's rows (release_rows, which says where they are looked for) read by
    row_of (add_rows), at most request.limit per subset; Missing when the release is absent."""
    source = release_rows(request, suite, folders, columns, hub_id=hub_id, split=split, what=what, patterns=patterns)
    if isinstance(source, Missing):
        return source
    rows, sources = source
    data = SuiteData(suite, [], sources)
    add_rows(data, rows, row_of, SubsetLimit(request.limit), UniqueIds())
    return data
