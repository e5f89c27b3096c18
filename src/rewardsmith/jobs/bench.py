"""`rewardsmith bench`: one or more reward models on every benchmark suite whose data is present, into one report
card.

    run_bench(["runs/harmless/model", "runs/helpful/model"], ["all"], "runs/bench")

The suites are loaded once (rewardsmith.bench.runner.load_suites); each model is loaded through the one inference
path (rewardsmith.inference) and scores every distinct (prompt, response) of all suites in one call, rows with
many completions batched with the rest (rewardsmith.bench.runner.run_suites); model load and scoring are timed
apart. Each model's results are saved as it finishes (`models/<name>.json`), so a run killed after the first of two
models resumes with the second; a saved model result is reused only when the model's files, the texts and the
settings are the ones it was computed from. The same command on a finished run rescores nothing and renders its
report card again from metrics.json (how a change to the report reaches an existing run). With two models or more,
each is compared to the first with paired bootstrap differences and verdicts (rewardsmith.bench.compare). The run
folder holds manifest.json, metrics.json (rewardsmith.bench.runner.bench_metrics plus what each model is and how it
was scored), scores.json (the per-unit values behind every number, so comparisons can be recomputed without
rescoring), report.md, report.html, plots/ and models/.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardsmith.bench.compare import compare_models
from rewardsmith.bench.registry import discover_suites, select_suites
from rewardsmith.bench.runner import BenchResult, bench_metrics, collect_texts, load_suites, run_suites
from rewardsmith.bench.schema import Missing, SuiteData, Text
from rewardsmith.bench.suite import EvalOptions
from rewardsmith.data.sources import resolve_data_dir
from rewardsmith.errors import CheckpointError, ConfigError, DataError
from rewardsmith.inference import Inference, InferenceOptions, load_inference, texts_digest
from rewardsmith.io.environment import environment_info
from rewardsmith.io.runfolder import RunFolder, config_hash
from rewardsmith.jobs.common import (
    JobResult,
    model_labels,
    slug,
    truncation_line,
    written_line,
)
from rewardsmith.models.identity import model_fingerprint
from rewardsmith.models.loading import load_reward_model
from rewardsmith.report.bench import bench_report, summary_rows

COMMAND = "bench"
MODELS_DIR = "models"
SCORES_FILE = "scores.json"
OUTPUTS = ("metrics.json", SCORES_FILE, "report.md", "report.html", "plots", MODELS_DIR)
SCORES_FORMAT = "rewardsmith.bench-scores/1"
# Keys a resume may change: the models (results are kept per model), where the data lies and the batch size (a
# saved result is reused only for the same texts, and scores do not depend on batching).
VOLATILE = ("models", "data_dir", "batch_size")
# A real SIGKILL after this many models are finished (tests of resume).
KILL_AFTER_MODEL_ENV = "REWARDSMITH_FAULT_KILL_AFTER_MODEL"
SEED, CONFIDENCE = 0, 0.95


# ----------------------------------------------------------------------------------------------------- names


def result_file(label: str, source: str) -> str:
    """The run-folder path of one model's saved results: models/<label>-<8 hex of the source>.json."""
    return f"{MODELS_DIR}/{slug(label)}-{hashlib.sha256(source.encode()).hexdigest()[:8]}.json"


# ----------------------------------------------------------------------------------------------------- scoring


class TimedScore:
    """The bench ScoreFn of one model: Inference.score_texts on the texts (progress under `progress`, None:
    silent); `seconds` and `texts` add up every call."""

    def __init__(self, inference: Inference, progress: str | None = None):
        self.inference = inference
        self.progress = progress
        self.seconds = 0.0
        self.texts = 0

    def __call__(self, texts: Sequence[Text]) -> Any:
        start = time.perf_counter()
        rewards = self.inference.score_texts(list(texts), progress=self.progress).rewards
        self.seconds += time.perf_counter() - start
        self.texts += len(texts)
        return rewards


def score_model(
    source: str,
    datasets: Sequence[SuiteData],
    options: EvalOptions,
    inference_options: InferenceOptions | None = None,
    progress: str | None = None,
) -> dict[str, Any]:
    """One model over the loaded suites: a JSON-ready record {model (what was loaded and how texts were written),
    texts (requested, scored, reused), truncation (the encoder's counts), timing (load_seconds, score_seconds,
    texts_per_s), metrics (BenchResult.to_dict), units (BenchResult.units_dict)}. ConfigError for an in-context
    model."""
    start = time.perf_counter()
    inference = load_inference(source, inference_options)
    load_seconds = time.perf_counter() - start
    if inference.in_context:
        raise ConfigError(f"{source}: an in-context (ICRM) model; benchmark it with `rewardsmith icrm eval`")
    score = TimedScore(inference, progress)
    result = run_suites(datasets, score, options, discover_suites())
    loaded = inference.loaded
    return {
        "model": {
            "kind": loaded.kind,
            "model_type": loaded.model_type,
            "template": loaded.template,
            "max_length": loaded.max_length,
            "precision": "bf16" if inference.bf16 else "fp32",
            "trained_on": loaded.meta.get("trained_on"),
            "description": loaded.describe(),
        },
        "texts": dict(result.texts),
        "truncation": dict(inference.counts),
        "timing": {
            "load_seconds": round(load_seconds, 3),
            "score_seconds": round(score.seconds, 3),
            "texts_per_s": round(score.texts / score.seconds, 2) if score.seconds > 0 else None,
        },
        "metrics": result.to_dict(),
        "units": result.units_dict(),
    }


# ----------------------------------------------------------------------------------------------------- checks


def _check_options(models: Sequence[str], n_boot: int, limit: int | None) -> None:
    if not models:
        raise ConfigError("give at least one --model")
    if n_boot < 0:
        raise ConfigError(f"--bootstrap must be at least 0, got {n_boot}")
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")


def _check_model_folders(sources: Sequence[str], trust_remote_code: bool) -> None:
    """Every local folder given is a model rewardsmith reads, before any model is scored (reading a folder that is
    not one stops at its one-line CheckpointError; loading a model that is one is left for its turn)."""
    from rewardsmith.models.ensemble import is_ensemble, read_ensemble
    from rewardsmith.models.loading import MODEL_KINDS

    for source in sources:
        folder = Path(source).expanduser()
        if is_ensemble(folder):
            read_ensemble(folder)  # its members are there, and it does not list itself
            continue
        if folder.exists() and not (
            folder.is_dir() and any(MODEL_KINDS.get(n).detect(folder) for n in MODEL_KINDS.names())
        ):
            load_reward_model(folder, trust_remote_code=trust_remote_code)  # raises, naming what the folder holds
        # A name that cannot be a hub id ("owner/name"), or a path into a folder that exists, is a missing folder.
        looks_local = "/" not in source or source.startswith((".", "/", "~")) or folder.parent.is_dir()
        if not folder.exists() and looks_local:
            raise CheckpointError(f"{source}: model folder not found")


# ----------------------------------------------------------------------------------------------------- the job


def _saved(
    folder: RunFolder, name: str, source: str, fingerprint: str | None, digest: str, settings: str
) -> dict[str, Any] | None:
    """A model's results saved by an earlier run in this folder, when computed from the same model files, texts
    and settings; else None."""
    path = folder.path / name
    if not (folder.owns(name) and path.is_file()):
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    same = {"source": source, "fingerprint": fingerprint, "texts_digest": digest, "settings": settings}
    return record if isinstance(record, dict) and all(record.get(k) == v for k, v in same.items()) else None


def _suite_lines(datasets: Sequence[SuiteData], missing: Sequence[Missing]) -> list[str]:
    lines = []
    for data in datasets:
        s = data.summary()
        text = f"read {data.suite}: {s['read']} rows from {len(s['sources'])} file(s), {s['rows']} used"
        dropped = {k: v for k, v in s["dropped"].items() if v}
        if dropped:
            text += " (dropped: " + ", ".join(f"{k} {v}" for k, v in dropped.items()) + ")"
        lines.append(text)
        lines += [f"  {data.suite}: {note}" for note in s["notes"]]
    lines += [f"skipped {m.suite}: {m.message}" for m in missing]
    return lines


def training_sets(trained_on: str | None, datasets: Sequence[SuiteData]) -> list[dict[str, str]]:
    """The benchmark sets ({suite, subset}) named like the dataset a model was trained on (a rewardsmith model
    records it): their scores are not held out, as the set may hold the model's training pairs."""
    if not trained_on:
        return []
    return [
        {"suite": data.suite, "subset": trained_on}
        for data in datasets
        if any(row.subset == trained_on for row in data.rows)
    ]


def _model_lines(label: str, info: dict[str, Any]) -> list[str]:
    t, timing = info["texts"], info["timing"]
    lines = [f"{label}: {info['description']}, {info['precision']}"]
    when = ""
    if info["from_earlier_run"]:
        lines.append(
            f"{label}: results reused from the earlier run in this folder (same model files, texts and "
            "settings); nothing rescored"
        )
        when = " (earlier run)"
    lines.append(
        f"{label}: texts requested {t['requested']}, scored {t['scored']}, reused {t['reused']} (each "
        "distinct text scored once)"
    )
    rate = f" ({timing['texts_per_s']:.1f} texts/s)" if timing.get("texts_per_s") else ""
    lines.append(
        f"{label}: model load {timing['load_seconds']:.1f} s; scoring {timing['score_seconds']:.1f} s{rate}" + when
    )
    lines.append(f"{label}: " + truncation_line(info["truncation"], f"texts (at {info['max_length']} tokens)"))
    for found in info["training_sets"]:
        lines.append(
            f"{label}: trained on {found['subset']}, also a benchmark set here ({found['suite']}): that "
            "score is not held out"
        )
    return lines


def _model_info(source: str, record: dict[str, Any], reused: bool, datasets: Sequence[SuiteData]) -> dict[str, Any]:
    """What metrics.json says of one model: source, what was loaded (kind, template, max_length, precision,
    trained_on, description), texts, truncation, timing, from_earlier_run, training_sets."""
    return {
        "source": source,
        **record["model"],
        "texts": record["texts"],
        "truncation": record["truncation"],
        "timing": record["timing"],
        "from_earlier_run": reused,
        "training_sets": training_sets(record["model"].get("trained_on"), datasets),
    }


def run_bench(
    models: Sequence[str | Path],
    suites: Sequence[str] | None,
    out: str | Path,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    n_boot: int = 1000,
    options: InferenceOptions | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> JobResult:
    """Benchmarks each model (any kind models.loading reads) on the suites selected into the run folder `out`.

    suites: --suite names (all | rewardbench | rewardbench2 | ppe | rm-bench | local, or a suite's own name; None:
    all); data_dir: where the releases lie (default: $REWARDSMITH_DATA_DIR, else ../shared/data); limit: at most
    this many rows per subset; n_boot: bootstrap replicates of every CI (0: none); options: how each model is
    read and run (InferenceOptions; bf16 None = as each model was trained). Suites without data
    are reported with what to put where; DataError when none of the selected suites has data. Returns the run's
    metrics, the console table of each suite's headline scores and the summary lines.
    """
    sources = [str(m) for m in models]
    options = options or InferenceOptions()
    _check_options(sources, n_boot, limit)
    labels = model_labels(sources)
    names = select_suites(suites)
    root = resolve_data_dir(data_dir)
    _check_model_folders(sources, options.trust_remote_code)
    eval_options = EvalOptions(n_boot=n_boot, seed=SEED, confidence=CONFIDENCE)
    config = {
        "models": sources,
        "suites": names,
        "limit": limit,
        "n_boot": n_boot,
        "seed": SEED,
        "confidence": CONFIDENCE,
        "bf16": options.bf16,
        "template": options.template,
        "max_length": options.max_length,
        "trust_remote_code": options.trust_remote_code,
        "batch_size": options.batch_size,
        "data_dir": str(root),
    }
    settings = config_hash(config, VOLATILE)
    title = f"rewardsmith bench -> {out}"
    datasets, missing = load_suites(root, names, limit=limit)
    if not datasets:
        raise DataError(
            f"no benchmark data for the suites asked for under {root}: " + "; ".join(str(m) for m in missing)
        )
    texts, _, requested = collect_texts(datasets)
    digest = texts_digest(texts)
    # Each model's results are saved and reused under its content fingerprint: a changed model is scored again.
    with RunFolder.open(out, COMMAND, config, overwrite=overwrite, volatile=VOLATILE, cached=("models",)) as folder:
        fingerprints = {s: model_fingerprint(s) for s in sources}
        files = {s: result_file(label, s) for label, s in zip(labels, sources, strict=True)}
        saved = {s: _saved(folder, files[s], s, fingerprints[s], digest, settings) for s in sources}
        reused_run = _finished(folder, sources, saved)
        if reused_run is not None:
            # The report card follows the current code: rendered again from the run's metrics.json (seconds, no
            # scoring); metrics.json, scores.json and models/ stay as they are.
            try:
                bench_report(reused_run, folder.path, folder.write_text)
                line = "report.md, report.html and plots/ rendered again from its metrics.json"
            except (KeyError, TypeError, ValueError) as err:  # a metrics.json of an older layout
                line = f"its report left as it was (its metrics.json predates this report layout: {err!r})"
            folder.mark_complete()
            return JobResult(
                folder.path,
                title,
                reused_run,
                summary_rows(reused_run),
                [f"{folder.path} already holds this finished run; nothing rescored, {line} (--overwrite redoes it)"],
                reused=True,
            )
        folder.claim(MODELS_DIR)
        records: dict[str, dict[str, Any]] = {}
        for done, (label, source) in enumerate(zip(labels, sources, strict=True), start=1):
            record = saved[source]
            if record is None:
                record = score_model(source, datasets, eval_options, options, f"score {label}" if progress else None)
                record.update(
                    source=source, label=label, fingerprint=fingerprints[source], texts_digest=digest, settings=settings
                )
                folder.write_json(files[source], record)
            records[source] = record
            if os.environ.get(KILL_AFTER_MODEL_ENV) == str(done):
                os.kill(os.getpid(), signal.SIGKILL)
        results = {
            label: BenchResult.from_dicts(records[s]["metrics"], records[s]["units"])
            for label, s in zip(labels, sources, strict=True)
        }
        comparisons = compare_models(results, n_boot=n_boot, seed=SEED, confidence=CONFIDENCE)
        metrics = bench_metrics(results, missing, comparisons)
        info = {
            label: _model_info(s, records[s], saved[s] is not None, datasets)
            for label, s in zip(labels, sources, strict=True)
        }
        metrics.update(
            {
                "model_info": info,
                "texts": {"requested": requested, "distinct": len(texts), "digest": digest},
                "options": {"limit": limit, "n_boot": n_boot, "seed": SEED, "confidence": CONFIDENCE},
                "environment": environment_info(SEED),
                "config": config,
            }
        )
        folder.write_json(
            SCORES_FILE,
            {
                "format": SCORES_FORMAT,
                "models": labels,
                "sources": dict(zip(labels, sources, strict=True)),
                "units": {label: records[s]["units"] for label, s in zip(labels, sources, strict=True)},
            },
        )
        folder.write_json("metrics.json", metrics)
        folder.claim("plots")
        bench_report(metrics, folder.path, folder.write_text)
        folder.mark_complete()
        summary = _suite_lines(datasets, missing)
        for label in labels:
            summary += _model_lines(label, info[label])
        summary.append(written_line(folder, OUTPUTS))
        return JobResult(folder.path, title, metrics, summary_rows(metrics), summary)


def _finished(
    folder: RunFolder, sources: Sequence[str], saved: dict[str, dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The metrics of a finished run of exactly these models whose saved results all still hold; else None."""
    path = folder.path / "metrics.json"
    if not (folder.complete and path.is_file() and all(saved.values())):
        return None
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(metrics, dict) or metrics.get("config", {}).get("models") != list(sources):
        return None
    return metrics
