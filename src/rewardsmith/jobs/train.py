"""`rewardsmith train` and `rewardsmith eval`: train a Bradley-Terry reward model and evaluate it on held-out
sets; evaluate a saved model on datasets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rewardsmith.config import DatasetConfig, RunConfig, to_dict
from rewardsmith.data.collate import encode_pairs
from rewardsmith.data.prepare import prepare_data
from rewardsmith.data.registry import load_configured
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.templates import encoder_for
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.evaluate.protocols import evaluate_pairs, evaluate_rmbench, has_rmbench_variants
from rewardsmith.evaluate.scoring import RewardScorer
from rewardsmith.io.environment import environment_info
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import JobResult, add_counts, dataset_lines, open_run, truncation_line, written_line
from rewardsmith.jobs.inference import Inference
from rewardsmith.models.factory import build_reward_model, save_model
from rewardsmith.report.train import eval_report, eval_rows, train_report
from rewardsmith.train.tracking import tracked_paths
from rewardsmith.train.trainer import CHECKPOINT_DIR, LOG_FILE, train_pairs

OUTPUTS = ("model", "metrics.json", "scores.json", "report.md", "report.html", "plots", LOG_FILE)
SCORES_FILE = "scores.json"


def evaluate_sets(scorer: RewardScorer, eval_sets: dict[str, list[PreferencePair]], n_boot: int = 1000,
                  progress: bool = False) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
    """The accuracy block (and RM-Bench matrix where available) of every named set, the summed truncation
    counts, and every pair's scores with its response lengths in characters and its label ({set: {"pair_id",
    "chosen", "rejected", "chosen_chars", "rejected_chars", "label"}}, for scores.json: paired comparisons of
    runs need them)."""
    results: dict[str, Any] = {}
    truncated: dict[str, int] = {}
    per_pair: dict[str, Any] = {}
    for name, pairs in eval_sets.items():
        if not pairs:
            results[name] = {"n": 0}
            continue
        block, scores = evaluate_pairs(scorer, pairs, n_boot, progress=f"score {name}" if progress else None)
        per_pair[name] = {"pair_id": [p.pair_id for p in pairs],
                          "chosen": [round(float(x), 6) for x in scores[0::2]],
                          "rejected": [round(float(x), 6) for x in scores[1::2]],
                          "chosen_chars": [len(p.chosen) for p in pairs],
                          "rejected_chars": [len(p.rejected) for p in pairs],
                          "label": [p.label for p in pairs]}
        add_counts(truncated, block["truncated"])
        if has_rmbench_variants(pairs):
            block["rmbench"] = evaluate_rmbench(scorer, pairs)
        results[name] = block
    return results, truncated, per_pair


def _loss_curve(log_path: Path, max_points: int = 400) -> dict[str, list[float]]:
    rows = []
    if log_path.exists():
        for line in log_path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                break
    stride = max(1, len(rows) // max_points)
    kept = rows[::stride]
    return {"step": [r.get("step") for r in kept], "loss": [r.get("total", r.get("bt")) for r in kept]}


def _reused(folder: RunFolder, title: str) -> JobResult | None:
    path = folder.path / "metrics.json"
    if not (folder.complete and path.exists()):
        return None
    metrics = json.loads(path.read_text(encoding="utf-8"))
    return JobResult(folder.path, title, metrics, eval_rows(metrics.get("eval", {})),
                     [f"{folder.path} already holds this finished run; nothing retrained (--overwrite redoes it)"],
                     reused=True)


def run_train(cfg: RunConfig, out: str | Path, overwrite: bool = False) -> JobResult:
    """Trains and evaluates as configured into the run folder `out`; returns the metrics and summary."""
    title = f"rewardsmith train -> {out}"
    with open_run(out, "train", cfg, overwrite) as folder:
        reused = _reused(folder, title)
        if reused is not None:
            return reused
        data = prepare_data(cfg.data)
        model, tokenizer = build_reward_model(cfg.model, seed=cfg.train.seed)
        encoder = encoder_for(tokenizer, cfg.model)
        encoded = encode_pairs(encoder, data.train)
        train_counts = dict(encoder.counts)
        for name in (LOG_FILE, CHECKPOINT_DIR, *tracked_paths(cfg.train.report_to)):
            folder.claim(name)
        trainer = train_pairs(model, tokenizer, data.train, cfg.train, cfg.model, folder.path, encoded=encoded)
        model = trainer.model
        if cfg.save_model:
            save_model(model, tokenizer, folder.claim("model"), cfg.model,
                       extra={"trained_on": cfg.data.train.label, "train_pairs": len(data.train),
                              "bf16": cfg.train.bf16})
        scorer = RewardScorer.for_model(model, tokenizer, cfg.model, cfg.eval.batch_size, cfg.train.bf16)
        results, eval_counts, scores = evaluate_sets(scorer, data.eval_sets, cfg.eval.n_boot, cfg.train.progress)
        folder.write_json(SCORES_FILE, scores)
        result = trainer.result
        metrics: dict[str, Any] = {
            "train": {"dataset": cfg.data.train.label, "pairs": len(data.train), "steps": result.steps,
                      "seconds": round(result.seconds, 2), "pairs_per_s": round(result.items_per_second, 3),
                      "resumed_from_step": result.resumed_from_step, "final": result.final_terms,
                      "curve": _loss_curve(folder.path / LOG_FILE)},
            "eval": results,
            "data": data.summaries,
            "truncation": {"train": train_counts, "eval": eval_counts},
            "environment": environment_info(cfg.train.seed),
            "config": to_dict(cfg),
        }
        folder.write_json("metrics.json", metrics)
        folder.claim("plots")
        train_report(metrics, folder)
        folder.mark_complete()
        summary = [*dataset_lines(data.summaries), truncation_line(train_counts, "training sequences"),
                   truncation_line(eval_counts, "evaluation sequences"), written_line(folder, OUTPUTS)]
        return JobResult(folder.path, title, metrics, eval_rows(results), summary)


def run_eval(model_dir: str | Path, datasets: list[DatasetConfig], out: str | Path, data_dir: str | None = None,
             bf16: bool | None = None, batch_size: int = 64, n_boot: int = 1000, progress: bool = True,
             overwrite: bool = False, template: str = "auto", max_length: int | None = None,
             trust_remote_code: bool = False) -> JobResult:
    """Evaluates a reward model (any kind models.loading reads) on each dataset into the run folder `out`.
    bf16: None = as trained; template / max_length / trust_remote_code: how a model from elsewhere is read."""
    if not datasets:
        raise ConfigError("give at least one --dataset")
    if batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, got {batch_size}")
    config = {"model": str(model_dir), "datasets": [to_dict(d) for d in datasets], "bf16": bf16, "n_boot": n_boot,
              "data_dir": data_dir, "batch_size": batch_size, "template": template, "max_length": max_length}
    title = f"rewardsmith eval -> {out}"
    with RunFolder.open(out, "eval", config, overwrite=overwrite, volatile=("data_dir", "batch_size")) as folder:
        sets: dict[str, list[PreferencePair]] = {}
        summaries: dict[str, Any] = {}
        for ds in datasets:
            loaded = load_configured(ds, data_dir)
            if ds.label in sets:
                raise ConfigError(f"evaluation set {ds.label!r} listed twice")
            if not loaded.pairs:
                raise DataError(f"no pairs to evaluate in {ds.label}: {loaded.account()}")
            sets[ds.label] = loaded.pairs
            summaries[ds.label] = {**loaded.summary(), "label": ds.label, "used": len(loaded.pairs)}
        inference = Inference.load(model_dir, template, max_length, trust_remote_code, batch_size, bf16)
        if inference.in_context:
            raise ConfigError(f"{model_dir}: an in-context (ICRM) model; evaluate it with `rewardsmith icrm eval`")
        results, counts, scores = evaluate_sets(inference.scorer, sets, n_boot, progress)
        folder.write_json(SCORES_FILE, scores)
        model = inference.loaded
        metrics = {"model": str(model_dir), "model_kind": model.kind, "template": model.template,
                   "max_length": model.max_length, "trained_on": model.meta.get("trained_on"), "eval": results,
                   "data": summaries, "truncation": counts, "environment": environment_info(), "config": config}
        folder.write_json("metrics.json", metrics)
        folder.claim("plots")
        eval_report(metrics, folder)
        folder.mark_complete()
        summary = [*dataset_lines(summaries), model.describe(), truncation_line(counts), written_line(folder, OUTPUTS)]
        return JobResult(folder.path, title, metrics, eval_rows(results), summary)
