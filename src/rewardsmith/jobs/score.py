"""`rewardsmith score`: rewards for every row of a file, from any reward model (models.loading) or an in-context
model steered by demonstrations, optionally mapped to one rater's scale.

Rows (JSONL, JSON, Parquet or CSV, as the `file` dataset reads them) hold `prompt` and `response` (one text) or
`prompt`, `chosen` and `rejected` (a pair). A prompt is read as the `file` dataset reads it (plain user text, an
HH transcript, or a chat list; a chat-templated string is read back into turns by the model's template), so a
file scores the same through `score`, through `eval --dataset file` and through the server. The output is JSONL:
the input rows with reward fields added (inference.item_results), written atomically and never over a file
the tool did not write; model loading and scoring time are reported apart, and how many texts were truncated.

Under `accelerate launch --num_processes N` every process reads the file and scores its share of the batches
(evaluate.scoring: data-parallel, the same floats as one process); the main process writes the output once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rewardsmith.errors import ConfigError, DataError, NonFiniteReward
from rewardsmith.inference import InferenceOptions, item_results, item_texts, load_inference, read_score_rows, text_row
from rewardsmith.io.jsonsafe import json_ready
from rewardsmith.io.outputs import check_output, write_output
from rewardsmith.io.processes import processes
from rewardsmith.jobs.common import JobResult, truncation_line


def score_file(
    model_dir: str | Path,
    input_file: str | Path,
    output: str | Path,
    calibration: str | Path | None = None,
    rater: str | None = None,
    demos: str | Path | None = None,
    options: InferenceOptions | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> JobResult:
    """Adds rewards to every row of `input_file` and writes `output` atomically.

    calibration + rater: rewards mapped to that rater's scale by the fitted per-rater map (p_chosen stays on
    the model's own scale). demos: demonstrations steering an in-context model. options: how the model is read and
    run (InferenceOptions). overwrite: replace `output` when an earlier `rewardsmith score` wrote it (any other
    existing file is refused).
    """
    if (calibration is None) != (rater is None):
        raise ConfigError("--calibration and --rater go together")
    output = Path(output)
    input_path = Path(input_file)
    if output.resolve() == input_path.resolve():
        raise ConfigError(f"{output}: the output would overwrite the input; choose another --out")
    check_output(output, overwrite)
    rows, pairs, singles, repaired = read_score_rows(input_path)
    maps = None
    if calibration is not None:
        from rewardsmith.calibrate.maps import load_maps

        maps = load_maps(calibration)
    steering = None
    if demos is not None:
        from rewardsmith.icrm.scoring import read_demos

        steering = read_demos(demos)
    t0 = time.perf_counter()
    inference = load_inference(model_dir, options)
    load_seconds = time.perf_counter() - t0
    if demos is not None and not inference.in_context:
        raise ConfigError(f"{model_dir}: a scalar reward model takes no --demos (only an in-context model does)")
    t1 = time.perf_counter()
    demo_pairs = steering.pairs if steering is not None else ()
    try:
        scores = inference.score_texts(item_texts(pairs, singles), demo_pairs, progress="score" if progress else None)
    except NonFiniteReward as bad:  # the row and side of the text, and nothing written
        row, side = text_row(singles, bad.position)
        message = f"the model's {bad.what} is {bad.value}, not a finite number"
        raise DataError(message, input_path, row + 1, side) from None
    score_seconds = time.perf_counter() - t1
    results = item_results(singles, scores, maps, rater)
    notes: list[str] = []
    if maps is not None:  # what scale the rewards are on now, and whether the maps were fitted on this model
        notes.append(maps.scale_line(str(rater)))
        if not maps.apply(str(rater), scores.rewards[:1])[1]:
            notes.append(f"rater {rater!r} is not in {calibration}: the population map was used")
        notes += [n for n in (maps.provenance_note(model_dir), maps.range_note(scores.rewards)) if n]
    # ASCII escapes: a text's unpaired surrogates are written as it held them; values JSON lacks (a Parquet
    # timestamp) as text.
    text = "".join(
        json.dumps(json_ready({**row, **result}), default=str) + "\n" for row, result in zip(rows, results, strict=True)
    )
    procs = processes()
    if procs.main:
        write_output(output, lambda fh: fh.write(text.encode("utf-8")), "score", overwrite)
    loaded = inference.loaded
    summary = [
        f"read {input_path}: {len(rows)} rows"
        + (f" ({repaired} with unpaired UTF-16 surrogates, scored with U+FFFD in their place)" if repaired else ""),
        loaded.describe(),
        *([steering.line()] if steering is not None else []),
        f"model load {load_seconds:.1f} s; scoring {score_seconds:.1f} s "
        f"({len(rows) / max(score_seconds, 1e-9):.1f} rows/s)",
        truncation_line(inference.counts, f"texts (at {loaded.max_length} tokens)"),
        *notes,
        f"wrote {output}",
    ]
    return JobResult(
        output,
        f"scored {len(rows)} rows -> {output}",
        {
            "rows": len(rows),
            "load_seconds": load_seconds,
            "score_seconds": score_seconds,
            **({"demonstrations": len(steering.pairs)} if steering is not None else {}),
        },
        [],
        summary,
    )
