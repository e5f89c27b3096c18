"""What every ICRM protocol shares: the loaded model (and optional BT baseline), the training run's held-out
split, embedding caches, and scoring of episodes.

Targets are always the held-out `test` part of the training run's hash split; demonstrations come from its
`demo` part, or from demo + train where the demo part holds fewer pairs than the largest N.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.config import ICRMModelConfig, load_yaml
from rewardsmith.data.collate import PairEncoder
from rewardsmith.data.schema import stable_hash
from rewardsmith.errors import ConfigError
from rewardsmith.evaluate.metrics import pairwise_accuracy
from rewardsmith.evaluate.scoring import default_device, score_pairs
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.episodes import Episode, PairPool, Standard, load_pools, target_episode
from rewardsmith.icrm.features import (
    PoolEmbeddings,
    concat_episode_batch,
    embed_pool,
    embedding_settings,
    pool_fingerprint,
    set_episode_tensors,
    to_numpy,
)
from rewardsmith.models.beta import BetaRewardModel
from rewardsmith.models.factory import load_model

PKU = "pku-saferlhf/harmless"
MORAL = "moralchoice/low"
RESPOND, REFUSE = "rm-bench/safety-response", "rm-bench/safety-refuse"
RMBENCH_SUBSETS = ("rm-bench/chat", "rm-bench/code", REFUSE, RESPOND)


@dataclass
class EvalContext:
    """A loaded ICRM (and optional BT baseline), the run's split settings and caches shared by protocols."""

    cfg: ICRMRunConfig
    model: BetaRewardModel
    tokenizer: Any
    model_cfg: ICRMModelConfig
    bf16: bool
    cache_dir: Path | None
    bt: tuple[Any, Any] | None = None
    _pools: dict[str, dict[str, PairPool]] = field(default_factory=dict)
    _emb: dict[str, PoolEmbeddings] = field(default_factory=dict)
    _bt_scores: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def encoder(self) -> PairEncoder:
        return PairEncoder(self.tokenizer, self.model_cfg.max_length, self.model_cfg.min_prompt_tokens)

    def pools(self, source: str) -> dict[str, PairPool]:
        if source not in self._pools:
            self._pools[source] = load_pools(self.cfg.episodes, self.cfg.data_dir, [source])[source]
        return self._pools[source]

    def demo_pool(self, source: str) -> PairPool:
        """The demo part, or demo + train when the demo part is smaller than the largest N evaluated."""
        parts = self.pools(source)
        demo = parts["demo"]
        if len(demo) > max(self.cfg.eval.n_values):
            return demo
        return PairPool(f"{source}#demo+train", demo.pairs + parts["train"].pairs,
                        {k: np.concatenate([demo.labellings[k], parts["train"].labellings[k]])
                         for k in demo.labellings})

    def test_pool(self, source: str) -> PairPool:
        test = self.pools(source)["test"]
        limit = self.cfg.eval.max_test_pairs
        if limit and len(test) > limit:
            test = PairPool(test.name, test.pairs[:limit], {k: v[:limit] for k, v in test.labellings.items()})
        return test

    def embeddings(self, pool: PairPool) -> PoolEmbeddings:
        key = pool_fingerprint(pool, "")
        if key not in self._emb:
            self._emb[key] = embed_pool(self.model, self.encoder, pool, self.cfg.embed_batch_size, self.bf16,
                                        self.cfg.train.progress, self.cache_dir,
                                        embedding_settings(self.model_cfg, self.bf16))
        return self._emb[key]

    @torch.inference_mode()
    def score(self, episodes: Sequence[Episode], target: PairPool, demos: PairPool) -> dict[str, np.ndarray]:
        """ICRM scores of episodes whose targets index `target` and demonstrations index `demos` (episode
        standards name target.name). Returns to_numpy() arrays (B,)."""
        self.model.eval()
        device = next(self.model.parameters()).device
        parts: list[dict[str, np.ndarray]] = []
        if self.model.mode == "set":
            tables = {target.name: self.embeddings(target)}
            demo_tables = {target.name: self.embeddings(demos)}
            for k in range(0, len(episodes), 256):
                tensors = set_episode_tensors(episodes[k: k + 256], tables, demo_tables)
                parts.append(to_numpy(self.model({n: v.to(device) for n, v in tensors.items()})))
        else:
            for k in range(0, len(episodes), 16):
                batch, _ = concat_episode_batch(episodes[k: k + 16], {target.name: target}, self.encoder,
                                                {target.name: demos})
                parts.append(to_numpy(self.model({n: v.to(device) for n, v in batch.items()})))
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]} if parts else {}

    def bt_scores(self, pool: PairPool) -> tuple[np.ndarray, np.ndarray] | None:
        """BT rewards of the pool's stored chosen (P,) and rejected (P,) responses (None without a BT model)."""
        if self.bt is None:
            return None
        key = pool_fingerprint(pool, "")
        if key not in self._bt_scores:
            model, tokenizer = self.bt
            c, r = score_pairs(model, tokenizer, pool.pairs, self.model_cfg.max_length,
                               self.model_cfg.min_prompt_tokens, bf16=self.bf16)
            self._bt_scores[key] = np.stack([c, r])
        c, r = self._bt_scores[key]
        return c, r

    def bt_margins(self, pool: PairPool) -> np.ndarray | None:
        """BT margins r(chosen) - r(rejected) of the pool's stored pairs (None without a BT model)."""
        scores = self.bt_scores(pool)
        return None if scores is None else scores[0] - scores[1]

    def rng(self, *keys: object) -> np.random.Generator:
        return np.random.default_rng([self.cfg.eval.seed, int(stable_hash(repr(keys))[:8], 16)])

    def accuracy(self, margins: np.ndarray) -> dict[str, Any]:
        """Pairwise accuracy (%) of margins with its bootstrap CI: {"value", "low", "high", "n"}."""
        return pairwise_accuracy(margins, n_boot=self.cfg.eval.n_boot).to_dict()


def oriented(scores: dict[str, np.ndarray], labels: np.ndarray) -> np.ndarray:
    """Margins u_first - u_second turned so that positive means the labelled side wins."""
    d = scores["u_first"] - scores["u_second"]
    return np.where(labels > 0.5, d, -d)


def episodes_for(target: PairPool, demos: PairPool, standard: Standard, n: int,
                 rng: np.random.Generator) -> list[Episode]:
    """One soft-labelled episode per target pair with n demonstrations of the standard."""
    return [target_episode(target, demos, standard, i, n, rng, first_is_chosen=True, soft_label=True)
            for i in range(len(target))]


def renamed(pool: PairPool, name: str) -> PairPool:
    return PairPool(name, pool.pairs, pool.labellings)


def load_context(model_dir: str | Path, cfg: ICRMRunConfig, cache_dir: Path | None = None) -> EvalContext:
    """Loads the ICRM (and cfg.eval.bt_model); the split settings come from the training run's config.yaml
    beside the model folder when present, so held-out pairs are exactly the training run's."""
    model_dir = Path(model_dir)
    model, tokenizer, meta = load_model(model_dir)
    if meta["model_type"] != "icrm":
        raise ConfigError(f"{model_dir}: a scalar reward model; `icrm eval` needs an in-context (ICRM) model")
    model.to(default_device())
    run_cfg_path = model_dir.parent / "config.yaml"
    if run_cfg_path.exists():
        cfg.episodes = load_yaml(ICRMRunConfig, run_cfg_path).episodes
    bt = None
    if cfg.eval.bt_model:
        bt_model, bt_tok, bt_meta = load_model(cfg.eval.bt_model)
        if bt_meta["model_type"] != "reward":
            raise ConfigError(f"{cfg.eval.bt_model}: --bt-model must be a scalar reward model")
        bt = (bt_model.to(default_device()), bt_tok)
    return EvalContext(cfg, model, tokenizer, meta["model_config"], bool(meta.get("bf16", False)), cache_dir, bt)
