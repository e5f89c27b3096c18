"""What a dataset adapter is asked (LoadOptions) and what it returns (PairDataset): the types the adapters
(data/adapters/) and the loader (data/registry.py) share.

An adapter is a function `(LoadOptions) -> PairDataset`; data/adapters/__init__.py names each in DATASETS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rewardsmith.data.schema import PreferencePair

OnBadRow = Literal["error", "skip"]


@dataclass(frozen=True)
class LoadOptions:
    """What a caller asks of an adapter.

    split: the file/split to read ("test", "train", ...); None = the adapter's default.
    limit: keep at most this many pairs (after dropping bad ones), in file order.
    on_bad_row: "error" raises DataError naming file, row and field; "skip" drops and counts the row.
    path / columns: for the generic file adapter (a jsonl/parquet/csv path and a column mapping).
    """

    data_dir: Path | None = None
    split: str | None = None
    limit: int | None = None
    on_bad_row: OnBadRow = "error"
    path: Path | None = None
    columns: dict[str, str] = field(default_factory=dict)


@dataclass
class PairDataset:
    """Pairs plus an account of what was read and dropped (reported in metrics.json)."""

    name: str
    pairs: list[PreferencePair]
    source: str = ""
    n_rows: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)  # kept rows whose text was fixed, by what was fixed

    def drop(self, reason: str, count: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + count

    def repair(self, what: str, count: int = 1) -> None:
        self.repaired[what] = self.repaired.get(what, 0) + count

    def account(self) -> str:
        """What was read and kept, for messages: "40 rows read, 0 pairs kept (dropped: identical 40)"."""
        drops = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(self.dropped.items()) if v)
        return f"{self.n_rows} rows read, {len(self.pairs)} pairs kept" + (f" (dropped: {drops})" if drops else "")

    def summary(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            "rows": self.n_rows,
            "pairs": len(self.pairs),
            "dropped": dict(self.dropped),
            "repaired": dict(self.repaired),
        }


Adapter = Callable[[LoadOptions], PairDataset]
