"""Atomic writes: a file or folder is written under a temporary name beside its target, flushed, then renamed
over it, so a kill at any moment leaves the previous version or the complete new one, never a torn one.
Temporary names start with "." and carry ".tmp"; a failed write removes its temporary file."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from rewardsmith.io.jsonsafe import to_json


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.tmp."


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _ordinary_mode(path: str | Path, folder: bool = False) -> None:
    """mkstemp / mkdtemp create private entries (0600 / 0700); give them the mode a plain open() would."""
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


def _ordinary_modes(root: Path) -> None:
    """Every file and folder under `root` gets the mode a plain open() / mkdir() would give under the user's umask
    (an executable file keeps its execute bits): writers such as safetensors' save_file create their files private
    (0600), which would keep saved weights from the user's group where the umask shares everything else."""
    mask = _umask()
    for entry in root.rglob("*"):
        if entry.is_symlink():
            continue
        mode = entry.stat().st_mode
        wanted = (0o777 if entry.is_dir() or mode & 0o100 else 0o666) & ~mask
        if mode & 0o7777 != wanted:
            os.chmod(entry, wanted)


def atomic_write_bytes(
    path: str | Path, write: Callable[[IO[bytes]], Any], before_replace: Callable[[Path], Any] | None = None
) -> Path:
    """Calls write(binary file) on a temporary file beside `path`, fsyncs it and renames it onto `path`;
    before_replace(temporary file), when given, runs between the fsync and the rename (io.outputs records the
    checksum of the complete bytes there, so a kill at any moment leaves an output it recognises)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        _ordinary_mode(tmp)
        if before_replace is not None:
            before_replace(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Writes UTF-8 text atomically."""
    return atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


def atomic_write_json(path: str | Path, value: Any) -> Path:
    """Writes `value` as strict JSON (NaN as null, numpy as plain numbers) atomically."""
    return atomic_write_text(path, to_json(value))


@contextmanager
def atomic_folder(out_dir: str | Path) -> Iterator[Path]:
    """Yields a temporary folder beside `out_dir`; on success it replaces `out_dir` by renames, on error it
    is removed. Readers see the old folder or the complete new one, never a half-written one. The caller
    makes sure `out_dir`, when it exists, is the tool's own (see rewardsmith.io.runfolder). Its entries get the
    modes of the user's umask, whatever wrote them."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(out), dir=out.parent))
    _ordinary_mode(tmp, folder=True)
    try:
        yield tmp
        _ordinary_modes(tmp)
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
