"""Verifiable instructions attached to real prompts (IFEval's construction) and checked by a maintained verifier:
the IFEval checkers of the `if-verifiable` package (google-research's instruction classes, packaged).

Each prompt gets one or two instructions drawn (seeded by the prompt's id) from ATTACHABLE, without IFEval's
conflicting pairs; their wording is the checker's own description (`build_description` with the drawn arguments),
appended to the prompt's last user message. Arguments are drawn from ranges a short answer can meet (word counts
of 20 to 60, two to four bullets, ...): the policy answers in about a hundred tokens.

22 of IFEval's 25 checkers run offline as installed; the other three are left out, and refused in a prompts file:
`length_constraints:number_sentences` and `change_case:capital_word_frequency` need NLTK's punkt data (not shipped
with the package, and not downloadable here), and `combination:repeat_prompt` needs the prompt it repeats, which an
attached instruction does not have.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewardsmith.data.schema import Turn
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.rollouts.prompt import BonPrompt

NEEDS_NLTK_DATA = ("length_constraints:number_sentences", "change_case:capital_word_frequency")
NEEDS_ITS_PROMPT = ("combination:repeat_prompt",)
END_PHRASES = ("Is there anything else I can help with?", "Any other questions?", "Let me know if this helps.")
KEYWORDS = ("simple", "example", "important", "reason", "first", "because", "today", "people", "idea", "result")


def _none(_: random.Random) -> dict[str, Any]:
    return {}


# Instruction id -> its arguments, drawn from a seeded generator.
ATTACHABLE: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "punctuation:no_comma": _none,
    "change_case:english_lowercase": _none,
    "change_case:english_capital": _none,
    "startend:quotation": _none,
    "startend:end_checker": lambda r: {"end_phrase": r.choice(END_PHRASES)},
    "detectable_format:title": _none,
    "detectable_format:json_format": _none,
    "detectable_format:number_bullet_lists": lambda r: {"num_bullets": r.randint(2, 4)},
    "detectable_format:number_highlighted_sections": lambda r: {"num_highlights": r.randint(1, 3)},
    "detectable_content:postscript": lambda r: {"postscript_marker": r.choice(("P.S.", "P.P.S"))},
    "detectable_content:number_placeholders": lambda r: {"num_placeholders": r.randint(1, 2)},
    "length_constraints:number_words": lambda r: {
        "num_words": r.choice((20, 30, 40, 60)),
        "relation": r.choice(("less than", "at least")),
    },
    "keywords:existence": lambda r: {"keywords": r.sample(KEYWORDS, 2)},
    "keywords:forbidden_words": lambda r: {"forbidden_words": r.sample(KEYWORDS, 2)},
}


def registry() -> tuple[Mapping[str, Any], Mapping[str, set[str]]]:
    """(instruction id -> checker class, instruction id -> the ids it conflicts with) of if-verifiable's IFEval."""
    try:
        from if_verifiable.ifeval import instructions_registry
    except ImportError:  # pragma: no cover - a dependency; the message says how to get it
        raise ConfigError("the verifiable gold needs the `if-verifiable` package: pip install if-verifiable") from None
    return instructions_registry.INSTRUCTION_DICT, instructions_registry.INSTRUCTION_CONFLICTS


def describe(instruction_id: str, kwargs: Mapping[str, Any]) -> str:
    """The checker's own wording of an instruction with these arguments."""
    checkers, _ = registry()
    return str(checkers[instruction_id](instruction_id).build_description(**dict(kwargs)))


def attach_instructions(prompt: BonPrompt, seed: int, max_instructions: int = 2) -> BonPrompt:
    """`prompt` with 1 to max_instructions instructions appended to its last user message (drawn from a generator
    seeded by `seed` and the prompt's id) and recorded in meta["instructions"]."""
    _, conflicts = registry()
    rng = random.Random(f"{seed}:{prompt.id}")
    chosen: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, max_instructions)):
        taken = {c["id"] for c in chosen}
        allowed = [i for i in ATTACHABLE if i not in taken and not any(i in conflicts.get(t, ()) for t in taken)]
        if not allowed:
            break
        instruction = rng.choice(allowed)
        chosen.append({"id": instruction, "kwargs": ATTACHABLE[instruction](rng)})
    text = " ".join(describe(c["id"], c["kwargs"]) for c in chosen)
    last = prompt.turns[-1]
    turns = (*prompt.turns[:-1], Turn(last.role, f"{last.content.rstrip()}\n\n{text}"))
    return BonPrompt(prompt.id, turns, {**prompt.meta, "instructions": chosen})


def check_instructions(value: Any, where: str) -> list[dict[str, Any]]:
    """A prompts file's `instructions` field checked: a non-empty list of {"id": an IFEval instruction that runs
    offline, "kwargs": {...}}. DataError naming `where` otherwise."""
    checkers, _ = registry()
    if not isinstance(value, list) or not value:
        raise DataError(f"{where}: expected a non-empty list of {{id, kwargs}}")
    out = []
    for k, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            raise DataError(f"{where}[{k}]: expected an object with an instruction `id`")
        instruction = item["id"]
        if instruction in NEEDS_NLTK_DATA + NEEDS_ITS_PROMPT:
            why = (
                "needs NLTK's punkt data, not available offline"
                if instruction in NEEDS_NLTK_DATA
                else ("needs the prompt it repeats")
            )
            raise DataError(f"{where}[{k}]: instruction {instruction!r} is left out here: it {why}")
        if instruction not in checkers:
            raise DataError(
                f"{where}[{k}]: unknown instruction {instruction!r} (IFEval's ids, e.g. punctuation:no_comma)"
            )
        kwargs = item.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise DataError(f"{where}[{k}].kwargs: expected an object")
        try:
            describe(instruction, kwargs)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where}[{k}].kwargs: {instruction} refuses them ({exc})") from None
        out.append({"id": instruction, "kwargs": dict(kwargs)})
    return out


def fraction_followed(response: str, instructions: Sequence[Mapping[str, Any]], prompt_text: str) -> float:
    """The share of the instructions a response follows, strictly (IFEval's instruction-level strict accuracy, by
    if-verifiable's evaluate_instructions); 0 for an empty response."""
    from if_verifiable.common import evaluate_instructions

    checkers, _ = registry()
    _, scores = evaluate_instructions(
        response,
        [str(i["id"]) for i in instructions],
        [dict(i.get("kwargs") or {}) for i in instructions],
        prompt_text,
        dict(checkers),
    )
    return float(scores.partial_strict)
