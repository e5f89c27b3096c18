"""The records every benchmark suite shares: a row (a conversation and its candidate responses), the data of
one loaded suite, the note a suite whose release is absent leaves instead, and the scoring contract.

Rows keep the conversation as turns and the responses as plain strings: the caller's score function renders them
for its model (chat template, plain text or HH framing), so one row serves every model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from rewardsmith.data.schema import Turn

Prompt: TypeAlias = tuple[Turn, ...]
# One text to score: (the conversation so far, the response that follows it).
Text: TypeAlias = tuple[Prompt, str]
# The scoring contract: rewards (len(texts),) float64, one per text, in order.
ScoreFn: TypeAlias = Callable[[Sequence[Text]], NDArray[np.float64]]


@dataclass(frozen=True)
class BenchRow:
    """One benchmark item.

    row_id: unique within its suite (the release's own id where it has one); subset: the release's subset or set
    name; prompt: the conversation as turns; responses: the K candidate responses; fields: what the suite needs to
    score them (e.g. RewardBench 2's num_correct, PPE's correctness labels and conflict pairs).
    """

    row_id: str
    subset: str
    prompt: Prompt
    responses: tuple[str, ...]
    fields: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def texts(self) -> list[Text]:
        """The K (prompt, response) texts of the row, in response order."""
        return [(self.prompt, response) for response in self.responses]

    def lengths(self) -> NDArray[np.float64]:
        """Character lengths of the K responses, (K,) float64 (the length rule's rewards)."""
        return np.array([len(r) for r in self.responses], dtype=np.float64)


@dataclass
class SuiteData:
    """The rows of one loaded suite and an account of what was read.

    sources: files (or hub ids) read; read: rows read; dropped: rows not used, by reason; notes: one line each,
    e.g. a set of the suite whose files are absent.
    """

    suite: str
    rows: list[BenchRow]
    sources: list[str] = field(default_factory=list)
    read: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def drop(self, reason: str, count: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + count

    def summary(self) -> dict[str, Any]:
        """JSON-ready account: suite, sources, rows read, rows used, dropped by reason, notes, subsets."""
        subsets: dict[str, int] = {}
        for row in self.rows:
            subsets[row.subset] = subsets.get(row.subset, 0) + 1
        return {
            "suite": self.suite,
            "sources": list(self.sources),
            "read": int(self.read),
            "rows": len(self.rows),
            "dropped": dict(self.dropped),
            "notes": list(self.notes),
            "subsets": subsets,
        }


@dataclass(frozen=True)
class Missing:
    """A suite that cannot run because its release is absent: `message` says what to put where."""

    suite: str
    message: str
    expected: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"suite": self.suite, "message": self.message, "expected": self.expected}

    def __str__(self) -> str:
        return f"{self.suite}: {self.message}"
