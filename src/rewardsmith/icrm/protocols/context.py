"""What every ICRM protocol shares: the loaded model (and optional BT baseline), the training run's split,
embedding caches, and scoring of episodes.

Targets are data no training saw. For a training source (one of the run's episodes.sources) they are its held-out
`test` part; for any other source, a hash-chosen share (eval.unseen_test_fraction) of its conversations. Either
way every target pair whose conversation (first human turn, PreferencePair.conversation_key) appears in the `train` part
of any training source is dropped and counted (`overlap_removed` in each protocol's metrics): sources overlap (37
of rm-bench/chat's 129 first turns are in hh-rlhf/helpful-base). The BT baseline trains on the same train parts,
so its targets are clean too. Demonstrations come from the `demo` part (from demo + train where the demo part of a
training source holds fewer pairs than the largest N; all of an unseen source outside its targets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.config import ICRMModelConfig, load_yaml
from rewardsmith.data.schema import stable_hash
from rewardsmith.data.templates import TextEncoder, encoder_for
from rewardsmith.errors import ConfigError
from rewardsmith.evaluate.metrics import pairwise_accuracy
from rewardsmith.evaluate.scoring import RewardScorer, default_device
from rewardsmith.icrm.config import EpisodeConfig, ICRMRunConfig
from rewardsmith.icrm.episodes import (
    Episode,
    PairPool,
    Standard,
    first_pairs,
    load_pools,
    read_source,
    target_episode,
    unseen_pools,
    without_conversations,
)
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
from rewardsmith.models.loading import load_reward_model

PKU = "pku-saferlhf/harmless"
MORAL = "moralchoice/low"
MATH = "math-500"
RESPOND, REFUSE = "rm-bench/safety-response", "rm-bench/safety-refuse"
RMBENCH_SUBSETS = ("rm-bench/chat", "rm-bench/code", REFUSE, RESPOND)
# What each protocol scores as data from outside training (out of distribution). Steerability is not listed: it
# measures following a demonstrated standard on pku-saferlhf, a training source, on its held-out test part.
UNSEEN_SOURCES: dict[str, tuple[str, ...]] = {
    "calibration": (MORAL,),
    "rmbench": RMBENCH_SUBSETS,
    "pareto": (RESPOND, REFUSE),
    "math500": (MATH,),
}
TRAINING_SOURCE_TARGETS, UNSEEN_SOURCE_TARGETS = "test part of a training source", "unseen source"


def dataset_family(source: str) -> str:
    """ "rm-bench" for "rm-bench/chat": the subsets of one family share prompts and authors."""
    return source.split("/", 1)[0]


def check_training_sources(cfg: EpisodeConfig) -> None:
    """One-line ConfigError when a training source belongs to a dataset family that a protocol scores as unseen
    data (rm-bench, moralchoice, math-500), unless cfg.allow_eval_sources."""
    if cfg.allow_eval_sources:
        return
    for source in cfg.sources:
        for protocol, evaluated in UNSEEN_SOURCES.items():
            if dataset_family(source) in {dataset_family(s) for s in evaluated}:
                raise ConfigError(
                    f"episodes.sources: {source} belongs to {dataset_family(source)}, which the "
                    f"{protocol} protocol evaluates as unseen data; drop it or set "
                    "episodes.allow_eval_sources: true"
                )


@dataclass
class EvalContext:
    """A loaded ICRM (and optional BT baseline), the run's split settings and caches shared by protocols.

    overlap_removed[source]: target pairs of `source` dropped because their conversation is in a training pair
    (filled by test_pool).
    """

    cfg: ICRMRunConfig
    model: BetaRewardModel
    tokenizer: Any
    model_cfg: ICRMModelConfig
    bf16: bool
    cache_dir: Path | None
    bt: RewardScorer | None = None
    overlap_removed: dict[str, int] = field(default_factory=dict)
    _pools: dict[str, dict[str, PairPool]] = field(default_factory=dict)
    _training_keys: set[str] | None = None
    _emb: dict[str, PoolEmbeddings] = field(default_factory=dict)
    _bt_scores: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def encoder(self) -> TextEncoder:
        return encoder_for(self.tokenizer, self.model_cfg)

    def is_training_source(self, source: str) -> bool:
        return source in self.cfg.episodes.sources

    def pools(self, source: str) -> dict[str, PairPool]:
        """{"train"|"demo"|"test": PairPool} of `source`: a training source split as in training; any other
        source with an empty train part and its conversations split into demonstrations and targets."""
        if source not in self._pools:
            episodes = self.cfg.episodes
            if self.is_training_source(source):
                self._pools[source] = load_pools(episodes, self.cfg.data_dir, [source])[source]
            else:
                self._pools[source] = unseen_pools(
                    source,
                    read_source(source, episodes, self.cfg.data_dir),
                    self.cfg.eval.unseen_test_fraction,
                    episodes.split_salt,
                )
        return self._pools[source]

    def training_keys(self) -> set[str]:
        """Conversations (group keys) of every training pair: the train parts of all training sources."""
        if self._training_keys is None:
            self._training_keys = {
                p.conversation_key() for source in self.cfg.episodes.sources for p in self.pools(source)["train"].pairs
            }
        return self._training_keys

    def demo_pool(self, source: str) -> PairPool:
        """The demo part, or demo + train when the demo part is smaller than the largest N evaluated."""
        parts = self.pools(source)
        demo, train = parts["demo"], parts["train"]
        if len(demo) > max(self.cfg.eval.n_values) or not len(train):
            return demo
        return PairPool(
            f"{source}#demo+train",
            demo.pairs + train.pairs,
            {k: np.concatenate([demo.labellings[k], train.labellings[k]]) for k in demo.labellings},
        )

    def test_pool(self, source: str) -> PairPool:
        """Target pairs of `source`: its test part without any conversation of a training pair (the number
        dropped goes to overlap_removed[source]), then its first eval.max_test_pairs pairs."""
        test, removed = without_conversations(self.pools(source)["test"], self.training_keys())
        self.overlap_removed[source] = removed
        return first_pairs(test, self.cfg.eval.max_test_pairs)

    def target_facts(self, *sources: str) -> dict[str, Any]:
        """What a protocol's metrics say about its targets: per source, the pairs dropped for sharing a
        conversation with training data, and whether the targets come from a training source's test part."""
        return {
            "overlap_removed": {s: self.overlap_removed.get(s, 0) for s in sources},
            "targets_from": {
                s: TRAINING_SOURCE_TARGETS if self.is_training_source(s) else UNSEEN_SOURCE_TARGETS for s in sources
            },
        }

    def embeddings(self, pool: PairPool) -> PoolEmbeddings:
        key = pool_fingerprint(pool, "")
        if key not in self._emb:
            self._emb[key] = embed_pool(
                self.model,
                self.encoder,
                pool,
                self.cfg.embed_batch_size,
                self.bf16,
                self.cfg.train.progress,
                self.cache_dir,
                embedding_settings(self.model_cfg, self.bf16),
            )
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
                tensors = set_episode_tensors(episodes[k : k + 256], tables, demo_tables)
                parts.append(to_numpy(self.model({n: v.to(device) for n, v in tensors.items()})))
        else:
            for k in range(0, len(episodes), 16):
                batch, _ = concat_episode_batch(
                    episodes[k : k + 16], {target.name: target}, self.encoder, {target.name: demos}
                )
                parts.append(to_numpy(self.model({n: v.to(device) for n, v in batch.items()})))
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]} if parts else {}

    def bt_scores(self, pool: PairPool) -> tuple[np.ndarray, np.ndarray] | None:
        """BT rewards of the pool's stored chosen (P,) and rejected (P,) responses (None without a BT model)."""
        if self.bt is None:
            return None
        key = pool_fingerprint(pool, "")
        if key not in self._bt_scores:
            c, r = self.bt.score_pairs(pool.pairs)
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
        """Pairwise accuracy (%) of margins with its bootstrap CI: {"estimate", "low", "high", "n"}."""
        return pairwise_accuracy(margins, n_boot=self.cfg.eval.n_boot).to_dict()


def oriented(scores: dict[str, np.ndarray], labels: np.ndarray) -> np.ndarray:
    """Margins u_first - u_second turned so that positive means the labelled side wins."""
    d = scores["u_first"] - scores["u_second"]
    return np.where(labels > 0.5, d, -d)


def episodes_for(
    target: PairPool, demos: PairPool, standard: Standard, n: int, rng: np.random.Generator
) -> list[Episode]:
    """One soft-labelled episode per target pair with n demonstrations of the standard."""
    return [
        target_episode(target, demos, standard, i, n, rng, first_is_chosen=True, soft_label=True)
        for i in range(len(target))
    ]


def renamed(pool: PairPool, name: str) -> PairPool:
    return PairPool(name, pool.pairs, pool.labellings)


def load_context(model_dir: str | Path, cfg: ICRMRunConfig, cache_dir: Path | None = None) -> EvalContext:
    """Loads the ICRM (and cfg.eval.bt_model); the split settings come from the training run's config.yaml
    beside the model folder when present, so held-out pairs are exactly the training run's."""
    model_dir = Path(model_dir)
    loaded = load_reward_model(model_dir)
    if not loaded.in_context or not isinstance(loaded.model, BetaRewardModel) or loaded.model_config is None:
        raise ConfigError(f"{model_dir}: a scalar reward model; `icrm eval` needs an in-context (ICRM) model")
    loaded.to(default_device())
    run_cfg_path = model_dir.parent / "config.yaml"
    if run_cfg_path.exists():
        cfg.episodes = load_yaml(ICRMRunConfig, run_cfg_path).episodes
    bt = None
    if cfg.eval.bt_model:  # any scalar reward model: rewardsmith's BT baseline, or one trained elsewhere
        baseline = load_reward_model(cfg.eval.bt_model)
        if baseline.in_context:
            raise ConfigError(f"{cfg.eval.bt_model}: --bt-model must be a scalar reward model")
        baseline.to(default_device())
        bt = RewardScorer(baseline.model, baseline.encoder(), baseline.pad_id, bf16=loaded.bf16)
    model_cfg = loaded.model_config
    assert isinstance(model_cfg, ICRMModelConfig)
    return EvalContext(cfg, loaded.model, loaded.tokenizer, model_cfg, loaded.bf16, cache_dir, bt)
