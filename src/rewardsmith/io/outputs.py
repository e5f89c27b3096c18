"""Single output files a user names (`score --out FILE`, `calibrate fit --out FILE`): never written over a file
the tool did not write.

Beside each such file the tool keeps a small record, `.<name>.rewardsmith.json`, holding the sha256 of the
bytes it wrote. An existing output is replaced only with `overwrite` and only when its bytes still match that
record (the tool wrote it and nobody changed it since); any other existing file is refused with one line, so a
model, a manifest or someone's data cannot be lost to a mistyped path.

The record is written before the output is renamed into place: it names the new bytes (`sha256`) and, until the
rename is done, the bytes they replace (`previous`, null for a new file). A kill at any moment so leaves the old
output or the complete new one, each recognised as the tool's, and a rerun (with --overwrite) replaces it.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rewardsmith.errors import RunFolderError
from rewardsmith.io.atomic import atomic_write_bytes, atomic_write_json
from rewardsmith.io.runfolder import file_sha256, not_yours_message, tool_version

RECORD_FORMAT = "rewardsmith.output/1"
# A real SIGKILL at one step of write_output (tests of a kill between the output and its record):
# "recorded" (the record names the new bytes, the old output still in place) or "replaced" (the new output in
# place, its record not yet final).
KILL_AT_ENV = "REWARDSMITH_FAULT_KILL_OUTPUT_AT"


def record_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.rewardsmith.json")


def _recorded_sha256(path: Path) -> set[str]:
    """The sha256s the tool's record accepts for `path`: the bytes it wrote, and while a write was under way the
    bytes that write replaces; empty when the tool never wrote `path`."""
    record = record_path(path)
    if not (path.is_file() and record.is_file()) or path.is_symlink():
        return set()
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return set()
    if not (isinstance(data, dict) and data.get("format") == RECORD_FORMAT and isinstance(data.get("sha256"), str)):
        return set()
    return {data["sha256"], *([data["previous"]] if isinstance(data.get("previous"), str) else [])}


def written_by_tool(path: Path) -> bool:
    """True when `path` holds exactly the bytes the tool last wrote there (its record matches)."""
    recorded = _recorded_sha256(path)
    return bool(recorded) and file_sha256(path) in recorded


def check_output(path: str | Path, overwrite: bool = False, option: str = "--out") -> Path:
    """The output path, checked before any work starts: a RunFolderError when it exists and may not be replaced.

    An existing file is replaced only with `overwrite` and only when the tool wrote it; a folder never."""
    path = Path(path)
    if path.is_dir():
        raise RunFolderError(f"{path}: is a folder; {option} names the file to write")
    if path.exists() or path.is_symlink():
        recorded = _recorded_sha256(path)
        if not recorded:
            raise RunFolderError(not_yours_message(path, option))
        if file_sha256(path) not in recorded:
            raise RunFolderError(
                f"{path}: changed since rewardsmith wrote it, so it is someone's now and left "
                f"alone: choose another {option}"
            )
        if not overwrite:
            raise RunFolderError(
                f"{path}: exists (written by an earlier rewardsmith run); pass --overwrite to "
                f"replace it, or choose another {option}"
            )
    return path


def write_output(
    path: str | Path, write: Callable[[IO[bytes]], Any], command: str, overwrite: bool = False, option: str = "--out"
) -> Path:
    """Writes a user-named output atomically (check_output first) and records its checksum beside it, the record
    first (see the module docstring)."""
    path = check_output(path, overwrite, option)
    previous = file_sha256(path) if path.is_file() else None  # the tool's own (check_output), or none

    def record(sha256: str, replaces: str | None) -> None:
        body = {"format": RECORD_FORMAT, "tool": "rewardsmith", "version": tool_version(), "command": command}
        atomic_write_json(record_path(path), {**body, "sha256": sha256, "previous": replaces})

    def record_before_rename(tmp: Path) -> None:
        record(file_sha256(tmp), previous)
        _fault("recorded")

    try:
        atomic_write_bytes(path, write, before_replace=record_before_rename)
        _fault("replaced")
        record(file_sha256(path), None)
    except OSError as exc:
        raise RunFolderError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return path


def _fault(step: str) -> None:
    if os.environ.get(KILL_AT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


FOLDER_RECORD = ".rewardsmith-output.json"


def _folder_checksums(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): file_sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != FOLDER_RECORD
    }


def check_output_folder(path: str | Path, overwrite: bool = False, option: str = "--out") -> Path:
    """A folder output (`export --out DIR`), checked before any work: missing or empty is fine; an existing one
    is replaced only with `overwrite` and only when every file in it is one the tool wrote there, unchanged."""
    path = Path(path)
    if not path.exists():
        return path
    if not path.is_dir() or path.is_symlink():
        raise RunFolderError(f"{path}: exists and is not a folder; {option} names the folder to write")
    if not any(path.iterdir()):
        return path
    record = path / FOLDER_RECORD
    try:
        data = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        data = None
    if not (isinstance(data, dict) and data.get("format") == RECORD_FORMAT and isinstance(data.get("files"), dict)):
        foreign = f"{path}: holds files rewardsmith did not write; they are left alone: choose another {option}"
        raise RunFolderError(not_yours_message(path, option, foreign=foreign))
    if _folder_checksums(path) != data["files"]:
        raise RunFolderError(
            f"{path}: changed since rewardsmith wrote it, so it is someone's now and left alone: "
            f"choose another {option}"
        )
    if not overwrite:
        raise RunFolderError(
            f"{path}: exists (written by an earlier rewardsmith run); pass --overwrite to replace it, "
            f"or choose another {option}"
        )
    return path


def write_output_folder(
    path: str | Path, write: Callable[[Path], Any], command: str, overwrite: bool = False, option: str = "--out"
) -> Path:
    """Writes a user-named folder atomically (check_output_folder first): write(temporary folder) fills it, a record
    of every file's checksum is added, and the folder is renamed into place."""
    from rewardsmith.io.atomic import atomic_folder

    path = check_output_folder(path, overwrite, option)
    try:
        with atomic_folder(path) as tmp:
            write(tmp)
            atomic_write_json(
                tmp / FOLDER_RECORD,
                {
                    "format": RECORD_FORMAT,
                    "tool": "rewardsmith",
                    "version": tool_version(),
                    "command": command,
                    "files": _folder_checksums(tmp),
                },
            )
    except OSError as exc:
        raise RunFolderError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return path
