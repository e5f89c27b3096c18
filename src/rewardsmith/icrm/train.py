"""Training an in-context reward model through the shared Trainer.

Set mode (frozen backbone) embeds every training pair once (cached under run_dir/embeddings) and trains the
context encoder and heads on episodes built from the cache; concat mode encodes each episode's serialised
context live and fine-tunes the backbone. Episode batch `b` is a pure function of (seed, b), so the
Trainer's exact resume holds: a run killed at any point and started again ends with the same weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rewardsmith.data.templates import TextEncoder, encoder_for
from rewardsmith.errors import ConfigError
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.episodes import Episode, EpisodeSampler, PairPool, load_pools
from rewardsmith.icrm.features import (
    PoolEmbeddings,
    concat_episode_batch,
    embed_pool,
    embedding_settings,
    set_episode_tensors,
)
from rewardsmith.icrm.protocols.context import check_training_sources
from rewardsmith.losses.base import LossResult
from rewardsmith.losses.beta_elbo import beta_elbo_loss
from rewardsmith.models.beta import BetaRewardModel
from rewardsmith.models.factory import build_model
from rewardsmith.train.objectives import StepInfo
from rewardsmith.train.trainer import PlannedBatch, StepHook, Trainer, TrainResult

EMBEDDINGS_DIR = "embeddings"


class EpisodeBatchPlan:
    """Micro-batch b: `batch_size` episodes sampled for (seed, b), as set-mode tensors from cached embeddings
    or as concat-mode token batches. Endless: the run's length is train.max_steps."""

    natural_batches: int | None = None

    def __init__(
        self,
        sampler: EpisodeSampler,
        batch_size: int,
        mode: str,
        tables: dict[str, PoolEmbeddings] | None = None,
        pools: dict[str, PairPool] | None = None,
        encoder: TextEncoder | None = None,
    ):
        self.sampler = sampler
        self.batch_size = batch_size
        self.mode = mode
        self.tables = tables
        self.pools = pools
        self.encoder = encoder

    def episodes(self, index: int, process_index: int = 0, num_processes: int = 1) -> list[Episode]:
        return self.sampler.batch(index, self.batch_size)[process_index::num_processes]

    def batch(self, index: int, process_index: int = 0, num_processes: int = 1) -> PlannedBatch:
        episodes = self.episodes(index, process_index, num_processes)
        if self.mode == "set":
            assert self.tables is not None
            tensors = set_episode_tensors(episodes, self.tables)
        else:
            assert self.pools is not None and self.encoder is not None
            tensors, labels = concat_episode_batch(episodes, self.pools, self.encoder)
            tensors["labels"] = labels
            tensors["n_demos"] = torch.tensor([float(e.n_demos) for e in episodes])
        return PlannedBatch(tensors, len(episodes))


class ElboObjective:
    """The Beta negative ELBO of the model's scores on an episode batch (rewardsmith.losses.beta_elbo)."""

    def __init__(self, kl_schedule: str = "inverse", kl_base: float = 0.1, kl_scale: float = 8.0):
        self.kl_schedule, self.kl_base, self.kl_scale = kl_schedule, kl_base, kl_scale

    def __call__(self, model: Any, batch: dict[str, torch.Tensor], info: StepInfo) -> LossResult:
        scores = model(batch)
        result = beta_elbo_loss(
            scores.u_first,
            scores.u_second,
            scores.s_first,
            scores.s_second,
            batch["n_demos"],
            batch["labels"],
            self.kl_schedule,
            self.kl_base,
            self.kl_scale,
        )
        result.terms["mean_n"] = float(batch["n_demos"].float().mean())
        return result


@dataclass
class ICRMTrainResult:
    train: TrainResult
    model: BetaRewardModel
    tokenizer: Any
    pools: dict[str, dict[str, int]] = field(default_factory=dict)


def embed_pools(
    model: BetaRewardModel, tokenizer: Any, pools: dict[str, PairPool], cfg: ICRMRunConfig, cache_dir: Path | None
) -> dict[str, PoolEmbeddings]:
    encoder = encoder_for(tokenizer, cfg.model)
    settings = embedding_settings(cfg.model, cfg.train.bf16)
    return {
        name: embed_pool(
            model, encoder, pool, cfg.embed_batch_size, cfg.train.bf16, cfg.train.progress, cache_dir, settings
        )
        for name, pool in pools.items()
    }


def train_icrm(
    cfg: ICRMRunConfig,
    run_dir: str | Path,
    pools: dict[str, dict[str, PairPool]] | None = None,
    on_step: Sequence[StepHook] = (),
) -> ICRMTrainResult:
    """Trains an ICRM into run_dir (log.jsonl, checkpoint/ while running, embeddings/ in set mode).

    pools: {source: {"train"|"demo"|"test": PairPool}} (default: loaded from cfg.episodes). Returns the trained
    model (on the training device), its tokenizer and the Trainer's result; saving is the caller's."""
    if cfg.train.max_steps is None:
        raise ConfigError("ICRM training runs train.max_steps optimiser steps: set it")
    if cfg.train.debias.kind != "none":
        raise ConfigError(f"train.debias.kind {cfg.train.debias.kind!r} applies to pair training, not ICRM episodes")
    check_training_sources(cfg.episodes)
    run_dir = Path(run_dir)
    model, tokenizer = build_model(cfg.model, cfg.train.seed)
    pools = pools if pools is not None else load_pools(cfg.episodes, cfg.data_dir)
    train_pools = {name: parts["train"] for name, parts in pools.items()}
    sampler = EpisodeSampler(train_pools, cfg.episodes, cfg.train.seed)
    if cfg.model.mode == "set":
        from rewardsmith.evaluate.scoring import default_device

        model.to(default_device())
        tables = embed_pools(model, tokenizer, train_pools, cfg, run_dir / EMBEDDINGS_DIR)
        plan = EpisodeBatchPlan(sampler, cfg.train.batch_size, "set", tables=tables)
    else:
        encoder = encoder_for(tokenizer, cfg.model)
        plan = EpisodeBatchPlan(sampler, cfg.train.batch_size, "concat", pools=train_pools, encoder=encoder)
    objective = ElboObjective(cfg.elbo.kl_schedule, cfg.elbo.kl_base, cfg.elbo.kl_scale)
    trainer = Trainer(model, plan, cfg.train, run_dir, objective, on_step)
    result = trainer.fit()
    sizes = {name: {part: len(pool) for part, pool in parts.items()} for name, parts in pools.items()}
    return ICRMTrainResult(result, trainer.model, tokenizer, sizes)
