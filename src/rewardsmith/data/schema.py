"""The one preference-pair record every adapter produces and every collator consumes."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str


@dataclass(frozen=True)
class PreferencePair:
    """A prompt (the conversation so far, as turns) with a preferred and a dispreferred response.

    `label` is P(chosen is preferred): 1.0 for gold labels, a teacher's soft probability for weak labels.
    `domain` names the source (the registry name of the dataset); `metadata` keeps dataset-specific fields
    (for example RM-Bench style variants or PKU severity levels).
    """

    prompt: tuple[Turn, ...]
    chosen: str
    rejected: str
    label: float = 1.0
    domain: str = ""
    pair_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def prompt_text(self) -> str:
        """The prompt in HH-RLHF framing: "\\n\\nHuman: ...\\n\\nAssistant: ...\\n\\nAssistant:"."""
        return render_turns(self.prompt)

    def first_user_turn(self) -> str:
        for turn in self.prompt:
            if turn.role == "user":
                return turn.content
        return ""

    def group_key(self) -> str:
        """Key that keeps one conversation on one side of a split (hash of the first human turn)."""
        return stable_hash(self.first_user_turn().strip().lower())

    def conversation_key(self) -> str:
        """Key that finds one conversation again in another set: the first human turn reduced to its lowercase
        letters and digits, so a repeat with other punctuation or spacing matches (stricter than group_key, which
        stays the split's hash input so committed splits do not move)."""
        return "".join(ch for ch in self.first_user_turn().lower() if ch.isalnum())

    def with_label(self, label: float) -> PreferencePair:
        return PreferencePair(
            self.prompt, self.chosen, self.rejected, float(label), self.domain, self.pair_id, dict(self.metadata)
        )

    def swapped(self) -> PreferencePair:
        """The same pair with sides exchanged: label becomes 1 - label."""
        return PreferencePair(
            self.prompt, self.rejected, self.chosen, 1.0 - self.label, self.domain, self.pair_id, dict(self.metadata)
        )


_ROLE_TAG = {"user": "Human", "assistant": "Assistant", "system": "System"}


def render_turns(turns: tuple[Turn, ...] | list[Turn]) -> str:
    """HH framing of a conversation, ending with the cue for the assistant's next turn."""
    parts = [f"\n\n{_ROLE_TAG[t.role]}: {t.content}" for t in turns]
    return "".join(parts) + "\n\nAssistant:"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitise_text(text: str) -> tuple[str, int]:
    """`text` with every unpaired UTF-16 surrogate (a code point U+D800..U+DFFF, which JSON escapes such as
    "\\ud800" can produce and no encoder can write) replaced by U+FFFD, and how many were replaced."""
    fixed, count = _LONE_SURROGATE.subn("\ufffd", text)
    return fixed, count


def sanitise_pair(pair: PreferencePair) -> tuple[PreferencePair, int]:
    """The pair with every text sanitised (sanitise_text), and the number of characters replaced."""
    total = 0
    turns = []
    for turn in pair.prompt:
        content, n = sanitise_text(turn.content)
        total += n
        turns.append(Turn(turn.role, content))
    chosen, n_chosen = sanitise_text(pair.chosen)
    rejected, n_rejected = sanitise_text(pair.rejected)
    total += n_chosen + n_rejected
    if not total:
        return pair, 0
    return PreferencePair(
        tuple(turns), chosen, rejected, pair.label, pair.domain, pair.pair_id, dict(pair.metadata)
    ), total


def message_text(message: Any) -> str:
    """Plain text of a TRL prompt or completion: a string, or a list of {role, content} messages (the last
    message's content)."""
    if isinstance(message, str):
        return message
    if isinstance(message, list) and message:
        last = message[-1]
        return str(last.get("content", "")) if isinstance(last, dict) else str(last)
    return str(message)


def user_prompt(text: str) -> tuple[Turn, ...]:
    return (Turn("user", text),)


def stable_hash(text: str) -> str:
    """A hash that is the same on every machine and Python run (unlike hash())."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()
