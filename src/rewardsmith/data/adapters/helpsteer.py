"""HelpSteer2 (arXiv:2406.08673) and HelpSteer3-Preference (arXiv:2505.11475): `helpsteer2`, `helpsteer3`.

helpsteer2: <data_dir>/helpsteer2/val.parquet (the HF validation split, split name "validation"), one row
per rated response; rows 2i and 2i+1 are the two responses to one prompt. The response with the higher
`helpfulness` is chosen (the HelpSteer2 paper's pairwise convention); equal helpfulness is dropped ("tie").
Multi-turn prompts arrive flattened in one user message with "<extra_id_1>User" / "<extra_id_1>Assistant"
lines before each later turn; they are split back into alternating user/assistant turns. A prompt whose
markers do not parse into alternating turns ending with the user is kept whole as one user turn.

helpsteer3: the preference subset of HF nvidia/HelpSteer3, read from <data_dir>/helpsteer3/ (jsonl,
jsonl.gz or parquet; see HELPSTEER3_CANDIDATES). Rows: `domain`, `language`, `context` (list of
{role, content}), `response1`, `response2`, `overall_preference` in -3..3 (negative: response1 is better,
0: tie, positive: response2 is better) and `individual_preference` (list of {score, reasoning, ...}).
Ties are dropped ("tie"); |overall_preference| is kept as metadata["preference_strength"].
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rewardsmith.data.adapters._common import (
    BadRow,
    PairCollector,
    chat_turns,
    check_split,
    data_file,
    iter_jsonl,
    iter_parquet,
    require_int,
    require_text,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, Role, Turn
from rewardsmith.data.sources import resolve_data_dir
from rewardsmith.errors import DataError

HELPSTEER2_ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
HELPSTEER2_FILES = {"validation": "val.parquet"}
_EXTRA_ID_TURN = re.compile(r"\n?<extra_id_1>(User|Assistant)\n?")


def split_extra_id_turns(text: str) -> tuple[Turn, ...]:
    """Turns of a HelpSteer2 prompt: "u1\\n<extra_id_1>Assistant\\na1\\n<extra_id_1>User\\nu2" ->
    (user u1, assistant a1, user u2). Falls back to one user turn holding `text` when the markers do not
    give alternating turns that start and end with the user."""
    parts = _EXTRA_ID_TURN.split(text)
    if len(parts) == 1:
        return (Turn("user", text.strip()),)
    turns: list[Turn] = [Turn("user", parts[0].strip())]
    for marker, content in zip(parts[1::2], parts[2::2], strict=True):
        role: Role = "user" if marker == "User" else "assistant"
        turns.append(Turn(role, content.strip()))
    alternating = all(t.role == ("user" if i % 2 == 0 else "assistant") for i, t in enumerate(turns))
    if not alternating or turns[-1].role != "user" or any(not t.content for t in turns):
        return (Turn("user", text.strip()),)
    return tuple(turns)


def _helpsteer2_prompt(record: Mapping[str, Any]) -> tuple[str, tuple[Turn, ...]]:
    """(raw prompt text used to check the two rows belong together, parsed turns)."""
    prompt = record.get("prompt")
    if isinstance(prompt, str):
        text = prompt
    else:
        turns = chat_turns(prompt, "prompt")
        if len(turns) != 1 or turns[0].role != "user":
            return "\n".join(t.content for t in turns), turns
        text = turns[0].content
    if not text.strip():
        raise BadRow("empty text", "prompt")
    return text, split_extra_id_turns(text)


def _scores(record: Mapping[str, Any]) -> dict[str, int]:
    return {attr: require_int(record, attr, range(5)) for attr in HELPSTEER2_ATTRIBUTES}


def load_helpsteer2(opts: LoadOptions) -> PairDataset:
    """PairDataset of HelpSteer2 pairs (373 strict pairs in the validation split).

    pair_id "helpsteer2:<split>:<prompt index>"; metadata: chosen_scores / rejected_scores (the five
    0-4 attributes), helpfulness_margin, rows (the two 1-based rows in the file).
    """
    name = "helpsteer2"
    split = check_split(name, opts.split, tuple(HELPSTEER2_FILES), "validation")
    path = data_file(opts, "helpsteer2", HELPSTEER2_FILES[split])
    out = PairCollector(name, path, opts)
    rows = iter_parquet(path, columns=["prompt", "response", *HELPSTEER2_ATTRIBUTES])
    for prompt_index, ((row_a, first), second) in enumerate(_pairs_of(rows)):
        if out.full():
            break
        out.row_read(1 if second is None else 2)
        try:
            if second is None:
                raise BadRow("odd number of rows: the last response has no partner", "prompt")
            row_b, record_b = second
            text_a, turns = _helpsteer2_prompt(first)
            text_b, _ = _helpsteer2_prompt(record_b)
            if text_a != text_b:
                raise BadRow(f"rows {row_a} and {row_b} should share a prompt but do not", "prompt")
            responses = (require_text(first, "response"), require_text(record_b, "response"))
            scores = (_scores(first), _scores(record_b))
        except BadRow as bad:
            out.bad_row(bad.message, row_a if second is None else second[0], bad.field)
            continue
        margin = scores[0]["helpfulness"] - scores[1]["helpfulness"]
        if margin == 0:
            out.drop("tie")
            continue
        if responses[0] == responses[1]:
            out.drop("identical")
            continue
        c = 0 if margin > 0 else 1
        out.add(
            PreferencePair(
                prompt=turns,
                chosen=responses[c],
                rejected=responses[1 - c],
                label=1.0,
                domain=name,
                pair_id=f"{name}:{split}:{prompt_index}",
                metadata={
                    "chosen_scores": scores[c],
                    "rejected_scores": scores[1 - c],
                    "helpfulness_margin": abs(margin),
                    "rows": [row_a, row_a + 1],
                },
            )
        )
    return out.dataset


def _pairs_of(
    rows: Iterator[tuple[int, dict[str, Any]]],
) -> Iterator[tuple[tuple[int, dict[str, Any]], tuple[int, dict[str, Any]] | None]]:
    """Consecutive (row 2i, row 2i+1) groups; the second is None for a trailing odd row."""
    for first in rows:
        yield first, next(rows, None)


# ------------------------------------------------------------------------------------------ HelpSteer3

HELPSTEER3_SPLITS = ("train", "validation")
# Looked for in this order under <data_dir>/helpsteer3/; {split} is the split name. The first layout is the
# HF repository's own (preference/train.jsonl.gz); the last is the HF parquet conversion's folder.
HELPSTEER3_CANDIDATES = (
    "preference/{split}.jsonl.gz",
    "preference/{split}.jsonl",
    "preference/{split}.parquet",
    "{split}.jsonl.gz",
    "{split}.jsonl",
    "{split}.parquet",
    "preference/{split}/*.parquet",
)


def helpsteer3_files(data_dir: Path, split: str) -> list[Path]:
    """The file(s) holding one HelpSteer3 preference split; DataError listing the places looked at."""
    root = data_dir / "helpsteer3"
    for pattern in HELPSTEER3_CANDIDATES:
        relative = pattern.format(split=split)
        if "*" in relative:
            found = sorted(root.glob(relative))
            if found:
                return found
        elif (root / relative).is_file():
            return [root / relative]
    raise DataError(
        f"no HelpSteer3 {split!r} file; looked for "
        f"{', '.join(p.format(split=split) for p in HELPSTEER3_CANDIDATES)} "
        "(download the preference subset of nvidia/HelpSteer3 there)",
        path=root,
    )


def helpsteer3_pair(record: Mapping[str, Any], domain: str, pair_id: str) -> PreferencePair | None:
    """PreferencePair of one HelpSteer3 row, or None for a tie (overall_preference == 0).

    metadata: task_domain, language, overall_preference, preference_strength (1-3),
    chosen_response (1 or 2), individual_scores (each annotator's -3..3 score).
    """
    turns = chat_turns(record.get("context"), "context")
    responses = (require_text(record, "response1"), require_text(record, "response2"))
    preference = require_int(record, "overall_preference", range(-3, 4))
    if preference == 0:
        return None
    chosen_index = 0 if preference < 0 else 1  # negative: response1 is better
    individual = record.get("individual_preference") or []
    scores = [int(x["score"]) for x in individual if isinstance(x, Mapping) and isinstance(x.get("score"), int | float)]
    return PreferencePair(
        prompt=turns,
        chosen=responses[chosen_index],
        rejected=responses[1 - chosen_index],
        label=1.0,
        domain=domain,
        pair_id=pair_id,
        metadata={
            "task_domain": record.get("domain"),
            "language": record.get("language"),
            "overall_preference": preference,
            "preference_strength": abs(preference),
            "chosen_response": chosen_index + 1,
            "individual_scores": scores,
        },
    )


def load_helpsteer3(opts: LoadOptions) -> PairDataset:
    """PairDataset of HelpSteer3-Preference; pair_id "helpsteer3:<split>:<0-based row>"."""
    name = "helpsteer3"
    split = check_split(name, opts.split, HELPSTEER3_SPLITS, "validation")
    files = helpsteer3_files(resolve_data_dir(opts.data_dir), split)
    out = PairCollector(name, files[0] if len(files) == 1 else files[0].parent, opts)

    def convert(index: int, record: Mapping[str, Any]) -> PreferencePair | str:
        pair = helpsteer3_pair(record, name, f"{name}:{split}:{index}")
        if pair is None:
            return "tie"
        return "identical" if pair.chosen == pair.rejected else pair

    for path in files:
        reader = iter_parquet(path) if path.suffix == ".parquet" else iter_jsonl(path)
        out.collect(reader, convert, path=path, expected="an object")
        if out.full():
            break
    return out.dataset
