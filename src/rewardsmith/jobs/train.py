"""`rewardsmith train` and `rewardsmith eval`: train a Bradley-Terry reward model and evaluate it on held-out
sets; evaluate a saved model on datasets.

Both run under `accelerate launch --num_processes N`: every process trains (the Trainer) and scores
(data-parallel, evaluate.scoring) together, and the main process writes the run folder (io.runfolder: the
others hold a read-only view of it)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.config import DatasetConfig, RunConfig, to_dict, volatile_keys
from rewardsmith.data.collate import encode_pairs
from rewardsmith.data.prepare import train_data
from rewardsmith.data.registry import load_configured
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.templates import encoder_for
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.evaluate.protocols import PairScorer, evaluate_pairs, evaluate_rmbench, has_rmbench_variants
from rewardsmith.evaluate.scoring import RewardScorer
from rewardsmith.inference import InferenceOptions, load_inference, write_ensemble
from rewardsmith.io.environment import environment_info
from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import (
    JobResult,
    add_counts,
    dataset_lines,
    finished_run,
    open_run,
    truncation_line,
    written_line,
)
from rewardsmith.models.factory import build_reward_model, save_model
from rewardsmith.report.render import with_interval
from rewardsmith.report.train import eval_report, eval_rows, train_report
from rewardsmith.train.tracking import tracked_paths
from rewardsmith.train.trainer import CHECKPOINT_DIR, LOG_FILE, train_pairs

OUTPUTS = ("model", "metrics.json", "scores.json", "report.md", "report.html", "plots", LOG_FILE)
SCORES_FILE = "scores.json"


def evaluate_sets(
    scorer: PairScorer, eval_sets: dict[str, list[PreferencePair]], n_boot: int = 1000, progress: bool = False
) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
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
        per_pair[name] = {
            "pair_id": [p.pair_id for p in pairs],
            "chosen": [round(float(x), 6) for x in scores[0::2]],
            "rejected": [round(float(x), 6) for x in scores[1::2]],
            "chosen_chars": [len(p.chosen) for p in pairs],
            "rejected_chars": [len(p.rejected) for p in pairs],
            "label": [p.label for p in pairs],
        }
        add_counts(truncated, block["truncated"])
        if has_rmbench_variants(pairs):
            block["rmbench"] = evaluate_rmbench(scorer, pairs)
        results[name] = block
    return results, truncated, per_pair


def _loss_curve(log_path: Path, max_points: int = 400) -> dict[str, list[float]]:
    rows = []
    if log_path.exists():
        for line in jsonl_lines(log_path.read_text(encoding="utf-8")):
            try:
                rows.append(json.loads(line))
            except ValueError:
                break
    stride = max(1, len(rows) // max_points)
    kept = rows[::stride]
    return {"step": [r.get("step") for r in kept], "loss": [r.get("total", r.get("bt")) for r in kept]}


def run_train_members(
    cfg: RunConfig, out: str | Path, members: int, overwrite: bool = False, bootstrap: bool = False
) -> JobResult:
    """Trains `members` models as `cfg` says, seeds cfg.train.seed + k, into OUT/members/seed<s> (each a run folder:
    resumed or reused as any run), then makes them an ensemble at OUT/ensemble (jobs.ensemble.make_ensemble, mean
    rule, the default reference texts; remade on every call, so a rerun after a member changed stays true).
    bootstrap: member k also trains on a resample of the pairs with replacement (data.bootstrap = its seed), into
    OUT/members/boot<s>."""
    import copy

    if members < 2:
        raise ConfigError(f"--members {members}: an ensemble needs at least two members")
    out = Path(out)
    rows, summary, models = [], [], []
    # OUT is a run folder of its own (the contract: a non-empty folder holding no run is refused without
    # --overwrite), holding the members' run folders and the ensemble.
    settings = {**to_dict(cfg), "ensemble": {"members": members, "bootstrap": bootstrap}}
    with RunFolder.open(out, "train-members", settings, overwrite=overwrite, volatile=volatile_keys(RunConfig)) as run:
        run.claim("members")
        run.claim("ensemble")
        for k in range(members):
            member = copy.deepcopy(cfg)
            seed = member.train.seed = cfg.train.seed + k
            if bootstrap:
                member.data.bootstrap = seed
            name = f"{'bootstrap' if bootstrap else 'seed'} {seed}"
            result = run_train(member, out / "members" / f"{'boot' if bootstrap else 'seed'}{seed}", overwrite)
            models.append(str(result.out / "model"))
            rows += [{"member": name, **row} for row in result.rows]
            summary.append(f"member {name}: " + (result.summary[-1] if result.summary else ""))
        ensemble_dir = out / "ensemble"
        spec, _, ref_label = write_ensemble(models, ensemble_dir, progress=False, overwrite=ensemble_dir.exists())
        # The ensemble's own accuracy on the members' held-out sets (the same for every member: a bootstrap resample
        # changes the training pairs only), scored as `eval` scores an ensemble folder.
        eval_sets = train_data(dataclasses.replace(cfg.data, bootstrap=None)).eval_sets
        inference = load_inference(ensemble_dir, InferenceOptions(batch_size=cfg.eval.batch_size, bf16=cfg.train.bf16))
        results, _, _ = evaluate_sets(inference, eval_sets, cfg.eval.n_boot)
        name = f"ensemble ({members} members, mean)"
        rows += [{"member": name, **row} for row in eval_rows(results)]
        accuracy = [f"{row['dataset']} {row['accuracy']}" for row in eval_rows(results)]
        run.mark_complete()
    return JobResult(
        out,
        f"rewardsmith train --members {members}{' --bootstrap' if bootstrap else ''} -> {out}",
        {"members": models, "ensemble": str(ensemble_dir), "ensemble_eval": results},
        rows,
        [
            *summary,
            f"ensemble ({spec.rule}) -> {ensemble_dir}; reference {ref_label}",
            f"{name}: accuracy " + ("; ".join(accuracy) or "not scored (no held-out pairs)"),
        ],
    )


def run_train(cfg: RunConfig, out: str | Path, overwrite: bool = False) -> JobResult:
    """Trains and evaluates as configured into the run folder `out`; returns the metrics and summary."""
    title = f"rewardsmith train -> {out}"
    with open_run(out, "train", cfg, overwrite) as folder:
        reused = finished_run(folder, title, lambda m: eval_rows(m.get("eval", {})))
        if reused is not None:
            return reused
        data = train_data(cfg.data)
        model, tokenizer = build_reward_model(cfg.model, seed=cfg.train.seed)
        encoder = encoder_for(tokenizer, cfg.model)
        encoded = encode_pairs(encoder, data.train)
        train_counts = dict(encoder.counts)
        for name in (LOG_FILE, CHECKPOINT_DIR, *tracked_paths(cfg.train.report_to)):
            folder.claim(name)
        trainer = train_pairs(model, tokenizer, data.train, cfg.train, cfg.model, folder.path, encoded=encoded)
        model = trainer.model
        if cfg.save_model and folder.main:
            save_model(
                model,
                tokenizer,
                folder.claim("model"),
                cfg.model,
                extra={"trained_on": cfg.data.train.label, "train_pairs": len(data.train), "bf16": cfg.train.bf16},
            )
        scorer = RewardScorer.for_model(model, tokenizer, cfg.model, cfg.eval.batch_size, cfg.train.bf16)
        results, eval_counts, scores = evaluate_sets(scorer, data.eval_sets, cfg.eval.n_boot, cfg.train.progress)
        folder.write_json(SCORES_FILE, scores)
        result = trainer.result
        metrics: dict[str, Any] = {
            "train": {
                "dataset": cfg.data.train.label,
                "pairs": len(data.train),
                "steps": result.steps,
                "seconds": round(result.seconds, 2),
                "pairs_per_s": round(result.items_per_second, 3),
                "resumed_from_step": result.resumed_from_step,
                "final": result.final_terms,
                "curve": _loss_curve(folder.path / LOG_FILE),
            },
            "eval": results,
            "data": data.summaries,
            "warnings": data.warnings,
            "truncation": {"train": train_counts, "eval": eval_counts},
            "environment": environment_info(cfg.train.seed),
            "config": to_dict(cfg),
        }
        folder.write_json("metrics.json", metrics)
        folder.claim("plots")
        if folder.main:
            train_report(metrics, folder)
        folder.mark_complete()
        summary = [
            *dataset_lines(data.summaries),
            *data.warnings,
            truncation_line(train_counts, "training sequences"),
            truncation_line(eval_counts, "evaluation sequences"),
            written_line(folder, OUTPUTS),
        ]
        return JobResult(folder.path, title, metrics, eval_rows(results), summary)


def run_eval(
    model_dir: str | Path,
    datasets: list[DatasetConfig],
    out: str | Path,
    data_dir: str | None = None,
    options: InferenceOptions | None = None,
    n_boot: int = 1000,
    progress: bool = True,
    overwrite: bool = False,
    shift_config: str | Path | None = None,
) -> JobResult:
    """Evaluates a reward model (any kind models.loading reads) on each dataset into the run folder `out`.
    options: how the model is read and run (InferenceOptions; bf16 None = as trained). shift_config: a stress test
    under preference shift: the config's ID test split of its source and every target (split as `rewardsmith shift`
    splits them), with each target's accuracy minus the ID accuracy and its CI."""
    if not datasets and shift_config is None:
        raise ConfigError("give at least one --dataset, or a --shift-config whose source and targets to evaluate on")
    options = options or InferenceOptions()
    config = {
        "model": str(model_dir),
        "datasets": [to_dict(d) for d in datasets],
        "bf16": options.bf16,
        "n_boot": n_boot,
        "data_dir": data_dir,
        "batch_size": options.batch_size,
        "template": options.template,
        "max_length": options.max_length,
        "shift_config": str(shift_config) if shift_config else None,
    }
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
        shift = _shift_sets(shift_config, data_dir) if shift_config is not None else None
        if shift is not None:
            for name, pairs in shift["sets"].items():
                if name in sets:
                    raise ConfigError(f"evaluation set {name!r} given by --dataset and by --shift-config")
                sets[name] = pairs
                removed = shift["overlap_removed"].get(name, 0)
                summaries[name] = {
                    "label": name,
                    "pairs": len(pairs) + removed,  # as split, before the pairs seen in training were dropped
                    "used": len(pairs),
                    "overlap_removed": removed,
                }
        inference = load_inference(model_dir, options)
        if inference.in_context:
            raise ConfigError(f"{model_dir}: an in-context (ICRM) model; evaluate it with `rewardsmith icrm eval`")
        results, counts, scores = evaluate_sets(inference, sets, n_boot, progress)
        folder.write_json(SCORES_FILE, scores)
        model = inference.loaded
        shift_block = _shift_block(shift, sets, scores, n_boot) if shift is not None else None
        metrics = {
            "model": str(model_dir),
            "model_kind": model.kind,
            "template": model.template,
            "max_length": model.max_length,
            "trained_on": model.meta.get("trained_on"),
            "eval": results,
            "data": summaries,
            "truncation": counts,
            "environment": environment_info(),
            "config": config,
            **({"shift": shift_block} if shift_block else {}),
        }
        folder.write_json("metrics.json", metrics)
        folder.claim("plots")
        if folder.main:
            eval_report(metrics, folder)
        folder.mark_complete()
        shifted = []
        for name, t in (shift_block or {}).get("targets", {}).items():
            plain = with_interval(t["ood_minus_id"], t["ood_minus_id_ci"], 1)
            lc = with_interval(t["length_controlled_ood_minus_id"], t["length_controlled_ood_minus_id_ci"], 1)
            shifted.append(f"under shift: {name} minus the ID test {plain} points (length-controlled {lc})")
        summary = [
            *dataset_lines(summaries),
            model.describe(),
            truncation_line(counts),
            *shifted,
            written_line(folder, OUTPUTS),
        ]
        return JobResult(folder.path, title, metrics, eval_rows(results), summary)


def _shift_sets(path: str | Path, data_dir: str | None) -> dict[str, Any]:
    """The ID test and the targets of a shift config, split as `rewardsmith shift` splits them (targets cleaned of
    the conversations of its training pools)."""
    from rewardsmith.config import load_yaml
    from rewardsmith.w2s.config import ShiftConfig
    from rewardsmith.w2s.metrics import ID_SPLIT
    from rewardsmith.w2s.pipeline import shift_data

    config = load_yaml(ShiftConfig, path)
    data = shift_data(config, data_dir)
    id_name = f"{config.source.label} (ID test)"
    sets = {(id_name if name == ID_SPLIT else name): pairs for name, pairs in data.eval.items()}
    return {"config": str(path), "id": id_name, "sets": sets, "overlap_removed": data.overlap_removed}


def _shift_block(
    shift: dict[str, Any], sets: dict[str, list[PreferencePair]], scores: dict[str, Any], n_boot: int
) -> dict[str, Any]:
    """Per target: its accuracy minus the ID accuracy, and the same for the length-controlled accuracy, with CIs
    (each set resampled on its own: different pairs)."""
    from rewardsmith.evaluate.metrics import pairwise_correct
    from rewardsmith.evaluate.transfer import unpaired_difference

    def correct_and_longer(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = scores[name]
        margins = np.asarray(s["chosen"], dtype=np.float64) - np.asarray(s["rejected"], dtype=np.float64)
        chosen_chars, rejected_chars = np.asarray(s["chosen_chars"]), np.asarray(s["rejected_chars"])
        return pairwise_correct(margins), chosen_chars != rejected_chars, chosen_chars > rejected_chars

    id_correct, id_unequal, id_longer = correct_and_longer(shift["id"])
    targets = {}
    for name in sets:
        if name == shift["id"] or name not in shift["sets"]:
            continue
        correct, unequal, longer = correct_and_longer(name)
        plain = unpaired_difference(id_correct, correct, n_boot=n_boot)
        lc = unpaired_difference(
            id_correct[id_unequal],
            correct[unequal],
            n_boot=n_boot,
            first_longer=id_longer[id_unequal],
            second_longer=longer[unequal],
        )
        targets[name] = {
            "ood_minus_id": plain["value"],
            "ood_minus_id_ci": plain["ci"],
            "length_controlled_ood_minus_id": lc.get("length_controlled"),
            "length_controlled_ood_minus_id_ci": lc.get("length_controlled_ci"),
        }
    return {
        "config": shift["config"],
        "id": shift["id"],
        "targets": targets,
        "overlap_removed": shift["overlap_removed"],
    }
