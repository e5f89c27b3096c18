"""MATH-500 (the "Let's Verify Step by Step" test split of MATH): `math-500`.

The file (<data_dir>/math-500/test.jsonl: problem, solution, answer, subject, level, unique_id) has no
preference pairs, so pairs are built deterministically as (reference solution > corrupted solution):

- "final_answer": one number inside the last \\boxed{...} is perturbed; the reasoning is untouched and
  only the stated answer is wrong (problems whose boxed answer holds no digit, e.g. \\text{(C)}, get no
  pair of this kind: dropped as "no_number_in_answer").
- "wrong_step": one number inside a math span ($...$, $$...$$, \\[...\\], \\(...\\)) BEFORE the final
  \\boxed{} is perturbed, outside [asy] drawing code; the final answer is unchanged, so only a reader
  who checks the steps can tell (no such number: dropped as "no_intermediate_number").

A perturbation replaces a digit run n by n + d or n - d, d in 1..9 (never negative, never n itself); the
digit run and d are drawn from a generator seeded by unique_id and the corruption kind, so the pairs are
the same on every machine. A perturbed number occasionally is an index or a label rather than a value;
such pairs are rare and kept.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from rewardsmith.data.adapters._common import (
    PairCollector,
    check_split,
    data_file,
    iter_jsonl,
    require_text,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, user_prompt

CORRUPTIONS = ("final_answer", "wrong_step")
_DIGITS = re.compile(r"\d+")
_MATH_SPAN = re.compile(r"\$\$.*?\$\$|\$.*?\$|\\\[.*?\\\]|\\\(.*?\\\)", re.DOTALL)
_ASY = re.compile(r"\[asy\].*?\[/asy\]", re.DOTALL)


def last_boxed_span(text: str) -> tuple[int, int] | None:
    """(start, end) of the content of the last \\boxed{...} (braces matched), or None when absent."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    begin = start + len("\\boxed{")
    depth = 1
    for pos in range(begin, len(text)):
        if text[pos] == "{":
            depth += 1
        elif text[pos] == "}":
            depth -= 1
            if depth == 0:
                return begin, pos
    return None


def perturb_number(digits: str, rng: random.Random) -> str:
    """A different non-negative integer near `digits` (n +- d, d in 1..9)."""
    value = int(digits)
    delta = rng.randint(1, 9)
    if value - delta >= 0 and rng.random() < 0.5:
        return str(value - delta)
    return str(value + delta)


def _replace(text: str, match: re.Match[str], rng: random.Random) -> tuple[str, str, str]:
    new = perturb_number(match.group(), rng)
    return text[: match.start()] + new + text[match.end() :], match.group(), new


def corrupt_final_answer(solution: str, seed: str) -> tuple[str, dict[str, Any]] | None:
    """(solution with one number in the last \\boxed{} perturbed, details) or None when impossible."""
    span = last_boxed_span(solution)
    if span is None:
        return None
    numbers = list(_DIGITS.finditer(solution, span[0], span[1]))
    if not numbers:
        return None
    rng = random.Random(f"{seed}:final_answer")
    corrupted, old, new = _replace(solution, rng.choice(numbers), rng)
    span_after = last_boxed_span(corrupted)
    answer = corrupted[span_after[0] : span_after[1]] if span_after else ""
    return corrupted, {"changed": [old, new], "corrupted_answer": answer}


def corrupt_wrong_step(solution: str, seed: str) -> tuple[str, dict[str, Any]] | None:
    """(solution with one number in an earlier math span perturbed, details) or None when impossible."""
    span = last_boxed_span(solution)
    limit = solution.rfind("\\boxed{") if span else len(solution)
    masked = _ASY.sub(lambda m: " " * len(m.group()), solution)  # same offsets, no drawing code
    numbers = [
        number
        for math in _MATH_SPAN.finditer(masked)
        if math.start() < limit
        for number in _DIGITS.finditer(masked, math.start(), min(math.end(), limit))
    ]
    if not numbers:
        return None
    rng = random.Random(f"{seed}:wrong_step")
    match = rng.choice(numbers)
    corrupted, old, new = _replace(solution, match, rng)
    line = solution.count("\n", 0, match.start()) + 1
    return corrupted, {"changed": [old, new], "line": line}


_CORRUPTERS = {"final_answer": corrupt_final_answer, "wrong_step": corrupt_wrong_step}
_DROP_REASON = {"final_answer": "no_number_in_answer", "wrong_step": "no_intermediate_number"}


def math_pairs(
    record: Mapping[str, Any],
    domain: str,
    row_index: int,
    split: str,
) -> list[PreferencePair | str]:
    """Up to one pair per corruption kind for one problem; a drop reason string where a kind fails."""
    problem = require_text(record, "problem")
    solution = require_text(record, "solution")
    unique_id = str(record.get("unique_id") or row_index)
    out: list[PreferencePair | str] = []
    for kind in CORRUPTIONS:
        result = _CORRUPTERS[kind](solution, f"{unique_id}")
        if result is None or result[0] == solution:
            out.append(_DROP_REASON[kind])
            continue
        corrupted, details = result
        metadata = {
            "corruption": kind,
            "unique_id": unique_id,
            "subject": record.get("subject"),
            "level": record.get("level"),
            "answer": record.get("answer"),
            **details,
        }
        out.append(
            PreferencePair(
                prompt=user_prompt(problem),
                chosen=solution,
                rejected=corrupted,
                label=1.0,
                domain=domain,
                pair_id=f"{domain}:{split}:{row_index}:{kind}",
                metadata=metadata,
            )
        )
    return out


def load_math500(opts: LoadOptions) -> PairDataset:
    """PairDataset of (reference > corrupted) MATH-500 solutions, up to two pairs per problem (one per
    corruption kind, adjacent in the list); pair_id "math-500:<split>:<0-based row>:<kind>"."""
    name = "math-500"
    split = check_split(name, opts.split, ("test",), "test")
    path = data_file(opts, "math-500", f"{split}.jsonl")
    return PairCollector(name, path, opts).collect(
        iter_jsonl(path), lambda row_index, record: math_pairs(record, name, row_index, split)
    )
