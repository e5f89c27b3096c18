"""The run-folder contract every command follows.

- A manifest (manifest.json) is written first: tool version, command, the full resolved config, its hash,
  creation time, status and the files the tool wrote.
- An exclusive lock (.rewardsmith.lock, holding the owner's PID) is held while the run writes; a second
  process gets a one-line error naming that PID and changes nothing.
- A non-empty folder without a manifest is refused unless `overwrite`; even then no file the tool did not
  write is ever replaced or deleted (claiming such a path is an error).
- A folder with a manifest is resumed only when the resolved config matches (volatile keys such as progress
  bars aside); otherwise the error names the keys that differ. `overwrite` then deletes the files the
  previous run wrote (only those) and starts again.
- Temporary files (".<name>.tmp.*", left by a kill during an atomic write) are removed on open.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from rewardsmith.errors import RunFolderError
from rewardsmith.io.atomic import atomic_write_json, atomic_write_text
from rewardsmith.io.jsonsafe import json_ready

MANIFEST = "manifest.json"
LOCK = ".rewardsmith.lock"
FORMAT = "rewardsmith.run/1"

# (old flat config, new flat config) -> dotted keys that differ in a way that forbids resuming.
Compare = Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]]


def tool_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("rewardsmith")
    except metadata.PackageNotFoundError:
        return "unknown"


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"train": {"lr": 1}} -> {"train.lr": 1}; lists stay values."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of flatten: {"train.lr": 1} -> {"train": {"lr": 1}}."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def config_hash(config: Mapping[str, Any], volatile: Iterable[str] = ()) -> str:
    """sha256 of the canonical JSON of the config without its volatile keys (first 16 hex digits)."""
    skip = set(volatile)
    kept = {k: v for k, v in flatten(json_ready(config)).items() if k not in skip}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def differing_keys(old: Mapping[str, Any], new: Mapping[str, Any], volatile: Iterable[str] = ()) -> list[str]:
    """Dotted keys whose values differ between two flat configs, volatile keys excluded."""
    skip = set(volatile)
    keys = sorted((set(old) | set(new)) - skip)
    return [k for k in keys if old.get(k, "<absent>") != new.get(k, "<absent>")]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _describe(key: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    def short(v: Any) -> str:
        text = json.dumps(v) if v != "<absent>" else "absent"
        return text if len(text) <= 40 else text[:37] + "..."

    return f"{key}: {short(old.get(key, '<absent>'))} -> {short(new.get(key, '<absent>'))}"


def _is_temp(name: str) -> bool:
    return name.startswith(".") and ".tmp." in name


class RunFolder:
    """An open run folder, locked by this process. Use as a context manager, or call close().

    resumed: the folder held an earlier run of the same command and config (work already done is reused).
    complete: that earlier run had finished.
    """

    def __init__(self, path: Path, command: str, manifest: dict[str, Any], lock_fd: int, resumed: bool):
        self.path = path
        self.command = command
        self.manifest = manifest
        self._lock_fd: int | None = lock_fd
        self.resumed = resumed
        self.complete = resumed and manifest.get("status") == "complete"

    # -- opening ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, command: str, config: Mapping[str, Any], *, overwrite: bool = False,
             volatile: Iterable[str] = (), compare: Compare | None = None) -> RunFolder:
        """Opens (creating) `path` for `command` with the resolved `config` (a JSON-ready mapping).

        volatile: dotted config keys that may change between a run and its resume (progress bars, ...).
        compare: replaces the default "every non-volatile key equal" resume check.
        """
        path = Path(path)
        volatile = tuple(volatile)
        config = json_ready(config)
        manifest_path = path / MANIFEST
        if path.exists() and not path.is_dir():
            raise RunFolderError(f"{path}: exists and is not a folder")
        if (path.is_dir() and not manifest_path.exists() and not overwrite
                and any(not _is_temp(p.name) and p.name != LOCK for p in path.iterdir())):
            raise RunFolderError(f"{path}: folder is not empty and holds no rewardsmith run; choose another --out "
                                 "(or pass --overwrite to write beside its files, which are never replaced)")
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RunFolderError(f"{path}: cannot write here ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunFolderError(f"{path}: in use by another rewardsmith process (PID {holder}); wait for it to "
                                 "finish or choose another --out") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            folder = cls._start(path, command, config, fd, overwrite, volatile, compare)
        except BaseException:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            raise
        return folder

    @classmethod
    def _start(cls, path: Path, command: str, config: Mapping[str, Any], fd: int, overwrite: bool,
               volatile: tuple[str, ...], compare: Compare | None) -> RunFolder:
        manifest_path = path / MANIFEST
        old: dict[str, Any] | None = None
        if manifest_path.exists():
            try:
                old = json.loads(manifest_path.read_text(encoding="utf-8"))
                if not isinstance(old, dict) or old.get("format") != FORMAT:
                    raise ValueError
            except (ValueError, UnicodeDecodeError):
                raise RunFolderError(f"{manifest_path}: unreadable run manifest; choose another --out") from None
        resumed = False
        if old is not None:
            if old.get("command") != command:
                raise RunFolderError(f"{path}: holds a `{old.get('command')}` run, not `{command}`; choose another "
                                     "--out")
            old_flat, new_flat = flatten(old.get("config", {})), flatten(config)
            diff = (compare(old_flat, new_flat) if compare is not None
                    else differing_keys(old_flat, new_flat, volatile))
            if not diff:
                resumed = True
            elif not overwrite:
                shown = "; ".join(_describe(k, old_flat, new_flat) for k in diff[:4])
                more = f" and {len(diff) - 4} more" if len(diff) > 4 else ""
                raise RunFolderError(f"{path}: holds a run with other settings ({shown}{more}); use the same "
                                     "settings to resume, another --out, or --overwrite to start it again")
            else:
                cls._remove_owned(path, old.get("files", []))
        for stale in path.rglob(".*.tmp.*"):
            with contextlib.suppress(OSError):
                shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        manifest = {
            "format": FORMAT, "tool": "rewardsmith", "version": tool_version(), "command": command,
            "config": config, "config_hash": config_hash(config, volatile),
            "created": old["created"] if resumed and old else _now(), "updated": _now(),
            "status": old.get("status", "running") if resumed and old else "running",
            "files": sorted(set(old.get("files", [])) | {MANIFEST, LOCK}) if resumed and old else [MANIFEST, LOCK],
        }
        folder = cls(path, command, manifest, fd, resumed)
        folder._write_manifest()
        return folder

    @staticmethod
    def _remove_owned(path: Path, files: Iterable[str]) -> None:
        for name in files:
            if name in (MANIFEST, LOCK):
                continue
            target = path / name
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()

    # -- ownership --------------------------------------------------------------------------------------
    def owns(self, name: str) -> bool:
        parts = Path(name).parts
        owned = set(self.manifest["files"])
        return any("/".join(parts[:k]) in owned for k in range(1, len(parts) + 1))

    def claim(self, name: str) -> Path:
        """The path `name` inside the folder, registered as the tool's. Refuses a path that exists and was
        not written by the tool (it is never replaced)."""
        target = self.path / name
        if not self.owns(name):
            if target.exists() or target.is_symlink():
                raise RunFolderError(f"{target}: exists and was not written by rewardsmith; it is left alone: "
                                     "choose another --out")
            self.manifest["files"] = sorted({*self.manifest["files"], Path(name).as_posix()})
            self._write_manifest()
        return target

    def write_json(self, name: str, value: Any) -> Path:
        return atomic_write_json(self.claim(name), value)

    def write_text(self, name: str, text: str) -> Path:
        return atomic_write_text(self.claim(name), text)

    # -- status -----------------------------------------------------------------------------------------
    def mark_complete(self, **facts: Any) -> None:
        """Records that the run finished (a rerun with the same config then finds it complete)."""
        self.manifest.update({"status": "complete", "updated": _now(), **json_ready(facts)})
        self.complete = True
        self._write_manifest()

    def _write_manifest(self) -> None:
        atomic_write_json(self.path / MANIFEST, self.manifest)

    def close(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
