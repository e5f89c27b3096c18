"""The prompts a policy answers in `rewardsmith bon`, with what a gold needs to score the answers.

`--prompts` names one source:

- `math-500`: the MATH-500 problems of the data directory (math-500/test.jsonl), each with its reference answer
  (for the `math` gold);
- `ifeval/<dataset>`: the prompts of any dataset rewardsmith reads, each with one or two verifiable instructions
  attached (rollouts/instructions.py; for the `ifeval` gold);
- any other dataset name rewardsmith reads (`rewardsmith datasets`): the prompt side of its pairs;
- a JSONL file, one prompt a line: {"prompt": text or chat messages, "id": optional, "instructions": optional
  [{"id": instruction id, "kwargs": {...}}], "answer": optional reference answer}.

A prompt is kept once (the same conversation in several pairs is one prompt); `limit` keeps that many, chosen by a
stable hash of their ids (the same ones on every machine and at any limit above).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardsmith.data.adapters._common import BadRow
from rewardsmith.data.adapters.generic import iter_records, parse_prompt
from rewardsmith.data.schema import Turn
from rewardsmith.data.splits import hash_fraction
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.rollouts.instructions import attach_instructions, check_instructions
from rewardsmith.rollouts.prompt import BonPrompt, prompt_id

MATH_500 = "math-500"
IFEVAL_PREFIX = "ifeval/"
ORDER_SALT = "bon-prompts"


def choose(prompts: Sequence[BonPrompt], limit: int | None) -> list[BonPrompt]:
    """Each prompt once (by id, the first kept), then at most `limit` of them by a stable hash of the id, in that
    order."""
    seen: dict[str, BonPrompt] = {}
    for p in prompts:
        seen.setdefault(p.id, p)
    ordered = sorted(seen.values(), key=lambda p: hash_fraction(p.id, ORDER_SALT))
    return ordered if limit is None else ordered[:limit]


def _math_500(data_dir: Path | None) -> list[BonPrompt]:
    from rewardsmith.data.sources import dataset_file

    path = dataset_file(data_dir, "math-500", "test.jsonl")
    out = []
    for row_no, record in iter_records(path):
        if not isinstance(record, Mapping) or not isinstance(record.get("problem"), str):
            raise DataError("expected an object with a `problem` string", path, row_no, "problem")
        answer = record.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise DataError("expected a non-empty `answer` string", path, row_no, "answer")
        turns = (Turn("user", record["problem"]),)
        pid = str(record.get("unique_id") or prompt_id(turns))
        out.append(BonPrompt(pid, turns, {"answer": answer, "source": MATH_500}))
    return out


def _dataset_prompts(name: str, data_dir: Path | None) -> list[BonPrompt]:
    from rewardsmith.data.registry import load_dataset

    pairs = load_dataset(name, data_dir=data_dir, on_bad_row="skip").pairs
    return [BonPrompt(prompt_id(p.prompt), p.prompt, {"source": name}) for p in pairs if p.prompt]


def read_prompt_record(record: Any, path: Path, row_no: int) -> BonPrompt:
    """One line of a prompts (or samples) file as a BonPrompt; DataError naming the file, row and field."""
    if isinstance(record, BadRow):  # a line that is not JSON, read as such by iter_records
        raise DataError(record.message.replace("invalid JSON", "not valid JSON"), path, row_no)
    if not isinstance(record, Mapping) or "prompt" not in record:
        raise DataError("expected an object with a `prompt` (text or chat messages)", path, row_no, "prompt")
    try:
        turns = parse_prompt(record["prompt"], "prompt")
    except BadRow as bad:
        raise DataError(bad.message, path, row_no, bad.field or "prompt") from None
    if not turns or turns[-1].role != "user":
        raise DataError("the prompt must end with a user message", path, row_no, "prompt")
    meta: dict[str, Any] = {"source": str(path)}
    instructions = record.get("instructions")
    if instructions is not None:
        meta["instructions"] = check_instructions(instructions, f"{path}, row {row_no}, field 'instructions'")
    answer = record.get("answer")
    if answer is not None:
        if not isinstance(answer, str) or not answer.strip():
            raise DataError("expected a non-empty string", path, row_no, "answer")
        meta["answer"] = answer
    raw_id = record.get("id")
    if raw_id is not None and not isinstance(raw_id, str | int):
        raise DataError("expected a string or an integer", path, row_no, "id")
    return BonPrompt(str(raw_id) if raw_id is not None else prompt_id(turns), turns, meta)


def _file_prompts(path: Path) -> list[BonPrompt]:
    return [read_prompt_record(record, path, row_no) for row_no, record in iter_records(path)]


def load_prompts(
    source: str, data_dir: str | Path | None = None, limit: int | None = None, seed: int = 0
) -> list[BonPrompt]:
    """The prompts of `source` (see the module docstring), each once, at most `limit` of them. seed: how the
    instructions of an `ifeval/` source are drawn. ConfigError / DataError with one line when there are none."""
    root = Path(data_dir) if data_dir else None
    path = Path(source).expanduser()
    if source == MATH_500:
        prompts = _math_500(root)
    elif source.startswith(IFEVAL_PREFIX):
        base = choose(_dataset_prompts(source[len(IFEVAL_PREFIX) :], root), limit)
        prompts = [attach_instructions(p, seed) for p in base]
    elif path.suffix in (".jsonl", ".json") or path.exists():
        if not path.is_file():
            raise DataError("prompts file not found", path)
        prompts = _file_prompts(path)
    else:
        prompts = _dataset_prompts(source, root)
    chosen = choose(prompts, limit)
    if not chosen:
        raise ConfigError(f"--prompts {source}: no prompts to answer")
    return chosen


def prompts_jsonl(prompts: Sequence[BonPrompt]) -> str:
    """The prompts as JSONL, one {id, prompt, instructions?, answer?} a line (what a prompts file holds, and what a
    --samples file made elsewhere can start from)."""
    return "".join(json.dumps(p.as_record(), ensure_ascii=False) + "\n" for p in prompts)
