"""The static baseline: a Bradley-Terry reward model of the same backbone, trained with rewardsmith's Trainer
on the training part of the same sources (each under its default labelling, nothing flipped), so its
held-out pairs are exactly the ICRM's."""

from __future__ import annotations

import random
from pathlib import Path

from rewardsmith.config import ModelConfig, TrainConfig, save_yaml, to_dict
from rewardsmith.data.schema import PreferencePair
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.episodes import PairPool, load_pools
from rewardsmith.models import build_reward_model, save_reward_model
from rewardsmith.train.checkpoint import atomic_write_json
from rewardsmith.train.trainer import Trainer


def bt_model_config(cfg: ICRMRunConfig) -> ModelConfig:
    m = cfg.model
    return ModelConfig(
        backbone=m.backbone,
        pooling=m.pooling,
        max_length=m.max_length,
        min_prompt_tokens=m.min_prompt_tokens,
        num_layers=m.num_layers,
        dropout=m.dropout,
    )


def baseline_pairs(
    pools: dict[str, dict[str, PairPool]], max_pairs: int | None, seed: int
) -> list[PreferencePair]:
    """Training pairs of every source under its stored labelling, shuffled (seeded), at most max_pairs."""
    pairs = [p for name in sorted(pools) for p in pools[name]["train"].pairs]
    random.Random(seed).shuffle(pairs)
    return pairs[:max_pairs] if max_pairs else pairs


def train_bt_baseline(
    cfg: ICRMRunConfig,
    run_dir: str | Path,
    train_cfg: TrainConfig | None = None,
    max_pairs: int | None = 2400,
    pools: dict[str, dict[str, PairPool]] | None = None,
) -> Path:
    """Trains the BT baseline into run_dir (log.jsonl, checkpoint.pt while running, model/).

    Returns the model folder."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    pools = pools if pools is not None else load_pools(cfg.episodes, cfg.data_dir)
    pairs = baseline_pairs(pools, max_pairs, cfg.train.seed)
    model_cfg = bt_model_config(cfg)
    tc = train_cfg or TrainConfig(
        epochs=1.0,
        batch_size=16,
        lr=3e-5,
        bf16=cfg.model.bf16,
        seed=cfg.train.seed,
        progress=cfg.train.progress,
    )
    save_yaml(tc, run_dir / "train_config.yaml")
    model, tokenizer = build_reward_model(model_cfg, tc.seed)
    trainer = Trainer(model, tokenizer, pairs, tc, model_cfg, run_dir)
    result = trainer.fit()
    out = save_reward_model(
        trainer.model,
        tokenizer,
        run_dir / "model",
        model_cfg,
        {"baseline_for": "icrm", "train_pairs": len(pairs)},
    )
    atomic_write_json(
        run_dir / "train.json",
        {
            "pairs": len(pairs),
            "steps": result.steps,
            "seconds": round(result.seconds, 1),
            "final_terms": result.final_terms,
            "model_config": to_dict(model_cfg),
        },
    )
    return out
