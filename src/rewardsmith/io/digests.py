"""Content digests: what a file or folder holds, by its bytes, never by its name, size or time.

A saved result is reused only under the digests of everything that made it (a model's weights, a samples file, a
demonstrations file), so a file edited in place, a model retrained in place or a copy of a model under another
name is told apart or recognised by what it holds. Digests are cached in this process by (device, inode, size,
mtime, ctime): hashing a model's weights once per process, not once per use. A new process hashes again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

# Files that say nothing of a folder's content: the run lock and the temporary files of an atomic write.
_SKIPPED = (".rewardsmith.lock",)
_CACHE: dict[tuple[int, ...], str] = {}
_CACHE_MAX = 4096


def _skipped(name: str) -> bool:
    return name in _SKIPPED or (name.startswith(".") and ".tmp." in name)


def file_sha256(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digest(path: str | Path) -> str:
    """file_sha256, cached in this process while the file's inode, size and times are unchanged."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    found = _CACHE.get(key)
    if found is None:
        found = file_sha256(path)
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = found
    return found


def folder_files(folder: str | Path, keep: Callable[[str], bool] | None = None) -> list[Path]:
    """The regular files under `folder` (links followed as a loader would follow them), sorted by relative path,
    without the run lock and temporary files; `keep(relative path)` filters further."""
    root = Path(folder)
    out = []
    for parent, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(parent) / name
            rel = path.relative_to(root).as_posix()
            if _skipped(name) or not path.is_file() or (keep is not None and not keep(rel)):
                continue
            out.append(path)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def folder_digest(folder: str | Path, keep: Callable[[str], bool] | None = None, length: int = 16) -> str:
    """sha256 over (relative path, file_digest) of folder_files(folder, keep): two folders with the same files
    holding the same bytes have one digest wherever they lie."""
    root = Path(folder)
    entries = [[p.relative_to(root).as_posix(), file_digest(p)] for p in folder_files(root, keep)]
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:length]


def path_digest(path: str | Path, length: int = 16) -> str:
    """A file's digest (first `length` hex digits) or a folder's (folder_digest)."""
    p = Path(path)
    return folder_digest(p, length=length) if p.is_dir() else file_digest(p)[:length]
