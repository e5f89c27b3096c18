"""One prompt a policy answers (BonPrompt) and its stable id: the record prompts.py reads, instructions.py extends and
the golds score against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardsmith.data.schema import Turn, render_turns, stable_hash


@dataclass(frozen=True)
class BonPrompt:
    """One prompt: id (stable), the turns the policy answers, and what a gold needs (`instructions`: a list of
    {"id", "kwargs"}; `answer`: a reference answer)."""

    id: str
    turns: tuple[Turn, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def as_record(self) -> dict[str, Any]:
        """{id, prompt (chat messages), instructions?, answer?}: the line a prompts or --samples file holds (the
        meta's `source`, where the prompt was read, is left out: a file read back names itself)."""
        meta = {k: v for k, v in self.meta.items() if k != "source"}
        return {"id": self.id, "prompt": [{"role": t.role, "content": t.content} for t in self.turns], **meta}


def prompt_id(turns: Sequence[Turn]) -> str:
    """A stable id of a prompt's text."""
    return stable_hash(render_turns(tuple(turns)))[:16]
