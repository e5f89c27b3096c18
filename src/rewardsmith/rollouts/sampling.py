"""A policy's samples in a run folder: n completions per prompt, seeded per (prompt, index), appended to
samples.jsonl as each prompt finishes, so a killed run resumes at the first prompt missing. One line per prompt in
the --samples shape ({id, prompt, instructions?, answer?, responses, tokens, cut}), so the file is what `bon
--samples` and `label --input` read; the facts of the sampling (policy, tokens, cuts, seconds) go to sampling.json
once the last prompt is done. `rewardsmith sample` is this alone; `rewardsmith bon --policy` samples through it.

A finished folder asked for a larger n is extended, not redone: sample k of a prompt depends only on (seed, prompt
id, k), so the first n of a larger run are the smaller run's completions. Their lines are kept in
samples.earlier.jsonl until every prompt has its new completions appended (a kill mid-way resumes from there).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.config import MAX_SEED, option, volatile_keys
from rewardsmith.data.adapters.generic import iter_records
from rewardsmith.data.schema import sanitise_text
from rewardsmith.errors import CheckpointError, DataError
from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.io.progress import Progress
from rewardsmith.io.runfolder import RunFolder, differing_keys
from rewardsmith.rollouts.prompt import BonPrompt
from rewardsmith.rollouts.prompts import read_prompt_record

SAMPLES_FILE = "samples.jsonl"
SAMPLING_FILE = "sampling.json"
EARLIER_FILE = "samples.earlier.jsonl"
SAMPLER_FILE = "sampler.json"
# A real SIGKILL after this many prompts are sampled (tests of resume).
KILL_AFTER_PROMPT_ENV = "REWARDSMITH_FAULT_KILL_AFTER_PROMPT"


@dataclass
class SampleConfig:
    """What a policy samples, and how."""

    policy: str | None = option(
        None,
        "the policy that samples: `smollm2` (SmolLM2-135M-Instruct, embedded: a Q4_1 GGUF dequantised to fp32) or a "
        "local causal LM folder",
    )
    prompts: str | None = option(
        None,
        "what the policy answers: math-500 | ifeval/<dataset> (a dataset's prompts with verifiable instructions "
        "attached) | a dataset name | a JSONL file of {prompt, instructions?, answer?}",
    )
    prompts_limit: int | None = option(None, "answer at most this many prompts (a stable hash picks them)", min=1)
    n: int = option(16, "completions per prompt (best-of-n: the largest n)", min=2, max=256)
    temperature: float = option(1.0, "sampling temperature", min=0.0, min_exclusive=True)
    top_p: float = option(
        1.0,
        "nucleus sampling: keep the smallest set of tokens of this total probability",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )
    max_new_tokens: int = option(96, "longest completion, in tokens (a longer one is cut and counted)", min=1)
    seed: int = option(
        0, "seed of every sample (with the prompt and the sample's index) and of the bootstrap", min=0, max=MAX_SEED
    )
    sample_batch_size: int = option(
        16, "completions sampled per forward pass (one prompt's at a time)", min=1, volatile=True
    )
    data_dir: str | None = option(
        None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)", volatile=True
    )


def kill_after(env: str, done: int) -> None:
    """A real SIGKILL of this process when $env names `done` (tests of resume)."""
    at = os.environ.get(env)
    if at is not None and done == int(at):
        os.kill(os.getpid(), signal.SIGKILL)


def read_samples_file(path: Path, n: int | None) -> tuple[list[BonPrompt], list[list[str]]]:
    """A samples file: {prompt, responses: [text, ...]} per line (+ id / instructions / answer), the first n
    responses of each (n None: all, at least two). DataError naming the file, row and field for a line of another
    shape or with fewer than n responses, or a prompt id seen twice."""
    if not path.is_file():
        raise DataError("samples file not found", path)
    prompts: list[BonPrompt] = []
    responses: list[list[str]] = []
    for row_no, record in iter_records(path):
        prompt = read_prompt_record(record, path, row_no)
        answers = record.get("responses")
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise DataError("expected a list of response strings", path, row_no, "responses")
        if len(answers) < (n or 2):
            wanted = f"n = {n} (--n)" if n else "two, to make a pair"
            raise DataError(f"{len(answers)} responses, fewer than {wanted}", path, row_no, "responses")
        prompts.append(prompt)
        responses.append([sanitise_text(a)[0] for a in (answers[:n] if n else answers)])
    if not prompts:
        raise DataError("no lines: nothing to choose from", path)
    ids = [p.id for p in prompts]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"prompt {dup!r} appears twice (one line per prompt, its responses together)", path)
    return prompts, responses


def sample_compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Resume check of a sampling run: every setting equal (volatile ones aside), except that n may grow."""
    diff = differing_keys(old, new, volatile_keys(SampleConfig))
    if diff == ["n"] and isinstance(old.get("n"), int) and isinstance(new.get("n"), int) and new["n"] > old["n"]:
        return []
    return diff


def _leading_records(
    text: str | None, prompts: Sequence[BonPrompt], counts: Callable[[int], bool]
) -> list[tuple[str, dict[str, Any]]]:
    """(line, record) of a samples file's first lines, in prompt order, while each parses, answers its prompt and
    holds a number of responses `counts` accepts (a line cut by a kill, and everything after it, ends the walk)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for line in jsonl_lines(text or ""):
        try:
            record = json.loads(line)
        except ValueError:
            break
        k = len(out)
        if k >= len(prompts) or not isinstance(record, dict) or record.get("id") != prompts[k].id:
            break
        if not counts(len(record.get("responses", []))):
            break
        out.append((line, record))
    return out


def _earlier(folder: RunFolder, text: str | None, prompts: Sequence[BonPrompt], n: int) -> dict[str, dict[str, Any]]:
    """prompt id -> the line of an earlier, smaller-n run of this folder (its completions are the first of this
    run's): read from samples.earlier.jsonl, or moved there from samples.jsonl before that file is rewritten."""
    kept = folder.read_text(EARLIER_FILE)
    if not kept:  # none, or emptied when the last extension finished
        lines = []
        for line, record in _leading_records(text, prompts, lambda count: 0 < count < n):
            if len(record.get("tokens", [])) != len(record["responses"]):
                break
            lines.append(line + "\n")
        if not lines:
            return {}
        kept = "".join(lines)
        folder.write_text(EARLIER_FILE, kept)
    return {r["id"]: r for r in (json.loads(x) for x in jsonl_lines(kept))}


def _sampled_so_far(text: str | None, prompts: Sequence[BonPrompt], n: int) -> list[dict[str, Any]]:
    """The complete lines of an earlier run's samples.jsonl that answer the first prompts in order (a line cut by a
    kill, and everything after it, is dropped)."""
    return [record for _, record in _leading_records(text, prompts, lambda count: count == n)]


def drawn_by(folder: Path) -> int:
    """The sampler (rollouts/policy.py: SAMPLER) that drew a sampling folder's completions, as its sampler.json
    records it; a folder without one was drawn by sampler 1."""
    record = folder / SAMPLER_FILE
    return int(json.loads(record.read_text(encoding="utf-8"))["sampler"]) if record.is_file() else 1


def _same_sampler(folder: RunFolder, drawn: bool, sampler: int) -> None:
    """Records the sampler that draws this folder's completions; when some are already drawn (a resume or an
    extension), refuses in one line if another sampler drew them (a folder without the record was drawn by
    sampler 1), since the rest would not be the completions one uninterrupted run gives."""
    before = drawn_by(folder.path)
    if drawn and before != sampler:
        raise CheckpointError(
            f"{folder.path}: its completions were drawn by sampler {before}, this rewardsmith draws with sampler "
            f"{sampler} (rollouts/policy.py), so the rest would not match them; sample into a new folder, or "
            "--overwrite"
        )
    folder.write_json(SAMPLER_FILE, {"sampler": sampler})


def sample_into(
    cfg: SampleConfig, folder: RunFolder, prompts: Sequence[BonPrompt], progress: bool
) -> tuple[list[list[str]], dict[str, Any]]:
    """Every prompt's cfg.n completions, sampled (or read back from an earlier run of this folder) into
    samples.jsonl, and the sampling's facts (module docstring)."""
    from rewardsmith.rollouts.policy import SAMPLER, load_policy, sample_prompt

    assert cfg.policy is not None
    folder.claim(SAMPLES_FILE)
    folder.claim(SAMPLER_FILE)
    text = folder.read_text(SAMPLES_FILE)
    earlier = _earlier(folder, text, prompts, cfg.n)
    records = _sampled_so_far(text, prompts, cfg.n)
    # The lines an earlier run finished stay; a line a kill cut, and anything after it, goes.
    folder.write_text(SAMPLES_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    saved = folder.read_text(SAMPLING_FILE)
    if len(records) == len(prompts) and saved is not None:
        return [list(r["responses"]) for r in records], json.loads(saved)
    _same_sampler(folder, bool(records or earlier), SAMPLER)
    facts: dict[str, Any] = {
        "policy": cfg.policy,
        "sampler": SAMPLER,
        "resumed_at_prompt": len(records),
        "seconds": 0.0,
    }
    if earlier:
        facts["extended_from_n"] = min(len(r["responses"]) for r in earlier.values())
    if len(records) < len(prompts):
        policy = load_policy(cfg.policy)
        facts["policy"] = policy.source
        start = time.perf_counter()
        with (
            Progress("sampling", len(prompts), enabled=progress, completed=len(records), unit="prompts") as bar,
            folder.open_append(SAMPLES_FILE) as handle,
        ):
            for k in range(len(records), len(prompts)):
                before = earlier.get(prompts[k].id, {})
                first = len(before.get("responses", []))
                completions = sample_prompt(
                    policy,
                    prompts[k],
                    cfg.n,
                    seed=cfg.seed,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    max_new_tokens=cfg.max_new_tokens,
                    batch_size=cfg.sample_batch_size,
                    first=first,
                )
                record = {
                    **prompts[k].as_record(),
                    "responses": [*before.get("responses", []), *(c.text for c in completions)],
                    "tokens": [*before.get("tokens", []), *(c.tokens for c in completions)],
                    "cut": [*before.get("cut", [False] * first), *(c.cut for c in completions)],
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
                records.append(record)
                bar.update(k + 1)
                kill_after(KILL_AFTER_PROMPT_ENV, k + 1)
        facts["seconds"] = round(time.perf_counter() - start, 1)
    if earlier:  # every prompt holds its earlier completions again, in samples.jsonl
        folder.write_text(EARLIER_FILE, "")
    facts["sampled_tokens"] = int(sum(sum(r.get("tokens", [])) for r in records))
    facts["cut"] = int(sum(sum(bool(c) for c in r.get("cut", [])) for r in records))
    folder.write_json(SAMPLING_FILE, facts)
    return [list(r["responses"]) for r in records], facts
