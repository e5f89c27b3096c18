"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""

from __future__ import annotations

from pathlib import Path


def one_line(text: str, max_chars: int = 200) -> str:
    """Collapses whitespace so a message stays on one line, cut at `max_chars`."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= max_chars else flat[: max_chars - 3] + "..."


def first_line(exc: BaseException, with_type: bool = False) -> str:
    """The first line of an exception's message (its type name when it has none); with_type: "Type: line"."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    if not line:
        return type(exc).__name__
    return f"{type(exc).__name__}: {line}" if with_type else line


class RewardsmithError(Exception):
    """Base class: a problem with the user's input, config or environment (not a bug)."""


class ConfigError(RewardsmithError):
    """A config value or command-line option is invalid."""


class UnknownNameError(RewardsmithError):
    """A name (dataset, loss, backbone, method, ...) is not in its registry."""

    def __init__(self, family: str, name: str, known: list[str]):
        self.family, self.name, self.known = family, name, known
        super().__init__(f"unknown {family} {name!r}; known: {', '.join(sorted(known)) or '(none)'}")


class DataError(RewardsmithError):
    """A data file is missing or malformed. Names the file and, where known, the row and field."""

    def __init__(self, message: str, path: str | Path | None = None, row: int | None = None, field: str | None = None):
        self.path, self.row, self.field = path, row, field
        where = []
        if path is not None:
            where.append(str(path))
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class NonFiniteReward(RewardsmithError):
    """A model gave a text a reward that is not a finite number (NaN or an infinity), so no metric or choice built on
    it holds. position: the text's index in what was scored (a command maps it to its row, the server to the
    request's text); value: the reward; what: e.g. "reward", "confidence"."""

    def __init__(self, position: int, value: float, what: str = "reward", where: str | None = None):
        self.position, self.value, self.what = position, value, what
        place = where or f"text {position}"
        super().__init__(
            f"{place}: the model's {what} is {value} (not a finite number: NaN weights, or an output that overflowed)"
        )


class CheckpointError(RewardsmithError):
    """A checkpoint or saved model folder is missing or unreadable."""


class RunFolderError(RewardsmithError):
    """An output folder cannot be used: in use by another process, holding someone else's files, holding a
    run with other settings, or not writable."""
