"""`rewardsmith icrm train` and `rewardsmith icrm eval`: train an in-context reward model (or its Bradley-Terry
baseline) into a run folder, and run its evaluation protocols."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardsmith.config import to_dict
from rewardsmith.icrm.baseline import bt_train_config, train_bt_baseline
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.episodes import PairPool
from rewardsmith.icrm.protocols import (
    PROTOCOLS,
    check_eval_settings,
    check_training_sources,
    load_context,
    protocol_names,
)
from rewardsmith.icrm.train import EMBEDDINGS_DIR, train_icrm
from rewardsmith.io.environment import environment_info
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import JobResult, finished_run, open_run, written_line
from rewardsmith.models.factory import save_model
from rewardsmith.report.icrm import protocol_report, protocol_rows
from rewardsmith.train.tracking import tracked_paths
from rewardsmith.train.trainer import CHECKPOINT_DIR, LOG_FILE


def run_icrm_train(
    cfg: ICRMRunConfig, out: str | Path, overwrite: bool = False, pools: dict[str, dict[str, PairPool]] | None = None
) -> JobResult:
    """Trains an ICRM into the run folder `out` (config.yaml, log.jsonl, embeddings/, model/, metrics.json)."""
    check_training_sources(cfg.episodes)  # before the run folder is made
    with open_run(out, "icrm-train", cfg, overwrite) as folder:
        reused = finished_run(folder, f"ICRM model -> {folder.path / 'model'}")
        if reused is not None:
            return reused
        for name in (LOG_FILE, CHECKPOINT_DIR, EMBEDDINGS_DIR, *tracked_paths(cfg.train.report_to)):
            folder.claim(name)
        result = train_icrm(cfg, folder.path, pools)
        tr = result.train
        save_model(
            result.model,
            result.tokenizer,
            folder.claim("model"),
            cfg.model,
            {"train_steps": tr.steps, "bf16": cfg.train.bf16},
        )
        metrics = {
            "steps": tr.steps,
            "episodes_seen": tr.items_seen,
            "seconds": round(tr.seconds, 1),
            "episodes_per_s": round(tr.items_per_second, 2),
            "resumed_from_step": tr.resumed_from_step,
            "final_terms": tr.final_terms,
            "pools": result.pools,
            "environment": environment_info(cfg.train.seed),
            "config": to_dict(cfg),
        }
        folder.write_json("metrics.json", metrics)
        folder.mark_complete()
        pools_line = "pools (train/demo/test pairs): " + ", ".join(
            f"{name} {p['train']}/{p['demo']}/{p['test']}" for name, p in result.pools.items()
        )
        return JobResult(
            folder.path,
            f"ICRM model -> {folder.path / 'model'} ({tr.steps} steps, {tr.seconds:.0f} s)",
            metrics,
            [],
            [pools_line, written_line(folder, ["model", "metrics.json", LOG_FILE])],
        )


def run_bt_baseline(
    cfg: ICRMRunConfig,
    out: str | Path,
    max_pairs: int | None = 2400,
    overwrite: bool = False,
    pools: dict[str, dict[str, PairPool]] | None = None,
) -> JobResult:
    """Trains the BT baseline of the same backbone on the ICRM's training pools into the run folder `out`."""
    check_training_sources(cfg.episodes)
    with open_run(out, "icrm-bt-baseline", cfg, overwrite, extra_volatile=("eval", "elbo")) as folder:
        reused = finished_run(folder, f"BT baseline model -> {folder.path / 'model'}")
        if reused is not None:
            return reused
        folder.write_json("baseline.json", {"max_pairs": max_pairs, "train": to_dict(bt_train_config(cfg))})
        for name in (LOG_FILE, CHECKPOINT_DIR, *tracked_paths(cfg.train.report_to)):
            folder.claim(name)
        trainer, tokenizer, model_cfg, pairs = train_bt_baseline(cfg, folder.path, max_pairs=max_pairs, pools=pools)
        save_model(
            trainer.model,
            tokenizer,
            folder.claim("model"),
            model_cfg,
            {"baseline_for": "icrm", "train_pairs": len(pairs), "bf16": cfg.train.bf16},
        )
        metrics = {
            "pairs": len(pairs),
            "steps": trainer.result.steps,
            "seconds": round(trainer.result.seconds, 1),
            "final_terms": trainer.result.final_terms,
            "model_config": to_dict(model_cfg),
            "environment": environment_info(cfg.train.seed),
        }
        folder.write_json("metrics.json", metrics)
        folder.mark_complete()
        return JobResult(
            folder.path,
            f"BT baseline model -> {folder.path / 'model'} ({len(pairs)} pairs)",
            metrics,
            [],
            [written_line(folder, ["model", "metrics.json", LOG_FILE])],
        )


def run_icrm_eval(
    protocol: str, model_dir: str | Path, out: str | Path, cfg: ICRMRunConfig, overwrite: bool = False
) -> JobResult:
    """Runs protocol `protocol` (or "all") on a saved ICRM: <out>/<protocol>/metrics.json, per_pair.json (per-target
    figures, where the protocol gives them), report.md/html, plots/."""
    names = protocol_names(protocol)
    check_eval_settings(cfg.eval.n_values)
    config: dict[str, Any] = {"protocol": protocol, "model": str(model_dir), "config": to_dict(cfg)}
    volatile = ("config.train.progress", "config.data_dir", "config.embed_batch_size")
    with RunFolder.open(out, "icrm-eval", config, overwrite=overwrite, volatile=volatile) as folder:
        ctx = load_context(model_dir, cfg, folder.claim(EMBEDDINGS_DIR))
        rows: list[dict[str, Any]] = []
        all_metrics: dict[str, Any] = {}
        for name in names:
            folder.claim(name)
            metrics = PROTOCOLS.get(name).run(ctx)
            per_pair = metrics.pop("per_pair", None)
            if per_pair is not None:
                folder.write_json(f"{name}/per_pair.json", per_pair)
            metrics.update(
                {
                    "protocol": name,
                    "model": str(model_dir),
                    "bt_model": cfg.eval.bt_model,
                    "environment": environment_info(cfg.eval.seed),
                }
            )
            folder.write_json(f"{name}/metrics.json", metrics)
            protocol_report(name, metrics, folder)
            rows += protocol_rows(name, metrics)
            all_metrics[name] = metrics
        folder.mark_complete()
        return JobResult(
            folder.path,
            f"rewardsmith icrm eval -> {out}",
            all_metrics,
            rows,
            [written_line(folder, [f"{n}/report.md" for n in names])],
        )
