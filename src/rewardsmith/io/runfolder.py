"""The run-folder contract every command follows.

- A manifest (manifest.json) is written first: tool version, command, the full resolved config, its hash,
  creation time, status and the files the tool wrote.
- An exclusive lock (.rewardsmith.lock, holding the owner's PID) is held while the run writes; a second
  process gets a one-line error naming that PID and changes nothing. The lock file is removed when the command
  ends (one left by a killed process is taken over: the kernel released its lock).
- A non-empty folder without a manifest is refused unless `overwrite`; even then no file the tool did not
  write is ever replaced or deleted (claiming such a path is an error).
- A folder with a manifest is resumed only when the resolved config matches (volatile keys such as progress
  bars aside); otherwise the error names the keys that differ. `overwrite` deletes the files the previous run
  wrote (only those) and starts again, also when the settings match.
- Deleting is guarded twice. A manifest entry is used only when it names a path inside the folder (relative,
  no "..", no symbolic link on the way): a manifest edited to name "../elsewhere" or "/home" deletes nothing.
  And a finished run records the sha256 of every file it wrote (`checksums`); a file whose bytes changed
  since, or that someone added inside one of the run's folders, is left where it is.
- What the run read is part of what it is: every config value that names a local file, or a model folder, is
  fingerprinted by its content (`inputs` in the manifest, io.digests), and a resume or a rerun of a finished run
  whose inputs changed since is refused like one with other settings (a training file edited in place, a model
  retrained in place), unless the command keeps per-input results of its own (`cached` keys) that it checks.
- Temporary files (".<name>.tmp.*", left by a kill during an atomic write) are removed on open.
- Several processes of one launch (`accelerate launch --num_processes N rewardsmith eval ...`) run one command
  on one folder: the main process opens and locks it as above; the others wait for it, then hold a read-only
  view (`main` False) that reads the folder but writes, claims and locks nothing, so the run is written once.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any

from rewardsmith.errors import RunFolderError
from rewardsmith.io.atomic import atomic_write_json, atomic_write_text
from rewardsmith.io.digests import file_digest, folder_digest
from rewardsmith.io.jsonsafe import json_ready
from rewardsmith.io.processes import agree, processes

MANIFEST = "manifest.json"
LOCK = ".rewardsmith.lock"
FORMAT = "rewardsmith.run/1"

# (old flat config, new flat config) -> dotted keys that differ in a way that forbids resuming.
Compare = Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]]


def tool_version() -> str:
    from rewardsmith import __version__

    return __version__


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
    """Dotted keys whose values differ between two flat configs, volatile keys excluded. A key absent from the old
    config and null in the new one is no difference: a setting added since, left off (folders written before it
    still resume)."""
    skip = set(volatile)
    keys = sorted((set(old) | set(new)) - skip)
    return [
        k
        for k in keys
        if old.get(k, "<absent>") != new.get(k, "<absent>") and not (k not in old and new.get(k) is None)
    ]


# A folder is fingerprinted as an input when it holds one of these (a model of any kind rewardsmith reads); other
# folders (a data directory) are not: their files are named by the config when they matter.
_MODEL_MARKERS = ("rewardsmith.json", "config.json", "ensemble.json", "adapter_config.json")


def _is_model_folder(path: Path) -> bool:
    return any((path / m).is_file() for m in _MODEL_MARKERS) or any(path.glob("*.safetensors"))


def input_digests(config: Mapping[str, Any], skip: Iterable[str] = ()) -> dict[str, str]:
    """dotted key (key[i] for a list's item) -> content digest of every config value naming a local file or model
    folder, keys in `skip` aside."""
    skipped = set(skip)
    out: dict[str, str] = {}
    for key, value in flatten(json_ready(config)).items():
        if key in skipped:
            continue
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for k, item in items:
            if not isinstance(item, str) or not item or len(item) > 4096:
                continue
            try:
                path = Path(item).expanduser()
                if path.is_file():
                    digest = file_digest(path)[:16]
                elif path.is_dir() and _is_model_folder(path):
                    digest = folder_digest(path)
                else:
                    continue
            except (OSError, ValueError):
                continue
            out[key if k is None else f"{key}[{k}]"] = digest
    return out


def _input_path(flat: Mapping[str, Any], key: str) -> Any:
    """The path a dotted input key (key[i] for a list's item) names in a flat config."""
    base, _, index = key.partition("[")
    value = flat.get(base)
    return value[int(index.rstrip("]"))] if index and isinstance(value, list) else value


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _describe(key: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    def short(v: Any) -> str:
        text = json.dumps(v) if v != "<absent>" else "absent"
        return text if len(text) <= 40 else text[:37] + "..."

    return f"{key}: {short(old.get(key, '<absent>'))} -> {short(new.get(key, '<absent>'))}"


def _lock(path: Path) -> int:
    """A descriptor of path/LOCK, exclusively locked by this process, with nothing written yet. RunFolderError
    naming the holder's PID when another process holds it. A lock file its holder removed as it closed (after this
    process opened the file, before it locked it) is not the folder's lock any more: then the new one is locked."""
    while True:
        try:
            fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RunFolderError(f"{path}: cannot write here ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunFolderError(
                f"{path}: in use by another rewardsmith process (PID {holder}); wait for it to "
                "finish or choose another --out"
            ) from None
        try:
            if os.stat(path / LOCK).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _is_temp(name: str) -> bool:
    return name.startswith(".") and ".tmp." in name


class RunFolder:
    """An open run folder, locked by this process. Use as a context manager, or call close().

    resumed: the folder held an earlier run of the same command and config (work already done is reused).
    complete: that earlier run had finished.
    main: this process writes the run (False: a non-main process of a launch, whose writes are skipped; see
    the module docstring).
    """

    def __init__(
        self, path: Path, command: str, manifest: dict[str, Any], lock_fd: int | None, resumed: bool, main: bool = True
    ):
        self.path = path
        self.command = command
        self.manifest = manifest
        self._lock_fd: int | None = lock_fd
        self.resumed = resumed
        self.complete = resumed and manifest.get("status") == "complete"
        self.main = main

    # -- opening ----------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path,
        command: str,
        config: Mapping[str, Any],
        *,
        overwrite: bool = False,
        volatile: Iterable[str] = (),
        compare: Compare | None = None,
        cached: Iterable[str] = (),
    ) -> RunFolder:
        """Opens (creating) `path` for `command` with the resolved `config` (a JSON-ready mapping).

        volatile: dotted config keys that may change between a run and its resume (progress bars, ...).
        compare: replaces the default "every non-volatile key equal" resume check.
        cached: keys naming inputs whose results the command keeps and checks itself (one saved result per model),
        so a change in their content is no reason to refuse the run (volatile keys are not checked either).
        Under a launcher of several processes every process calls this; only the main one opens the folder.
        """
        procs = processes()
        volatile = tuple(volatile)
        inputs = input_digests(config, (*volatile, *cached)) if procs.main else {}
        if not procs.several:
            return cls._open_locked(path, command, config, overwrite, volatile, compare, inputs)
        opened: RunFolder | None = None
        try:
            if procs.main:
                opened = cls._open_locked(path, command, config, overwrite, volatile, compare, inputs)
        finally:
            # 0: the main process could not open it (its error is raised there); 1: a new run; 2: resumed.
            outcome = agree(0 if opened is None else 1 + opened.resumed, procs)
        if opened is not None:
            return opened
        if outcome == 0:
            raise RunFolderError(
                f"{path}: the main process of this launch could not open the run folder (its error names why)"
            )
        try:
            manifest = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            raise RunFolderError(f"{Path(path) / MANIFEST}: unreadable run manifest; choose another --out") from None
        return cls(Path(path), command, manifest, None, outcome == 2, main=False)

    @classmethod
    def _open_locked(
        cls,
        path: str | Path,
        command: str,
        config: Mapping[str, Any],
        overwrite: bool,
        volatile: Iterable[str],
        compare: Compare | None,
        inputs: Mapping[str, str],
    ) -> RunFolder:
        path = Path(path)
        volatile = tuple(volatile)
        config = json_ready(config)
        manifest_path = path / MANIFEST
        if path.exists() and not path.is_dir():
            raise RunFolderError(f"{path}: exists and is not a folder")
        if (
            path.is_dir()
            and not manifest_path.exists()
            and not overwrite
            and any(not _is_temp(p.name) and p.name != LOCK for p in path.iterdir())
        ):
            raise RunFolderError(
                f"{path}: folder is not empty and holds no rewardsmith run; choose another --out "
                "(or pass --overwrite to write beside its files, which are never replaced)"
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunFolderError(f"{path}: cannot write here ({exc.strerror or exc})") from None
        fd = _lock(path)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            folder = cls._start(path, command, config, fd, overwrite, volatile, compare, inputs)
        except BaseException:
            # A refused run leaves the folder as it found it: the lock file goes while still held (as close() does).
            with contextlib.suppress(OSError):
                (path / LOCK).unlink()
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            raise
        return folder

    @classmethod
    def _start(
        cls,
        path: Path,
        command: str,
        config: Mapping[str, Any],
        fd: int,
        overwrite: bool,
        volatile: tuple[str, ...],
        compare: Compare | None,
        inputs: Mapping[str, str],
    ) -> RunFolder:
        manifest_path = path / MANIFEST
        old: dict[str, Any] | None = None
        if manifest_path.exists():
            try:
                old = json.loads(manifest_path.read_text(encoding="utf-8"))
                if not isinstance(old, dict) or old.get("format") != FORMAT:
                    raise ValueError
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise RunFolderError(f"{manifest_path}: unreadable run manifest; choose another --out") from None
        resumed = False
        if old is not None:
            if old.get("command") != command:
                raise RunFolderError(
                    f"{path}: holds a `{old.get('command')}` run, not `{command}`; choose another --out"
                )
            old_flat, new_flat = flatten(old.get("config", {})), flatten(config)
            diff = compare(old_flat, new_flat) if compare is not None else differing_keys(old_flat, new_flat, volatile)
            old_inputs = old.get("inputs")
            changed = (
                [k for k in sorted(set(old_inputs) & set(inputs)) if old_inputs[k] != inputs[k]]
                if isinstance(old_inputs, dict)
                else []  # a manifest written before inputs were recorded: nothing to compare
            )
            if overwrite:
                cls._remove_owned(path, old.get("files", []), old.get("checksums") or {})
            elif changed and not diff:
                shown = "; ".join(
                    f"{k} ({_input_path(new_flat, k)}): content {old_inputs[k]} -> {inputs[k]}"  # type: ignore[index]
                    for k in changed[:3]
                )
                raise RunFolderError(
                    f"{path}: holds a run made from other inputs ({shown}): they changed since; use --overwrite to run "
                    "it again on them, or another --out"
                )
            elif not diff:
                resumed = True
            else:
                shown = "; ".join(_describe(k, old_flat, new_flat) for k in diff[:4])
                more = f" and {len(diff) - 4} more" if len(diff) > 4 else ""
                raise RunFolderError(
                    f"{path}: holds a run with other settings ({shown}{more}); use the same "
                    "settings to resume, another --out, or --overwrite to start it again"
                )
        for stale in path.rglob(".*.tmp.*"):
            if stale.is_symlink() or inside_path(path, stale.relative_to(path).as_posix()) is None:
                continue  # the tool writes no links: a link with a temporary name is someone else's
            with contextlib.suppress(OSError):
                shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        # A resumed run may rewrite its files: the checksums of the finished run are recorded again when it ends.
        manifest = {
            "format": FORMAT,
            "tool": "rewardsmith",
            "version": tool_version(),
            "command": command,
            "config": config,
            "config_hash": config_hash(config, volatile),
            "inputs": dict(inputs),
            "created": old["created"] if resumed and old else _now(),
            "updated": _now(),
            "status": old.get("status", "running") if resumed and old else "running",
            "files": (
                sorted({f for f in old.get("files", []) if isinstance(f, str)} | {MANIFEST, LOCK})
                if resumed and old
                else [MANIFEST, LOCK]
            ),
        }
        if resumed and old and old.get("status") == "complete" and isinstance(old.get("checksums"), dict):
            manifest["checksums"] = old["checksums"]
        folder = cls(path, command, manifest, fd, resumed)
        folder._write_manifest()
        return folder

    @staticmethod
    def _remove_owned(path: Path, files: Iterable[Any], checksums: Mapping[str, Any]) -> None:
        """Deletes the earlier run's files: only entries inside the folder (inside_path), and only files whose
        bytes still match the checksum the run recorded when it finished (when it did)."""
        for name in files:
            if not isinstance(name, str) or name in (MANIFEST, LOCK):
                continue
            target = inside_path(path, name)
            if target is None:
                continue
            if target.is_dir() and not target.is_symlink():
                for file in _walk_files(target):
                    _remove_if_unchanged(path, file, checksums)
                _remove_empty_dirs(target)
            elif target.is_file() and not target.is_symlink():
                _remove_if_unchanged(path, target, checksums)

    # -- ownership --------------------------------------------------------------------------------------
    def owns(self, name: str) -> bool:
        if inside_path(self.path, name) is None:
            return False
        parts = Path(name).parts
        owned = set(self.manifest["files"])
        return any("/".join(parts[:k]) in owned for k in range(1, len(parts) + 1))

    def claim(self, name: str) -> Path:
        """The path `name` inside the folder, registered as the tool's. Refuses a path that exists and was
        not written by the tool (it is never replaced), and a path through a symbolic link."""
        link = _link_on_the_way(self.path, name) if inside_path(self.path, name.split("/")[0]) else None
        if link is not None:
            raise _link_error(link, self.path)
        if inside_path(self.path, name) is None:
            raise RunFolderError(f"{self.path / name}: not a path inside the run folder {self.path}")
        target = self.path / name
        if self.main and not self.owns(name):
            if target.exists() or target.is_symlink():
                # Not `parents`: this run folder holds the path, yet did not write it.
                raise RunFolderError(not_yours_message(target, "--out", parents=False))
            self.manifest["files"] = sorted({*self.manifest["files"], Path(name).as_posix()})
            self._write_manifest()
        return target

    def open_append(self, name: str) -> Any:
        """`name` (claimed) opened for appending text, never through a symbolic link (O_NOFOLLOW: a link put in its
        place since the claim is refused by the system, not followed out of the folder)."""
        target = self.claim(name)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            raise RunFolderError(f"{target}: cannot append ({exc.strerror or exc})") from None
        return os.fdopen(fd, "a", encoding="utf-8")

    def read_text(self, name: str) -> str | None:
        """The text of a file the run wrote, or None when it has none; a symbolic link in its place is refused
        (RunFolderError), never read through."""
        if not self.owns(name):
            return None
        target = self.path / name
        link = _link_on_the_way(self.path, name)
        if link is not None:
            raise RunFolderError(
                f"{link}: a symbolic link inside the run folder {self.path}; the tool reads no links there: remove "
                "it, or choose another --out"
            )
        return target.read_text(encoding="utf-8") if target.is_file() else None

    def write_json(self, name: str, value: Any) -> Path:
        """Writes `name` (claimed) atomically; a non-main process of a launch writes nothing."""
        target = self.claim(name)
        return atomic_write_json(target, value) if self.main else target

    def write_text(self, name: str, text: str) -> Path:
        """Writes `name` (claimed) atomically; a non-main process of a launch writes nothing."""
        target = self.claim(name)
        return atomic_write_text(target, text) if self.main else target

    # -- status -----------------------------------------------------------------------------------------
    def mark_complete(self, **facts: Any) -> None:
        """Records that the run finished (a rerun with the same config then finds it complete), with the sha256 of
        every file it wrote (what --overwrite may delete later)."""
        self.complete = True
        if not self.main:
            return
        self.manifest.update(
            {"status": "complete", "updated": _now(), "checksums": self._checksums(), **json_ready(facts)}
        )
        self._write_manifest()

    def _checksums(self) -> dict[str, str]:
        """relative path -> sha256 of every regular file under the entries the run owns."""
        out: dict[str, str] = {}
        for name in self.manifest["files"]:
            target = inside_path(self.path, name) if name not in (MANIFEST, LOCK) else None
            if target is None:
                continue
            found = _walk_files(target) if target.is_dir() and not target.is_symlink() else [target]
            for file in found:
                if file.is_file() and not file.is_symlink():
                    out[file.relative_to(self.path).as_posix()] = file_sha256(file)
        return out

    def _write_manifest(self) -> None:
        if (self.path / MANIFEST).is_symlink():  # replacing it would drop a link the tool did not write
            raise _link_error(self.path / MANIFEST, self.path)
        atomic_write_json(self.path / MANIFEST, self.manifest)

    def close(self) -> None:
        """Unlocks the folder, removing the lock file (while still holding it: a process that opens the name later
        creates a new one, and one that opened the old file first finds it gone once it holds it; see _lock)."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                (self.path / LOCK).unlink()
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------------------
# Folders the tool wrote

# The marker file of each kind of folder rewardsmith writes, and what the folder is called: a run folder's
# manifest, a model folder's rewardsmith.json (models.factory.META_FILE), a named output folder's record
# (io.outputs.FOLDER_RECORD). Each holds JSON whose "format" starts with "rewardsmith.".
_MARKERS = {MANIFEST: "run folder", "rewardsmith.json": "model folder", ".rewardsmith-output.json": "output folder"}


def rewardsmith_folder(path: str | Path, parents: bool = True) -> tuple[Path, str] | None:
    """The folder rewardsmith wrote that `path` is (or, with `parents`, lies in), and what it is ("the `train` run
    folder", "a rewardsmith model folder"); None when there is none. An output the tool will not write over may
    still be the tool's: the message that refuses it says whose it is, rather than "not written by rewardsmith"."""
    path = Path(path)
    for folder in [path, *path.parents] if parents else [path]:
        for marker, kind in _MARKERS.items():
            try:
                data = json.loads((folder / marker).read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError, RecursionError):
                continue
            if isinstance(data, dict) and str(data.get("format", "")).startswith("rewardsmith."):
                command = data.get("command")
                return folder, f"the `{command}` {kind}" if isinstance(command, str) else f"a rewardsmith {kind}"
    return None


def not_yours_message(path: Path, option: str, parents: bool = True, foreign: str | None = None) -> str:
    """The one line refusing to write `path` (an existing path the tool did not write as this output): whose it is
    when it is (or, with `parents`, lies in) a folder rewardsmith wrote, else `foreign` (default: that rewardsmith
    did not write it)."""
    found = rewardsmith_folder(path, parents)
    if found is None:
        theirs = f"{path}: exists and was not written by rewardsmith; it is left alone: choose another {option}"
        return foreign or theirs
    folder, kind = found
    where = f"is {kind}" if folder == path else f"is part of {kind} {folder}"
    return f"{path}: exists and {where}; it is left alone: choose another {option}"


# ----------------------------------------------------------------------------------------------------------
# Paths the tool may delete


def inside_path(root: Path, name: str) -> Path | None:
    """root / name when `name` is a relative path that stays inside `root`: no "..", not absolute, and no
    symbolic link on the way to it (a link is never followed out of the folder); None otherwise."""
    pure = PurePosixPath(name)
    if not name or pure.is_absolute() or "\\" in name or any(part in ("..", ".") for part in pure.parts):
        return None
    current = root
    for part in pure.parts[:-1]:
        current = current / part
        if current.is_symlink():
            return None
    target = root / pure
    real_root = os.path.realpath(root)
    if (
        not os.path.realpath(target.parent).startswith(real_root.rstrip(os.sep) + os.sep)
        and os.path.realpath(target.parent) != real_root
    ):
        return None
    return target


def _link_error(link: Path, root: Path) -> RunFolderError:
    return RunFolderError(
        f"{link}: a symbolic link inside the run folder {root}; the tool writes no links and follows none there: "
        "remove it, or choose another --out"
    )


def _link_on_the_way(root: Path, name: str) -> Path | None:
    """The first symbolic link on the way from `root` to root / name (the target itself included), or None."""
    current = root
    for part in PurePosixPath(name).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _walk_files(folder: Path) -> Iterator[Path]:
    """Regular files under `folder`, never following a symbolic link (links themselves are not listed)."""
    for parent, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(parent, d))]
        for name in names:
            file = Path(parent) / name
            if file.is_file() and not file.is_symlink():
                yield file


def _remove_if_unchanged(root: Path, file: Path, checksums: Mapping[str, Any]) -> None:
    """Deletes `file` unless the finished run recorded checksums and this file's bytes are not the ones it wrote
    (changed since, or added by someone else)."""
    if checksums and checksums.get(file.relative_to(root).as_posix()) != file_sha256(file):
        return
    with contextlib.suppress(FileNotFoundError):
        file.unlink()


def _remove_empty_dirs(folder: Path) -> None:
    """Removes `folder` and the folders under it that are left empty (bottom up)."""
    for parent, _, _ in sorted(os.walk(folder, followlinks=False), key=lambda entry: -len(entry[0])):
        if not os.path.islink(parent):
            with contextlib.suppress(OSError):
                os.rmdir(parent)
