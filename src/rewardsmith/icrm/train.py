"""Episode training loop of the in-context reward model.

Set mode with a frozen backbone embeds every training pair once (cached under run_dir/embeddings) and
trains the context encoder and heads on episodes built from the cache; concat mode encodes each episode's
serialised context live. Episode batch `step` is a pure function of (seed, step), so a run killed at any
point and started again with the same arguments resumes from its last atomic checkpoint and ends with the
same weights (the Trainer's contract). log.jsonl gets one line per `log_every` steps.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.config import save_yaml, to_dict
from rewardsmith.data.collate import PairEncoder
from rewardsmith.errors import CheckpointError, ConfigError
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.episodes import EpisodeSampler, PairPool, load_pools
from rewardsmith.icrm.features import (
    PoolEmbeddings,
    concat_episode_batch,
    concat_scores,
    embed_pool,
    set_episode_tensors,
    set_scores,
)
from rewardsmith.icrm.model import BetaRewardModel, build_beta_reward_model, save_beta_reward_model
from rewardsmith.losses.beta_elbo import beta_elbo_loss
from rewardsmith.train.checkpoint import atomic_write_json, load_checkpoint, save_checkpoint
from rewardsmith.train.trainer import progress_bar, truncate_log

CHECKPOINT_FILE = "checkpoint.pt"


@dataclass
class ICRMTrainResult:
    steps: int
    episodes_seen: int
    seconds: float
    resumed_from_step: int
    model_dir: Path
    final_terms: dict[str, float] = field(default_factory=dict)
    pools: dict[str, dict[str, int]] = field(default_factory=dict)


def default_device() -> torch.device:
    """The first CUDA device when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def embedding_settings(cfg: ICRMRunConfig) -> str:
    m = cfg.model
    return f"{m.backbone}|{m.pooling}|{m.max_length}|{m.min_prompt_tokens}|{m.num_layers}|{m.bf16}"


def pair_encoder(tokenizer: Any, cfg: ICRMRunConfig) -> PairEncoder:
    return PairEncoder(tokenizer, cfg.model.max_length, cfg.model.min_prompt_tokens)


def embed_pools(
    model: BetaRewardModel,
    tokenizer: Any,
    pools: dict[str, PairPool],
    cfg: ICRMRunConfig,
    cache_dir: Path | None,
    progress: bool,
) -> dict[str, PoolEmbeddings]:
    encoder = pair_encoder(tokenizer, cfg)
    return {
        name: embed_pool(
            model,
            encoder,
            pool,
            cfg.train.embed_batch_size,
            cfg.model.bf16,
            progress,
            cache_dir,
            embedding_settings(cfg),
        )
        for name, pool in pools.items()
    }


class ICRMTrainer:
    """Trains a BetaRewardModel on episodes. Call fit()."""

    def __init__(
        self, cfg: ICRMRunConfig, run_dir: str | Path, pools: dict[str, dict[str, PairPool]] | None = None
    ):
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        if cfg.model.mode == "set" and not cfg.model.freeze_backbone:
            raise ConfigError(
                "set-mode training reads cached embeddings: set model.freeze_backbone: true "
                "(concat mode fine-tunes the backbone)"
            )
        self.model, self.tokenizer = build_beta_reward_model(cfg.model, cfg.train.seed)
        self.model.to(default_device())
        self.pools = pools if pools is not None else load_pools(cfg.episodes, cfg.data_dir)
        self.train_pools = {name: parts["train"] for name, parts in self.pools.items()}
        self.sampler = EpisodeSampler(self.train_pools, cfg.episodes, cfg.train.seed)

    def _optimizer(self) -> torch.optim.Optimizer:
        head = self.model.head_parameters()
        head_ids = {id(p) for p in head}
        body = [p for p in self.model.parameters() if p.requires_grad and id(p) not in head_ids]
        groups: list[dict[str, Any]] = [{"params": head, "lr": self.cfg.train.lr}]
        if body:
            groups.append({"params": body, "lr": self.cfg.train.backbone_lr})
        return torch.optim.AdamW(groups, weight_decay=self.cfg.train.weight_decay)

    def _scheduler(self, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
        total = self.cfg.train.steps
        warmup = int(self.cfg.train.warmup_ratio * total)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / (warmup + 1)
            return max(0.0, (total - step) / max(1, total - warmup))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def fit(self) -> ICRMTrainResult:
        cfg, tc = self.cfg, self.cfg.train
        if tc.steps < 1 or tc.episodes_per_step < 1:
            raise ConfigError("train.steps and train.episodes_per_step must be >= 1")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        save_yaml(cfg, self.run_dir / "config.yaml")
        random.seed(tc.seed)
        torch.manual_seed(tc.seed)
        tables: dict[str, PoolEmbeddings] = {}
        encoder = pair_encoder(self.tokenizer, cfg)
        if cfg.model.mode == "set":
            tables = embed_pools(
                self.model, self.tokenizer, self.train_pools, cfg, self.run_dir / "embeddings", tc.progress
            )
        optimizer = self._optimizer()
        scheduler = self._scheduler(optimizer)
        ckpt = self.run_dir / CHECKPOINT_FILE
        start = self._restore(load_checkpoint(ckpt), optimizer, scheduler) if ckpt.exists() else 0
        log_path = self.run_dir / "log.jsonl"
        truncate_log(log_path, start)
        self.model.train()
        t0 = time.perf_counter()
        seen = 0
        terms: dict[str, float] = {}
        with progress_bar(tc.progress, tc.steps, start) as bar, log_path.open("a") as log:
            task = bar.add_task("icrm", total=tc.steps, completed=start) if bar else None
            for step in range(start, tc.steps):
                episodes = self.sampler.batch(step, tc.episodes_per_step)
                if cfg.model.mode == "set":
                    tensors = set_episode_tensors(episodes, tables)
                    scores, labels = set_scores(self.model, tensors), tensors["labels"]
                else:
                    batch, labels = concat_episode_batch(episodes, self.train_pools, encoder)
                    scores = concat_scores(self.model, batch)
                n = torch.tensor([float(e.n_demos) for e in episodes])
                result = beta_elbo_loss(
                    scores.u_first,
                    scores.u_second,
                    scores.s_first,
                    scores.s_second,
                    n,
                    labels,
                    tc.kl_schedule,
                    tc.kl_base,
                    tc.kl_scale,
                )
                optimizer.zero_grad(set_to_none=True)
                result.total.backward()
                if tc.max_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(
                        [p for p in self.model.parameters() if p.requires_grad], tc.max_grad_norm
                    )
                optimizer.step()
                scheduler.step()
                seen += len(episodes)
                terms = {k: round(v, 6) for k, v in result.terms.items()}
                done = step + 1
                if done % tc.log_every == 0 or done == tc.steps:
                    elapsed = time.perf_counter() - t0
                    log.write(
                        json.dumps(
                            {
                                "step": done,
                                "lr": scheduler.get_last_lr()[0],
                                "mean_n": float(n.mean()),
                                "episodes_per_s": round(seen / max(elapsed, 1e-9), 2),
                                **terms,
                            }
                        )
                        + "\n"
                    )
                    log.flush()
                if bar is not None and task is not None:
                    bar.update(task, completed=done, description=f"icrm loss {terms['total']:.3f}")
                if tc.checkpoint_every and done % tc.checkpoint_every == 0 and done < tc.steps:
                    self._save(optimizer, scheduler, done)
        seconds = time.perf_counter() - t0
        model_dir = save_beta_reward_model(
            self.model, self.tokenizer, self.run_dir / "model", cfg.model, {"train_steps": tc.steps}
        )
        ckpt.unlink(missing_ok=True)
        sizes = {
            name: {part: len(pool) for part, pool in parts.items()} for name, parts in self.pools.items()
        }
        result_obj = ICRMTrainResult(tc.steps, seen, seconds, start, model_dir, terms, sizes)
        atomic_write_json(
            self.run_dir / "train.json",
            {
                "steps": tc.steps,
                "episodes_seen": seen,
                "seconds": round(seconds, 1),
                "resumed_from_step": start,
                "final_terms": terms,
                "pools": sizes,
                "config": to_dict(cfg),
            },
        )
        return result_obj

    def _save(self, optimizer: Any, scheduler: Any, next_step: int) -> None:
        state = {
            "next_step": next_step,
            "model": self.model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
            "numpy_rng": np.random.get_state(),
            "train_config": to_dict(self.cfg.train),
        }
        save_checkpoint(self.run_dir / CHECKPOINT_FILE, state)

    def _restore(self, state: dict[str, Any], optimizer: Any, scheduler: Any) -> int:
        saved = state.get("train_config", {})
        for key in ("seed", "steps", "episodes_per_step", "lr", "kl_schedule", "kl_base"):
            if key in saved and saved[key] != getattr(self.cfg.train, key):
                raise CheckpointError(
                    f"{self.run_dir / CHECKPOINT_FILE}: saved with {key}={saved[key]!r}, "
                    f"now {getattr(self.cfg.train, key)!r}; use a new --out or the same settings"
                )
        self.model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])
        return int(state["next_step"])


def train_icrm(
    cfg: ICRMRunConfig, run_dir: str | Path, pools: dict[str, dict[str, PairPool]] | None = None
) -> ICRMTrainResult:
    """Trains an ICRM and writes run_dir/{config.yaml, log.jsonl, train.json, model/, embeddings/}."""
    return ICRMTrainer(cfg, run_dir, pools).fit()
