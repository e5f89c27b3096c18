"""The static baseline: a Bradley-Terry reward model of the same backbone, trained with the shared Trainer on
the training part of the same sources (each under its default labelling, nothing flipped), so its held-out
pairs are exactly the ICRM's."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardsmith.config import ModelConfig, TrainConfig
from rewardsmith.data.schema import PreferencePair
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.episodes import PairPool, load_pools
from rewardsmith.icrm.protocols.context import check_training_sources
from rewardsmith.models.factory import build_reward_model
from rewardsmith.train.trainer import StepHook, Trainer, train_pairs


def bt_model_config(cfg: ICRMRunConfig) -> ModelConfig:
    """The ICRM's backbone settings as a scalar reward model's config (fine-tuned, not frozen)."""
    m = cfg.model
    return ModelConfig(
        backbone=m.backbone,
        pooling=m.pooling,
        max_length=m.max_length,
        min_prompt_tokens=m.min_prompt_tokens,
        num_layers=m.num_layers,
        dropout=m.dropout,
    )


def bt_train_config(cfg: ICRMRunConfig) -> TrainConfig:
    """One epoch of 16-pair steps at lr 3e-5, in the ICRM's precision and seed."""
    return TrainConfig(
        epochs=1.0,
        batch_size=16,
        lr=3e-5,
        bf16=cfg.train.bf16,
        seed=cfg.train.seed,
        progress=cfg.train.progress,
        report_to=cfg.train.report_to,
    )


def baseline_pairs(pools: dict[str, dict[str, PairPool]], max_pairs: int | None, seed: int) -> list[PreferencePair]:
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
    on_step: Sequence[StepHook] = (),
) -> tuple[Trainer, Any, ModelConfig, list[PreferencePair]]:
    """Trains the BT baseline into run_dir (log.jsonl, checkpoint/ while running). Returns (the finished
    Trainer, tokenizer, the model config, the training pairs); saving is the caller's."""
    check_training_sources(cfg.episodes)
    pools = pools if pools is not None else load_pools(cfg.episodes, cfg.data_dir)
    pairs = baseline_pairs(pools, max_pairs, cfg.train.seed)
    model_cfg = bt_model_config(cfg)
    tc = train_cfg or bt_train_config(cfg)
    model, tokenizer = build_reward_model(model_cfg, tc.seed)
    trainer = train_pairs(model, tokenizer, pairs, tc, model_cfg, run_dir, on_step=on_step)
    return trainer, tokenizer, model_cfg, pairs
