"""Where real datasets are read from: --data-dir, else $REWARDSMITH_DATA_DIR, else ../shared/data."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from rewardsmith.errors import DataError

ENV_VAR = "REWARDSMITH_DATA_DIR"


def _candidates() -> list[Path]:
    repo_root = Path(__file__).resolve().parents[3]  # src/rewardsmith/data/sources.py -> repo root
    return [Path.cwd().parent / "shared" / "data", repo_root.parent / "shared" / "data"]


def find_data_dir(data_dir: str | Path | None = None) -> Path | None:
    """The data directory to use, or None when none is configured or present."""
    if data_dir:
        return Path(data_dir).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    for candidate in _candidates():
        if candidate.is_dir():
            return candidate
    return None


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """Like find_data_dir, but raises a one-line DataError when there is none."""
    found = find_data_dir(data_dir)
    if found is None or not found.is_dir():
        raise DataError(f"data directory not found ({found or 'none configured'}); pass --data-dir or set ${ENV_VAR}")
    return found


def dataset_file(data_dir: str | Path | None, *parts: str) -> Path:
    """Path of one file inside the data directory; a clear error when it is missing."""
    path = resolve_data_dir(data_dir).joinpath(*parts)
    if not path.exists():
        raise DataError("file not found", path=path)
    return path


@contextlib.contextmanager
def sample_dir() -> Iterator[Path]:
    """The data sample shipped inside the package (resources/sample: the demo's MIT-licensed HH-RLHF, MoralChoice and
    PluriHarms files) as a folder, extracted for the duration when the package is zipped."""
    with resources.as_file(resources.files("rewardsmith.resources").joinpath("sample")) as path:
        yield Path(path)
