"""A run folder's lock: held while a command writes (a second opener is refused, naming the holder's PID), and
gone when the command ends, so no .rewardsmith.lock is left in a folder (`rewardsmith examples --out examples`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rewardsmith.errors import RunFolderError
from rewardsmith.io.runfolder import LOCK, RunFolder


def test_the_lock_is_held_while_open_and_removed_on_close(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with RunFolder.open(out, "demo", {"a": 1}) as folder:
        assert (out / LOCK).read_text().strip() == str(os.getpid())
        with pytest.raises(RunFolderError, match=f"PID {os.getpid()}"):
            RunFolder.open(out, "demo", {"a": 1})
        folder.write_text("x.txt", "x")
        folder.mark_complete()
    assert not (out / LOCK).exists() and sorted(p.name for p in out.iterdir()) == ["manifest.json", "x.txt"]
    with RunFolder.open(out, "demo", {"a": 1}) as again:  # reopened: the run is found complete
        assert again.complete and (out / LOCK).exists()
    assert not (out / LOCK).exists()


def test_a_lock_file_removed_between_opening_and_locking_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that opened the old lock file before its holder removed it, then locked it, holds a file that is
    not the folder's lock any more: it locks the new one instead, and a third opener is refused."""
    import fcntl

    from rewardsmith.io import runfolder

    out = tmp_path / "run"
    out.mkdir()
    stale = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    os.unlink(out / LOCK)  # its holder removed it as it closed
    real_open = os.open
    opened: list[int] = []

    def open_the_removed_file_first(path, flags, mode=0o777):  # type: ignore[no-untyped-def]
        if str(path).endswith(LOCK) and not opened:
            opened.append(stale)
            return os.dup(stale)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", open_the_removed_file_first)
    fd = runfolder._lock(out)
    assert opened and os.fstat(fd).st_ino == os.stat(out / LOCK).st_ino != os.fstat(stale).st_ino
    with pytest.raises(RunFolderError, match="in use"):
        runfolder._lock(out)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    os.close(stale)
