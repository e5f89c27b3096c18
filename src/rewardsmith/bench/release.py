"""Reading a benchmark release as its hub repository lays it out: the data files under <data dir>/<folder>/data
(Parquet, JSONL or a JSON array), or the hub id itself through `datasets.load_dataset` where the network allows.

Every row is checked against the release's published columns: a missing or ill-typed column is a one-line
DataError naming the file (and the row, for JSONL / JSON and for values of the wrong type).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rewardsmith.data.adapters._common import (
    BadRow,
    iter_jsonl,
    iter_parquet,
    one_line,
    parquet_columns,
    read_json_array,
)
from rewardsmith.errors import DataError
from rewardsmith.io.environment import hub_offline

Kind = Literal["str", "id", "int", "bool", "list[str]", "list[bool]", "list[pair]", "mapping"]
DATA_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json")


@dataclass(frozen=True)
class Column:
    """A published column: its name, the kind of value it holds and whether a release must have it.

    Kinds: "str"; "id" (a string or an integer, read as a string); "int"; "bool"; "list[str]"; "list[bool]"
    (booleans, or the integers 0 / 1); "list[pair]" (a list of [i, j] integer pairs); "mapping" (an object).
    Optional columns may be absent or null.
    """

    name: str
    kind: Kind
    required: bool = True


def _type_name(value: Any) -> str:
    return type(value).__name__


def _check(value: Any, column: Column) -> Any:
    """`value` converted to its column's kind; BadRow naming the column when it is not of that kind."""
    kind = column.kind
    if value is None:
        if column.required:
            raise BadRow("missing value", column.name)
        return None
    ok: bool
    if kind == "str":
        ok = isinstance(value, str)
    elif kind == "id":
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        value = str(value) if ok else value
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "list[str]":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif kind == "list[bool]":
        ok = isinstance(value, list) and all(isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)) for v in value)
        value = [bool(v) for v in value] if ok else value
    elif kind == "list[pair]":
        ok = isinstance(value, list) and all(
            isinstance(p, list | tuple)
            and len(p) == 2
            and all(isinstance(i, int) and not isinstance(i, bool) for i in p)
            for p in value
        )
        value = [(int(p[0]), int(p[1])) for p in value] if ok else value
    elif kind == "mapping":
        ok = isinstance(value, Mapping)
    else:  # pragma: no cover - Kind is closed
        raise ValueError(f"unknown column kind {kind!r}")
    if not ok:
        raise BadRow(
            f"expected {kind}, got {_type_name(value)}"
            + (f" {one_line(repr(value), 60)}" if isinstance(value, str | int | float) else ""),
            column.name,
        )
    return value


def check_record(record: Any, columns: Sequence[Column]) -> dict[str, Any]:
    """The record's published columns, each checked and converted (absent optional ones as None), plus every
    other key as it is. Raises BadRow naming the first missing or ill-typed column."""
    if not isinstance(record, Mapping):
        raise BadRow(f"expected an object, got {_type_name(record)}")
    out = dict(record)
    for column in columns:
        if column.name not in record:
            if column.required:
                raise BadRow("missing column", column.name)
            out[column.name] = None
            continue
        out[column.name] = _check(record[column.name], column)
    return out


def release_files(folder: Path, patterns: Sequence[str] = ("*",)) -> list[Path]:
    """Data files of a release folder: folder/data/<pattern> with a data suffix, sorted by name, or [] when there
    are none (the folder is absent or holds no data files)."""
    data = folder / "data"
    if not data.is_dir():
        return []
    found = {
        p
        for pattern in patterns
        for p in data.glob(pattern)
        if p.is_file() and p.name.endswith(DATA_SUFFIXES) and not p.name.startswith(".")
    }
    return sorted(found)


def file_columns(path: Path) -> list[str] | None:
    """Column names of a Parquet file (from its footer); None for JSONL / JSON (checked per row)."""
    return parquet_columns(path) if path.name.endswith(".parquet") else None


def read_release(paths: Sequence[Path], columns: Sequence[Column]) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """Yields (file, 1-based row number, checked record) for every row of the files, in order.

    A Parquet file missing a required column fails before any of its rows is read; any row whose value is
    missing or of the wrong kind fails with a DataError naming file, row and column.
    """
    for path in paths:
        names = file_columns(path)
        if names is not None:
            absent = [c.name for c in columns if c.required and c.name not in names]
            if absent:
                raise DataError(
                    f"missing column {absent[0]!r}; the release's columns are "
                    f"{', '.join(c.name for c in columns if c.required)}",
                    path=path,
                    field=absent[0],
                )
        for row_no, record in _records(path):
            try:
                if isinstance(record, BadRow):
                    raise record
                checked = check_record(record, columns)
            except BadRow as bad:
                raise DataError(one_line(bad.message), path=path, row=row_no, field=bad.field) from None
            yield path, row_no, checked


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    if path.name.endswith(".parquet"):
        yield from iter_parquet(path)
    elif path.name.endswith((".jsonl", ".jsonl.gz")):
        yield from iter_jsonl(path)
    else:
        yield from enumerate(read_json_array(path), start=1)


def open_hub(hub_id: str, split: str) -> Any:
    """The hub dataset `datasets.load_dataset(hub_id, split=split)`; only where the network allows: a one-line
    DataError when $HF_HUB_OFFLINE is set or the hub cannot be read."""
    if hub_offline():
        raise DataError(f"cannot read {hub_id} from the hub: HF_HUB_OFFLINE is set")
    import datasets

    try:
        return datasets.load_dataset(hub_id, split=split)
    except Exception as err:  # datasets raises many unrelated types (network, auth, missing split)
        raise DataError(f"cannot read {hub_id} from the hub ({one_line(str(err))})") from None


def hub_rows(table: Any, hub_id: str, columns: Sequence[Column]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Rows of an opened hub dataset, checked as `read_release` checks files: (hub id, 1-based row, record)."""
    for row_no, record in enumerate(table, start=1):
        try:
            yield hub_id, row_no, check_record(record, columns)
        except BadRow as bad:
            raise DataError(one_line(bad.message), path=hub_id, row=row_no, field=bad.field) from None


_RESPONSE_COLUMN = re.compile(r"^response_(\d+)$")


def numbered_columns(names: Sequence[str], prefix_pattern: re.Pattern[str] = _RESPONSE_COLUMN) -> list[str]:
    """Columns named response_1 .. response_K (any order in `names`), sorted by number; a DataError-ready
    ValueError when the numbers are not 1..K."""
    numbered = sorted((int(m.group(1)), name) for name in names if (m := prefix_pattern.match(name)))
    numbers = [n for n, _ in numbered]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"response columns are not numbered 1..{len(numbers)}: {numbers[:6]}")
    return [name for _, name in numbered]


class SubsetLimit:
    """Keeps at most `limit` rows per subset (None: all), in file order."""

    def __init__(self, limit: int | None):
        if limit is not None and limit < 0:
            raise DataError(f"limit must be >= 0, got {limit}")
        self.limit = limit
        self._counts: dict[str, int] = {}

    def admit(self, subset: str) -> bool:
        """True (and counted) when the subset has room for one more row."""
        count = self._counts.get(subset, 0)
        if self.limit is not None and count >= self.limit:
            return False
        self._counts[subset] = count + 1
        return True


class UniqueIds:
    """Row ids made unique within a suite: a repeated id gets "#2", "#3", ... in file order (stable)."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def __call__(self, row_id: str) -> str:
        count = self._seen.get(row_id, 0) + 1
        self._seen[row_id] = count
        return row_id if count == 1 else f"{row_id}#{count}"
