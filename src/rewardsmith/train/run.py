"""`rewardsmith train`: load data, split, train a reward model, evaluate it, write a run directory.

The run directory holds config.yaml (resolved), log.jsonl, model/, metrics.json, report.md/.html and
plots/. Run the same command again after a kill and training resumes from the last checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.config import RunConfig, save_yaml, to_dict
from rewardsmith.data.registry import load_configured
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.splits import split_pairs
from rewardsmith.environment import environment_info
from rewardsmith.errors import ConfigError
from rewardsmith.evaluate.protocols import evaluate_pairs, evaluate_rmbench, has_rmbench_variants
from rewardsmith.models import build_reward_model, save_reward_model
from rewardsmith.train.checkpoint import atomic_write_json
from rewardsmith.train.trainer import Trainer


@dataclass
class PreparedData:
    train: list[PreferencePair]
    eval_sets: dict[str, list[PreferencePair]]
    summaries: dict[str, Any]


def prepare_data(cfg: RunConfig) -> PreparedData:
    """Training pairs and named held-out sets. The training source is split by a hash of the first human
    turn; its held-out part is the `<name> (held-out)` set, and pairs of any eval set that share a
    conversation with a training pair are removed, so no metric is computed on training data."""
    source = load_configured(cfg.data.train, cfg.data.data_dir)
    parts = split_pairs(source.pairs, {"train": cfg.data.train_fraction, "heldout": 1.0 - cfg.data.train_fraction})
    train = parts["train"][: cfg.data.train_pairs] if cfg.data.train_pairs else parts["train"]
    if not train:
        raise ConfigError(f"no training pairs left from {cfg.data.train.name}")
    train_keys = {p.group_key() for p in parts["train"]}
    eval_sets: dict[str, list[PreferencePair]] = {}
    summaries: dict[str, Any] = {"train": {**source.summary(), "used": len(train)}}
    if parts["heldout"]:
        eval_sets[f"{cfg.data.train.name} (held-out)"] = parts["heldout"][: cfg.data.eval_pairs or None]
    for ds in cfg.data.eval:
        loaded = load_configured(ds, cfg.data.data_dir)
        kept = [p for p in loaded.pairs if p.group_key() not in train_keys]
        name = ds.name if ds.split is None else f"{ds.name}:{ds.split}"
        eval_sets[name] = kept[: cfg.data.eval_pairs or None]
        summaries[name] = {**loaded.summary(), "overlap_removed": len(loaded.pairs) - len(kept),
                           "used": len(eval_sets[name])}
    return PreparedData(train, eval_sets, summaries)


def evaluate_sets(model: Any, tokenizer: Any, cfg: RunConfig, eval_sets: dict[str, list[PreferencePair]],
                  plots_dir: Path) -> dict[str, Any]:
    """The accuracy block (and RM-Bench matrix where available) for every named set."""
    results: dict[str, Any] = {}
    plots_dir.mkdir(parents=True, exist_ok=True)
    m = cfg.model
    for name, pairs in eval_sets.items():
        if not pairs:
            results[name] = {"n": 0}
            continue
        slug = "".join(c if c.isalnum() else "_" for c in name).strip("_")
        block, _ = evaluate_pairs(model, tokenizer, pairs, m.max_length, m.min_prompt_tokens,
                                  cfg.train.eval_batch_size, cfg.train.bf16,
                                  plot_path=plots_dir / f"reliability_{slug}.png", progress=cfg.train.progress)
        if has_rmbench_variants(pairs):
            block["rmbench"] = evaluate_rmbench(model, tokenizer, pairs, m.max_length, m.min_prompt_tokens,
                                                cfg.train.eval_batch_size, cfg.train.bf16)
        results[name] = block
    return results


def run_training(cfg: RunConfig, out_dir: str | Path) -> dict[str, Any]:
    """Trains and evaluates as configured; returns the metrics written to out_dir/metrics.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_yaml(cfg, out / "config.yaml")
    data = prepare_data(cfg)
    model, tokenizer = build_reward_model(cfg.model, seed=cfg.train.seed)
    trainer = Trainer(model, tokenizer, data.train, cfg.train, cfg.model, out)
    result = trainer.fit()
    model = trainer.model
    if cfg.save_model:
        save_reward_model(model, tokenizer, out / "model", cfg.model,
                          extra={"trained_on": cfg.data.train.name, "train_pairs": len(data.train)})
    metrics: dict[str, Any] = {
        "train": {"dataset": cfg.data.train.name, "pairs": len(data.train), "steps": result.steps,
                  "seconds": round(result.seconds, 2), "pairs_per_s": round(result.pairs_per_second, 3),
                  "resumed_from_step": result.resumed_from_step, "final": result.final_terms},
        "eval": evaluate_sets(model, tokenizer, cfg, data.eval_sets, out / "plots"),
        "data": data.summaries,
        "environment": environment_info(cfg.train.seed),
        "config": to_dict(cfg),
    }
    atomic_write_json(out / "metrics.json", metrics)
    write_training_report(metrics, out)
    return metrics


def eval_table(eval_results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per evaluated set: accuracy, length rule, length-controlled accuracy, with CIs."""
    rows = []
    for name, b in eval_results.items():
        if not b.get("n"):
            continue
        row = {"dataset": name, "n": b["n"], "accuracy": _ci(b, "accuracy"),
               "length rule": _ci(b, "length_rule_accuracy"),
               "length-controlled": _ci(b, "length_controlled_accuracy"),
               "prefers longer %": f"{b['prefers_longer_rate']:.1f}", "ECE": f"{b['ece']:.3f}"}
        if "rmbench" in b:
            rb = b["rmbench"]
            row["RM-Bench easy/normal/hard"] = f"{rb['easy']:.1f} / {rb['normal']:.1f} / {rb['hard']:.1f}"
        rows.append(row)
    return rows


def _ci(block: dict[str, Any], key: str) -> str:
    value, ci = block.get(key), block.get(f"{key}_ci")
    if value is None:
        return "n/a"
    if ci and None not in ci:
        return f"{value:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"
    return f"{value:.1f}"


def write_training_report(metrics: dict[str, Any], out: Path) -> None:
    from rewardsmith.report.plots import Series, plot_lines_with_ci
    from rewardsmith.report.render import markdown_table, render_report

    figures = []
    log = out / "log.jsonl"
    if log.exists():
        import json

        rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        if rows:
            key = "total" if "total" in rows[0] else "bt"
            curve = Series("training loss", [r["step"] for r in rows], [r.get(key, float("nan")) for r in rows])
            path = plot_lines_with_ci([curve],
                                      out / "plots" / "training_loss.png", xlabel="step", ylabel="loss",
                                      title="training loss")
            figures.append((path, "training loss per step"))
    figures += [(p, p.stem.replace("_", " ")) for p in sorted((out / "plots").glob("reliability_*.png"))]
    t = metrics["train"]
    intro = (f"Trained on {t['pairs']} pairs of `{t['dataset']}` for {t['steps']} steps "
             f"({t['pairs_per_s']} pairs/s). Accuracies in % with 95% bootstrap CIs over pairs; the length rule "
             "(longer response wins) and the length-controlled accuracy are shown beside every accuracy.\n\n"
             + markdown_table(eval_table(metrics["eval"])))
    summary = {"train": t, "eval": metrics["eval"]}
    render_report(summary, out, title=f"rewardsmith train: {out.name}", figures=figures, intro=intro)


def summarise_for_console(metrics: dict[str, Any]) -> Sequence[dict[str, Any]]:
    return eval_table(metrics["eval"])
