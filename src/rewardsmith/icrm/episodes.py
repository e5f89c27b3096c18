"""In-context episodes: a target pair plus N demonstrations drawn from the same preference standard.

A standard is (pool, labelling, flip rate p): the labelling says which response of each pair is preferred
(pku-saferlhf carries two, harmless and helpful, that disagree on about a quarter of pairs), and each
label of the standard is flipped with probability p (p = 1: the flipped standard, e.g. the unsafe response
marked chosen; 0 < p < 1: a mixture). Pools are split by a stable hash of the first human turn, so a
held-out conversation never appears in a training episode, as target or as demonstration.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rewardsmith.data.prepare import Part, conversations, split_parts, unseen_mask
from rewardsmith.data.registry import load_dataset
from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import ConfigError
from rewardsmith.icrm.config import EpisodeConfig

DEFAULT_LABELLING = "default"
SPLIT_PARTS = ("train", "demo", "test")


@dataclass
class PairPool:
    """Pairs of one source and split part, with one or more labellings.

    labellings[name]: (P,) bool, True where the stored `chosen` response is preferred under that labelling.
    """

    name: str
    pairs: list[PreferencePair]
    labellings: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.labellings:
            self.labellings = {DEFAULT_LABELLING: np.ones(len(self.pairs), dtype=bool)}

    def __len__(self) -> int:
        return len(self.pairs)


@dataclass(frozen=True)
class Standard:
    """A preference standard: `labelling` of `pool` with each label flipped with probability flip_rate."""

    pool: str
    labelling: str = DEFAULT_LABELLING
    flip_rate: float = 0.0


@dataclass(frozen=True)
class Demo:
    """Demonstration: pair `index` of the pool; chosen_wins says whether its stored chosen is shown as the
    preferred response."""

    index: int
    chosen_wins: bool


@dataclass(frozen=True)
class Episode:
    """A target pair presented as (first, second) with label P(first preferred), plus demonstrations.

    first_is_chosen: whether the first presented response is the pool's stored `chosen`.
    """

    standard: Standard
    target: int
    first_is_chosen: bool
    label: float
    demos: tuple[Demo, ...]

    @property
    def n_demos(self) -> int:
        return len(self.demos)


def pku_labellings(pairs: Sequence[PreferencePair]) -> dict[str, np.ndarray]:
    """harmless (the stored labelling of pku-saferlhf/harmless) and helpful (better_response_id)."""
    agree = np.array([bool(p.metadata.get("labels_agree", True)) for p in pairs], dtype=bool)
    return {"harmless": np.ones(len(pairs), dtype=bool), "helpful": agree}


def labellings_for(name: str, pairs: Sequence[PreferencePair]) -> dict[str, np.ndarray]:
    if name == "pku-saferlhf/harmless" and pairs and "labels_agree" in pairs[0].metadata:
        return pku_labellings(pairs)
    return {DEFAULT_LABELLING: np.ones(len(pairs), dtype=bool)}


def split_pool(name: str, pairs: Sequence[PreferencePair], cfg: EpisodeConfig) -> dict[str, PairPool]:
    """train / demo / test pools of one source, split by the hash of the first human turn."""
    train_fraction = 1.0 - cfg.test_fraction - cfg.demo_fraction
    if train_fraction <= 0:
        raise ConfigError("episodes.test_fraction + episodes.demo_fraction must be below 1")
    parts, _ = split_parts(
        pairs,
        {"train": Part(train_fraction), "demo": Part(cfg.demo_fraction), "test": Part(cfg.test_fraction)},
        salt=cfg.split_salt,
    )
    # A repeat of a training conversation with other punctuation or spacing (the hash split keys on the exact
    # text) is no held-out pair: it is dropped from the test part, as data/prepare.py drops it.
    seen = conversations(parts["train"])
    parts["test"] = [p for p, keep in zip(parts["test"], unseen_mask(parts["test"], seen), strict=True) if keep]
    return {part: PairPool(name, parts[part], labellings_for(name, parts[part])) for part in SPLIT_PARTS}


def read_source(name: str, cfg: EpisodeConfig, data_dir: str | Path | None = None) -> list[PreferencePair]:
    """Every pair of one source: its pairs file (cfg.source_files), or the files listed in cfg.source_splits
    (default: the adapter's default file), pooled, at most cfg.pairs_per_source from each file."""
    if name in cfg.source_files:
        return list(load_dataset("file", path=cfg.source_files[name], limit=cfg.pairs_per_source).pairs)
    pairs: list[PreferencePair] = []
    splits: list[str | None] = list(cfg.source_splits.get(name, [])) or [None]
    for split in splits:
        pairs.extend(load_dataset(name, data_dir=data_dir, split=split, limit=cfg.pairs_per_source).pairs)
    return pairs


def load_pools(
    cfg: EpisodeConfig,
    data_dir: str | Path | None = None,
    sources: Sequence[str] | None = None,
) -> dict[str, dict[str, PairPool]]:
    """{source: {"train"|"demo"|"test": PairPool}} for every configured source (or `sources`).

    The files of a source are pooled before the hash split (read_source), so one conversation never lands on
    two sides.
    """
    return {name: split_pool(name, read_source(name, cfg, data_dir), cfg) for name in sources or cfg.sources}


def unseen_pools(name: str, pairs: Sequence[PreferencePair], test_fraction: float, salt: str) -> dict[str, PairPool]:
    """train / demo / test pools of a source no training run reads: an empty train part, and demonstrations and
    targets split by the hash of the first human turn (a share test_fraction of the conversations are targets)."""
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"the target share of an unseen source must be in (0, 1), got {test_fraction}")
    parts, _ = split_parts(pairs, {"demo": Part(1.0 - test_fraction), "test": Part(test_fraction)}, salt=salt)
    parts["train"] = []
    return {part: PairPool(name, parts[part], labellings_for(name, parts[part])) for part in SPLIT_PARTS}


def without_conversations(pool: PairPool, keys: AbstractSet[str]) -> tuple[PairPool, int]:
    """The pool without every pair whose conversation (PreferencePair.conversation_key(), the first human turn) is in
    `keys`, its labellings kept aligned, and the number of pairs dropped."""
    keep = np.array(unseen_mask(pool.pairs, keys), dtype=bool)
    if keep.all():
        return pool, 0
    kept = PairPool(
        pool.name,
        [p for p, k in zip(pool.pairs, keep, strict=True) if k],
        {name: labels[keep] for name, labels in pool.labellings.items()},
    )
    return kept, int((~keep).sum())


def first_pairs(pool: PairPool, limit: int | None) -> PairPool:
    """The pool's first `limit` pairs (all of them when limit is None or not smaller than the pool)."""
    if not limit or len(pool) <= limit:
        return pool
    return PairPool(pool.name, pool.pairs[:limit], {k: v[:limit] for k, v in pool.labellings.items()})


def draw_demos(
    pool: PairPool, standard: Standard, n: int, rng: np.random.Generator, exclude: int | None = None
) -> tuple[Demo, ...]:
    """n distinct demonstrations of `standard` from `pool` (without `exclude`); each label flipped with
    probability standard.flip_rate."""
    size = len(pool) - (1 if exclude is not None and 0 <= exclude < len(pool) else 0)
    n = min(n, size)
    if n <= 0:
        return ()
    picks = rng.choice(size, size=n, replace=False)
    if exclude is not None:
        picks = np.where(picks >= exclude, picks + 1, picks)
    flips = rng.random(n) < standard.flip_rate
    preferred = pool.labellings[standard.labelling]
    return tuple(Demo(int(i), bool(preferred[i]) != bool(f)) for i, f in zip(picks, flips, strict=True))


def target_episode(
    pool: PairPool,
    demo_pool: PairPool,
    standard: Standard,
    target: int,
    n: int,
    rng: np.random.Generator,
    first_is_chosen: bool = True,
    soft_label: bool = True,
) -> Episode:
    """Episode with a given target: its label is P(first preferred) under the standard (soft: 1 - p or p;
    hard: a label sampled with the standard's flip rate). Demonstrations come from demo_pool."""
    chosen_preferred = bool(pool.labellings[standard.labelling][target])
    p = standard.flip_rate
    flipped = p if soft_label else float(rng.random() < p)  # P(this label is flipped)
    q_chosen = (1.0 - flipped) if chosen_preferred else flipped
    label = q_chosen if first_is_chosen else 1.0 - q_chosen
    exclude = target if demo_pool is pool else None
    return Episode(standard, target, first_is_chosen, float(label), draw_demos(demo_pool, standard, n, rng, exclude))


class EpisodeSampler:
    """Training episodes from the train pools. Batch `step` is a pure function of (seed, step), which makes
    a resumed run see the same episodes as an uninterrupted one."""

    def __init__(self, pools: dict[str, PairPool], cfg: EpisodeConfig, seed: int = 0):
        self.pools = {k: v for k, v in pools.items() if len(v) >= 2}
        if not self.pools:
            raise ConfigError("no source has at least 2 training pairs for episodes")
        self.names = sorted(self.pools)
        weights = cfg.source_weights or [1.0] * len(cfg.sources)
        if len(weights) != len(cfg.sources):
            raise ConfigError("episodes.source_weights must have one weight per source")
        by_name = dict(zip(cfg.sources, weights, strict=True))
        w = np.array([by_name.get(n, 1.0) for n in self.names], dtype=np.float64)
        self.source_probs = w / w.sum()
        if not 0 <= cfg.min_demos <= cfg.max_demos:
            raise ConfigError("episodes.min_demos must be in 0..max_demos")
        if cfg.flip_prob < 0 or cfg.mixture_prob < 0 or cfg.flip_prob + cfg.mixture_prob > 1:
            raise ConfigError("episodes.flip_prob and mixture_prob must be >= 0 and sum to at most 1")
        self.cfg = cfg
        self.seed = seed

    def sample_standard(self, rng: np.random.Generator) -> Standard:
        name = self.names[int(rng.choice(len(self.names), p=self.source_probs))]
        labellings = sorted(self.pools[name].labellings)
        labelling = labellings[int(rng.integers(len(labellings)))]
        kind = rng.random()
        if kind < self.cfg.flip_prob:
            p = 1.0
        elif kind < self.cfg.flip_prob + self.cfg.mixture_prob:
            p = float(rng.uniform(0.05, 0.95))
        else:
            p = 0.0
        return Standard(name, labelling, p)

    def sample(self, rng: np.random.Generator) -> Episode:
        standard = self.sample_standard(rng)
        pool = self.pools[standard.pool]
        n = int(rng.integers(self.cfg.min_demos, self.cfg.max_demos + 1))
        target = int(rng.integers(len(pool)))
        soft = self.cfg.soft_mixture_labels or standard.flip_rate in (0.0, 1.0)
        return target_episode(pool, pool, standard, target, n, rng, bool(rng.random() < 0.5), soft)

    def batch(self, step: int, size: int) -> list[Episode]:
        rng = np.random.default_rng([self.seed, step])
        return [self.sample(rng) for _ in range(size)]
