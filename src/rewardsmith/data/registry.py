"""The function every caller uses to load a preference dataset by name, from the table of adapters.

An adapter is a function `(LoadOptions) -> PairDataset` (data/dataset.py), named in DATASETS under the name configs
and the CLI use (`hh-rlhf/harmless-base`, `rm-bench/chat`, `synthetic/source`, ...): data/adapters/__init__.py
lists them all. Importing reads no file.
"""

from __future__ import annotations

from pathlib import Path

from rewardsmith.config import DatasetConfig
from rewardsmith.data.adapters import DATASETS
from rewardsmith.data.dataset import LoadOptions, OnBadRow, PairDataset
from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import ConfigError

__all__ = ["DATASETS", "LoadOptions", "PairDataset", "load_configured", "load_dataset", "load_pairs"]


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    split: str | None = None,
    limit: int | None = None,
    on_bad_row: OnBadRow = "error",
    path: str | Path | None = None,
    columns: dict[str, str] | None = None,
) -> PairDataset:
    """Loads a dataset of DATASETS by name. Raises UnknownNameError or DataError with a one-line message."""
    adapter = DATASETS.get(name)
    opts = LoadOptions(
        Path(data_dir) if data_dir else None,
        split,
        limit,
        on_bad_row,
        Path(path) if path else None,
        dict(columns or {}),
    )
    return adapter(opts)


def load_configured(ds: DatasetConfig, data_dir: str | Path | None = None) -> PairDataset:
    """Loads the dataset a DatasetConfig describes (the form configs and the CLI use)."""
    if ds.on_bad_row not in ("error", "skip"):
        raise ConfigError(f"on_bad_row must be 'error' or 'skip', got {ds.on_bad_row!r}")
    return load_dataset(
        ds.name,
        data_dir=data_dir,
        split=ds.split,
        limit=ds.limit,
        path=ds.path,
        columns=ds.columns,
        on_bad_row=ds.on_bad_row,  # type: ignore[arg-type]
    )


def load_pairs(name: str, **kwargs: object) -> list[PreferencePair]:
    """Shorthand for load_dataset(name, ...).pairs."""
    return load_dataset(name, **kwargs).pairs  # type: ignore[arg-type]
