"""Atomic checkpoints: written to a temporary file in the same folder, then renamed over the old one,
so a kill at any moment leaves either the previous or the new checkpoint, never a torn one."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from rewardsmith.errors import CheckpointError


def atomic_write_bytes(path: Path, write: Any) -> None:
    """Calls write(file_object) on a temp file next to `path`, fsyncs, then renames it onto `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_folder(out_dir: Path) -> Iterator[Path]:
    """Yields a temporary folder beside `out_dir`; on success it replaces `out_dir` by renames, on error
    it is removed. Readers see the old folder or the complete new one, never a half-written one."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        yield tmp
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out_dir, old)
            os.replace(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    atomic_write_bytes(path, lambda fh: torch.save(state, fh))


def load_checkpoint(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a corrupt or foreign file
        raise CheckpointError(f"{path}: cannot read checkpoint ({type(exc).__name__}: {exc})") from None
