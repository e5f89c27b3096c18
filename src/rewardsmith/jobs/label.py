"""`rewardsmith label`: a gold reward model's preference labels for pairs, or for pairs of a policy's completions
(the synthetic-gold setup of METHODS.md section 5; relabelling preference data with a stronger reward model).

    rewardsmith label --gold runs/gold/model --input runs/pool/samples.jsonl --pairs-per-prompt 8 --out runs/labels

The gold scores every distinct (prompt, response) once through the one inference path (rewardsmith.inference: any
model `score` takes, an ensemble too), --chunk texts at a time, each chunk's rewards appended to rewards.jsonl as it
finishes, so a killed run resumes at the first chunk missing. Out: pairs.jsonl, which `train` reads (prompt as chat
messages, chosen = the gold's preferred response, rejected, label, and the gold's margin), and metrics.json (pairs
formed, ties dropped, noise flips). The gold's content fingerprint, the input's and the options are in the run
folder's manifest, so a rerun after any of them changed is refused in one line (or redone with --overwrite).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.config import to_dict
from rewardsmith.data.adapters.generic import iter_records
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.schema import Turn
from rewardsmith.errors import ConfigError, DataError, NonFiniteReward
from rewardsmith.inference import InferenceOptions, load_inference, texts_digest
from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.io.progress import Progress
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import JobResult, written_line
from rewardsmith.models.identity import model_fingerprint
from rewardsmith.rollouts.labels import LabelConfig, gold_labels, prompt_pairs
from rewardsmith.rollouts.sampling import kill_after, read_samples_file

COMMAND = "label"
REWARDS_FILE = "rewards.jsonl"
PAIRS_FILE = "pairs.jsonl"
KILL_AFTER_CHUNK_ENV = "REWARDSMITH_FAULT_KILL_AFTER_CHUNK"  # a real SIGKILL after this many chunks (tests)


def _is_completions(path: Path) -> bool:
    """Whether the file's first row holds `responses` (completions) rather than chosen / rejected (pairs)."""
    for _, record in iter_records(path):
        return isinstance(record, dict) and "responses" in record
    raise DataError("no rows to label", path)


def read_input(
    cfg: LabelConfig, path: Path
) -> tuple[list[tuple[tuple[Turn, ...], str]], list[tuple[int, int]], list[dict[str, Any]], str]:
    """The distinct texts to score, each pair as (text index, text index) and its record fields (prompt id, which
    responses), and the input's kind ("completions" or "pairs")."""
    texts: list[tuple[tuple[Turn, ...], str]] = []
    index: dict[tuple[tuple[Turn, ...], str], int] = {}

    def at(prompt: tuple[Turn, ...], response: str) -> int:
        key = (prompt, response)
        if key not in index:
            index[key] = len(texts)
            texts.append(key)
        return index[key]

    pairs: list[tuple[int, int]] = []
    records: list[dict[str, Any]] = []
    if _is_completions(path):
        prompts, responses = read_samples_file(path, None)
        for prompt, answers in zip(prompts, responses, strict=True):
            for i, j in prompt_pairs(len(answers), prompt.id, cfg.pairs_per_prompt, cfg.seed):
                pairs.append((at(prompt.turns, answers[i]), at(prompt.turns, answers[j])))
                records.append({"prompt_id": prompt.id, "responses": [i, j]})
        return texts, pairs, records, "completions"
    if cfg.pairs_per_prompt is not None:
        raise ConfigError(f"--pairs-per-prompt: {path} holds pairs, not completions (responses per prompt)")
    for k, pair in enumerate(load_dataset("file", path=path).pairs):
        pairs.append((at(pair.prompt, pair.chosen), at(pair.prompt, pair.rejected)))
        records.append({"pair_id": pair.pair_id or str(k)})
    return texts, pairs, records, "pairs"


def _score_chunks(
    folder: RunFolder, gold: Any, texts: list[tuple[tuple[Turn, ...], str]], chunk: int, progress: bool
) -> np.ndarray:
    """The gold's rewards (M,) of the texts: the chunks an earlier run of this folder saved, the rest scored now
    and appended, one line per chunk."""
    folder.claim(REWARDS_FILE)
    saved: list[list[float]] = []
    for line in jsonl_lines(folder.read_text(REWARDS_FILE) or ""):
        try:
            record = json.loads(line)
        except ValueError:
            break  # a line a kill cut: it and what follows are scored again
        if record.get("start") != len(saved) * chunk:
            break
        saved.append(record["rewards"])
    folder.write_text(
        REWARDS_FILE, "".join(json.dumps({"start": k * chunk, "rewards": r}) + "\n" for k, r in enumerate(saved))
    )
    chunks = (len(texts) + chunk - 1) // chunk
    with (
        Progress(
            "labelling", len(texts), enabled=progress, completed=min(len(saved) * chunk, len(texts)), unit="texts"
        ) as bar,
        folder.open_append(REWARDS_FILE) as handle,
    ):
        for k in range(len(saved), chunks):
            part = texts[k * chunk : (k + 1) * chunk]
            try:
                rewards = gold.score_texts(part).rewards
            except NonFiniteReward as bad:
                response = part[bad.position][1]
                raise DataError(
                    f"the gold's reward of a text is {bad.value}, not a finite number (response {response[:60]!r})"
                ) from None
            values = [float(r) for r in rewards]
            handle.write(json.dumps({"start": k * chunk, "rewards": values}) + "\n")
            handle.flush()
            saved.append(values)
            bar.update(min((k + 1) * chunk, len(texts)))
            kill_after(KILL_AFTER_CHUNK_ENV, k + 1)
    return np.array([r for chunk in saved for r in chunk], dtype=np.float64)


def _pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as bad:
        raise ConfigError(f"--spurious-pattern {text!r}: not a regular expression ({bad})") from None


def run_label(
    cfg: LabelConfig,
    out: str | Path,
    options: InferenceOptions | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> JobResult:
    """Labels the pairs of cfg.input with cfg.gold into the run folder `out` (see the module docstring)."""
    if cfg.gold is None or cfg.input is None:
        raise ConfigError("give --gold (the model that labels) and --input (pairs or completions)")
    if cfg.noise >= 0.5:
        raise ConfigError(f"--noise {cfg.noise:g}: at 0.5 every label is a coin flip; give a rate below 0.5")
    if (cfg.spurious is None) != (cfg.spurious_rate == 0):
        raise ConfigError("--spurious and --spurious-rate go together (a feature, and the share it decides)")
    if cfg.spurious_tail is not None and cfg.spurious not in ("longer", "shorter"):
        raise ConfigError("--spurious-tail needs --spurious longer or shorter (the length whose tail decides)")
    if (cfg.spurious == "matches") != (cfg.spurious_pattern is not None):
        raise ConfigError("--spurious matches and --spurious-pattern go together (the feature, and what it matches)")
    pattern = _pattern(cfg.spurious_pattern) if cfg.spurious_pattern is not None else None
    options = options or InferenceOptions()
    path = Path(cfg.input)
    if not path.is_file():
        raise DataError("input file not found", path)
    texts, pairs, records, kind = read_input(cfg, path)  # checked before anything is written
    if not pairs:
        raise DataError("no pairs to label (every prompt has fewer than two responses)", path)
    settings = {**to_dict(cfg), "scoring": options.key()}
    started = time.perf_counter()
    with RunFolder.open(out, COMMAND, settings, overwrite=overwrite, volatile=("chunk",)) as folder:
        gold = load_inference(cfg.gold, options)
        if gold.in_context:
            raise ConfigError(f"--gold {cfg.gold}: an in-context model needs demonstrations; label with a scalar model")
        rewards = _score_chunks(folder, gold, texts, cfg.chunk, progress)
        first = rewards[[a for a, _ in pairs]]
        second = rewards[[b for _, b in pairs]]
        lengths = (
            np.array([len(texts[a][1]) for a, _ in pairs]),
            np.array([len(texts[b][1]) for _, b in pairs]),
        )
        matches, matching = None, {}
        if pattern is not None:  # which distinct texts hold the phrase, read by pair
            found = np.array([pattern.search(text) is not None for _, text in texts])
            matches = (found[[a for a, _ in pairs]], found[[b for _, b in pairs]])
            matching = {"texts_matching": int(found.sum())}
        labels = gold_labels(
            first,
            second,
            cfg.soft,
            cfg.noise,
            cfg.seed,
            lengths,
            cfg.spurious,
            cfg.spurious_rate,
            cfg.spurious_tail,
            matches,
        )
        lines = []
        for k, keep in enumerate(labels.kept):
            a, b = pairs[keep]
            winner, loser = (a, b) if labels.first_preferred[k] else (b, a)
            if labels.swapped[k]:
                winner, loser = loser, winner
            prompt = texts[winner][0]
            lines.append(
                json.dumps(
                    {
                        "prompt": [{"role": t.role, "content": t.content} for t in prompt],
                        "chosen": texts[winner][1],
                        "rejected": texts[loser][1],
                        "label": float(labels.label[k]),
                        "gold_margin": float(labels.margin[k]),
                        "swapped": bool(labels.swapped[k]),
                        **(
                            {"spurious": bool(labels.spurious[k])}
                            if labels.spurious is not None and cfg.spurious
                            else {}
                        ),
                        **records[keep],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
        folder.write_text(PAIRS_FILE, "".join(lines))
        metrics = {
            "command": COMMAND,
            "input": str(path),
            "input_kind": kind,
            "gold": cfg.gold,
            "gold_fingerprint": model_fingerprint(cfg.gold),
            "texts": len(texts),
            "texts_digest": texts_digest(texts),
            "pairs_formed": len(pairs),
            "pairs_written": len(labels.kept),
            "ties_dropped": labels.ties,
            "swapped_by_noise": int(labels.swapped.sum()),
            "decided_by_spurious": int(labels.spurious.sum()) if labels.spurious is not None else 0,
            "spurious": cfg.spurious,
            "spurious_rate": cfg.spurious_rate,
            "spurious_tail": cfg.spurious_tail,
            "spurious_pattern": cfg.spurious_pattern,
            **matching,
            "soft": cfg.soft,
            "noise": cfg.noise,
            "margin_median": float(np.median(labels.margin)) if len(labels.margin) else None,
            "seconds": round(time.perf_counter() - started, 1),
        }
        folder.write_json("metrics.json", metrics)
        folder.mark_complete()
    summary = [
        f"read {path}: {kind}, {len(texts)} distinct texts, {len(pairs)} pairs formed",
        gold.describe(),
        f"dropped: ties {labels.ties}" + (f"; swapped by noise {metrics['swapped_by_noise']}" if cfg.noise else ""),
        written_line(folder.path, [PAIRS_FILE, REWARDS_FILE, "metrics.json"]),
    ]
    return JobResult(
        folder.path, f"{len(labels.kept)} labelled pairs -> {folder.path / PAIRS_FILE}", metrics, [], summary
    )
