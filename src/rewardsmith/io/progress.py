"""Progress of long work that reads well both in a terminal and in a log file.

In a terminal (stderr is a TTY) a rich bar is redrawn in place; otherwise one plain line is printed each time
another `every_percent` of the work is done (and at the end), with elapsed and remaining time, so a log
written by `make demo > log` shows the run advancing. Progress goes to stderr; results go to stdout.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO


def _minutes(seconds: float) -> str:
    if seconds < 1:
        return "<1 s"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class Progress:
    """`with Progress("train", total) as p: p.update(done, "loss 0.61")`. Disabled: does nothing."""

    def __init__(
        self,
        description: str,
        total: int,
        *,
        enabled: bool = True,
        completed: int = 0,
        every_percent: float = 5.0,
        unit: str = "",
        stream: TextIO | None = None,
    ):
        self.description = description
        self.total = max(int(total), 0)
        self.enabled = enabled and self.total > 0
        self.start_completed = completed
        self.every = every_percent
        self.unit = f" {unit}" if unit else ""
        self.stream = stream if stream is not None else sys.stderr
        self._rich: Any = None
        self._task: Any = None
        self._t0 = 0.0
        self._next_mark = 0.0
        self._last = completed
        self._last_print = 0.0
        self.min_interval = 2.0  # seconds between log lines, so a fast loop does not flood the log

    def __enter__(self) -> Progress:
        if not self.enabled:
            return self
        self._t0 = time.perf_counter()
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._rich.__enter__()
            self._task = self._rich.add_task(self.description, total=self.total, completed=self.start_completed)
        else:
            done_pct = 100.0 * self.start_completed / self.total
            self._next_mark = (int(done_pct // self.every) + 1) * self.every
            start = f" (resumed at {self.start_completed}/{self.total})" if self.start_completed else ""
            self._print(f"{self.description}: started, {self.total}{self.unit}{start}")
        return self

    def update(self, completed: int, note: str = "") -> None:
        if not self.enabled:
            return
        self._last = completed
        if self._rich is not None:
            text = f"{self.description} {note}".strip()
            self._rich.update(self._task, completed=completed, description=text)
            return
        pct = 100.0 * completed / self.total
        now = time.perf_counter()
        if completed < self.total and (pct + 1e-9 < self._next_mark or now - self._last_print < self.min_interval):
            return
        self._last_print = now
        while self._next_mark <= pct + 1e-9:
            self._next_mark += self.every
        elapsed = time.perf_counter() - self._t0
        rate_done = completed - self.start_completed
        left = elapsed / rate_done * (self.total - completed) if rate_done > 0 else float("nan")
        tail = f", ~{_minutes(left)} left" if completed < self.total and left == left else ""
        self._print(
            f"{self.description}: {pct:3.0f}% ({completed}/{self.total}{self.unit}){' ' + note if note else ''}"
            f", {_minutes(elapsed)} elapsed{tail}"
        )

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._rich is not None:
            self._rich.__exit__(exc_type, exc, tb)
            self._rich = None
