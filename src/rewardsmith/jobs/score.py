"""`rewardsmith score`: rewards for every row of a JSONL file, from a scalar reward model or an in-context model
steered by demonstrations, optionally mapped to one rater's scale.

Rows hold `prompt` and `response` (one text) or `prompt`, `chosen` and `rejected` (a pair). A prompt is read
as the `file` dataset reads it (plain user text, an HH transcript, or a chat list), so a file scores the same
through `score` and through `eval --dataset file`. The output is the input with reward fields added, written
atomically; model loading and scoring time are reported apart.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.data.adapters._common import BadRow, iter_jsonl
from rewardsmith.data.adapters.generic import parse_score_record
from rewardsmith.data.collate import EncodedText, PairEncoder
from rewardsmith.data.schema import PreferencePair, sanitise_pair
from rewardsmith.errors import ConfigError, DataError, RunFolderError
from rewardsmith.evaluate.scoring import default_device, score_encoded
from rewardsmith.io.atomic import atomic_write_text
from rewardsmith.jobs.common import JobResult
from rewardsmith.models.factory import load_model
from rewardsmith.stats import sigmoid


def read_score_rows(path: Path) -> tuple[list[dict[str, Any]], list[PreferencePair], int]:
    """The rows of a scoring file, one PreferencePair per row (a single response sits on both sides) and the
    number of rows whose text had unpaired UTF-16 surrogates replaced (by U+FFFD)."""
    if not path.is_file():
        raise DataError("file not found", path=path)
    rows: list[dict[str, Any]] = []
    pairs: list[PreferencePair] = []
    repaired = 0
    for row_no, record in iter_jsonl(path):
        try:
            if isinstance(record, BadRow):
                raise record
            pair, _ = parse_score_record(record)
        except BadRow as bad:
            raise DataError(bad.message, path=path, row=row_no, field=bad.field) from None
        pair, replaced = sanitise_pair(pair)
        repaired += bool(replaced)
        rows.append(record)
        pairs.append(pair)
    if not rows:
        raise DataError("no rows to score", path=path)
    return rows, pairs, repaired


def _single(row: dict[str, Any]) -> bool:
    return "response" in row and "chosen" not in row


def _score_rows(model: Any, tokenizer: Any, rows: list[dict[str, Any]], pairs: list[PreferencePair],
                max_length: int, min_prompt_tokens: int, batch_size: int, bf16: bool,
                progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rewards of each row's chosen (N,) and rejected (N,) side; a one-response row is scored once (its value
    fills both sides)."""
    encoder = PairEncoder(tokenizer, max_length, min_prompt_tokens)
    texts: list[EncodedText] = []
    first: list[int] = []
    second: list[int] = []
    for row, pair in zip(rows, pairs, strict=True):
        prompt = pair.prompt_text()
        first.append(len(texts))
        texts.append(encoder.encode(prompt, pair.chosen))
        if not _single(row):
            texts.append(encoder.encode(prompt, pair.rejected))
        second.append(len(texts) - 1)
    scores = score_encoded(model, texts, int(tokenizer.pad_token_id), batch_size, bf16,
                           progress="score" if progress else None)
    return scores[first], scores[second]


def score_file(model_dir: str | Path, input_file: str | Path, output: str | Path, calibration: str | Path | None = None,
               rater: str | None = None, demos: str | Path | None = None, bf16: bool | None = None,
               batch_size: int = 64, progress: bool = True) -> JobResult:
    """Adds rewards to every row of `input_file` and writes `output` atomically.

    calibration + rater: rewards mapped to that rater's scale by the fitted per-rater map (p_chosen stays on
    the model's own scale). demos: demonstrations steering an in-context model. bf16: None = as trained.
    """
    if (calibration is None) != (rater is None):
        raise ConfigError("--calibration and --rater go together")
    output = Path(output)
    input_path = Path(input_file)
    if output.resolve() == input_path.resolve():
        raise ConfigError(f"{output}: the output would overwrite the input; choose another --output")
    rows, pairs, repaired = read_score_rows(input_path)
    maps = None
    if calibration is not None:
        from rewardsmith.calibrate.maps import load_maps

        maps = load_maps(calibration)
    t0 = time.perf_counter()
    model, tokenizer, meta = load_model(model_dir)
    model.to(default_device())
    load_seconds = time.perf_counter() - t0
    use_bf16 = bool(meta.get("bf16", False)) if bf16 is None else bf16
    mc = meta["model_config"]
    t1 = time.perf_counter()
    extra: dict[str, np.ndarray] = {}
    if meta["model_type"] == "icrm":
        from rewardsmith.icrm.scoring import ICRMScorer, read_demos

        scorer = ICRMScorer(model, tokenizer, mc.max_length, mc.min_prompt_tokens, batch_size, use_bf16)
        steered = scorer.score_pairs(pairs, read_demos(demos) if demos is not None else [])
        chosen, rejected = steered.u_chosen, steered.u_rejected
        extra = {"p_chosen": steered.mu, "confidence_chosen": steered.s_chosen,
                 "confidence_rejected": steered.s_rejected}
    else:
        if demos is not None:
            raise ConfigError(f"{model_dir}: a scalar reward model takes no --demos (only an in-context model does)")
        chosen, rejected = _score_rows(model, tokenizer, rows, pairs, mc.max_length, mc.min_prompt_tokens,
                                       batch_size, use_bf16, progress)
    score_seconds = time.perf_counter() - t1
    # The preference probability comes from the model's own scale, before any per-rater map.
    p_chosen = extra["p_chosen"] if extra else sigmoid(chosen - rejected)
    note = ""
    if maps is not None:
        mapped_chosen, known = maps.apply(str(rater), chosen)
        chosen, rejected = mapped_chosen, maps.apply(str(rater), rejected)[0]
        note = "" if known else f"rater {rater!r} is not in {calibration}: the population map was used"
    lines = []
    for i, row in enumerate(rows):
        out = dict(row)
        if _single(row):
            out["reward"] = float(chosen[i])
            if extra:
                out["confidence"] = float(extra["confidence_chosen"][i])
        else:
            out["reward_chosen"], out["reward_rejected"] = float(chosen[i]), float(rejected[i])
            out["p_chosen"] = float(p_chosen[i])
        lines.append(json.dumps(out))  # ASCII escapes: a text's unpaired surrogates are written as it held them
    try:
        atomic_write_text(output, "\n".join(lines) + "\n")
    except OSError as exc:
        raise RunFolderError(f"{output}: cannot write ({exc.strerror or exc})") from None
    summary = [f"read {input_path}: {len(rows)} rows"
               + (f" ({repaired} with unpaired UTF-16 surrogates, scored with U+FFFD in their place)" if repaired
                  else ""),
               f"model load {load_seconds:.1f} s; scoring {score_seconds:.1f} s "
               f"({len(rows) / max(score_seconds, 1e-9):.1f} rows/s)", *([note] if note else []),
               f"wrote {output}"]
    return JobResult(output, f"scored {len(rows)} rows -> {output}",
                     {"rows": len(rows), "load_seconds": load_seconds, "score_seconds": score_seconds}, [], summary)
