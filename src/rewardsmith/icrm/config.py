"""Typed configuration of in-context reward modelling (ICRM): model (config.ICRMModelConfig), episodes, the shared
training loop (config.TrainConfig with ICRM defaults), the ELBO's KL schedule, evaluation.

YAML files (configs/icrm-*.yaml) and `rewardsmith icrm` flags only fill these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rewardsmith.config import MAX_SEED, ICRMModelConfig, TrainConfig, option


@dataclass
class EpisodeConfig:
    sources: list[str] = option(
        [
            "pku-saferlhf/harmless",
            "hh-rlhf/harmless-base",
            "hh-rlhf/helpful-base",
            "ultrafeedback",
            "helpsteer2",
        ],
        "registered datasets (or names of episodes.source_files) episodes are drawn from (pku-saferlhf/harmless "
        "also gives the helpful standard from its second label); none of the unseen evaluation sets (rm-bench, "
        "moralchoice, math-500)",
    )
    source_splits: dict[str, list[str]] = option(
        {"pku-saferlhf/harmless": ["train", "test"], "ultrafeedback": ["train", "eval"]},
        "files read per source (pooled before the hash split); sources not listed read their default file",
    )
    source_files: dict[str, str] = option(
        {},
        "a source named here is read from this pairs file (any file `train --path` reads) instead of a registered "
        "dataset, e.g. gold-labelled pairs from `rewardsmith label`",
    )
    source_weights: list[float] = option([], "sampling weight per source; empty = equal")
    pairs_per_source: int | None = option(3000, "read at most this many pairs of each source", min=2)
    min_demos: int = option(0, "fewest demonstrations in an episode", min=0)
    max_demos: int = option(64, "most demonstrations in an episode (N is drawn in min..max)", min=0)
    flip_prob: float = option(
        0.35, "probability that an episode's standard is the flipped one (p = 1)", min=0.0, max=1.0
    )
    mixture_prob: float = option(
        0.3, "probability of a mixture standard: a fraction p ~ U(0.05, 0.95) of labels flipped"
    )
    soft_mixture_labels: bool = option(
        True, "mixture targets carry the soft label 1 - p instead of a sampled hard label"
    )
    test_fraction: float = option(
        0.2,
        "held-out target pairs per source (split by a hash of the first human turn; never seen in training episodes)",
    )
    demo_fraction: float = option(0.1, "held-out pool that evaluation demonstrations are drawn from", min=0.0, max=1.0)
    split_salt: str = option("icrm", "salt of the stable hash split")
    allow_eval_sources: bool = option(
        False,
        "allow training on a dataset family an evaluation protocol scores as unseen data (rm-bench, moralchoice, "
        "math-500); that protocol then scores only the held-out test part, an in-distribution evaluation",
    )


def icrm_train_defaults() -> TrainConfig:
    """The training loop of an ICRM: max_steps optimiser steps of batch_size episodes; head_lr for the context
    encoder and heads, lr for the backbone when it is trained (concat mode)."""
    return TrainConfig(
        max_steps=4000,
        batch_size=64,
        lr=2e-5,
        head_lr=1e-3,
        weight_decay=0.01,
        warmup_ratio=0.05,
        loss="beta-elbo",
        swap_pairs=False,
        bf16=True,
        checkpoint_every=250,
    )


@dataclass
class ElboConfig:
    kl_schedule: str = option("inverse", "lambda(N) schedule", choices=("constant", "inverse", "inverse_sqrt", "exp"))
    kl_base: float = option(0.1, "lambda(0)", min=0.0)
    kl_scale: float = option(8.0, "N at which the inverse schedule halves lambda", min=0.0, min_exclusive=True)


@dataclass
class ICRMEvalConfig:
    n_values: list[int] = option([0, 1, 2, 4, 8, 16, 32, 64], "demonstration counts evaluated", min=0)
    max_test_pairs: int | None = option(800, "held-out target pairs per protocol", min=1)
    unseen_test_fraction: float = option(
        0.5,
        "share of a source that is not a training source scored as targets (split by a hash of the first human "
        "turn); the rest gives demonstrations. A training source's targets are its held-out test part",
        min=0.0,
        max=0.95,
        min_exclusive=True,
    )
    mixture_rates: list[float] = option(
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        "demonstrated flip rates p for calibrated steerability",
    )
    pareto_weights: list[float] = option(
        [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0],
        "fractions of should-respond demonstrations traced for the frontier",
    )
    n_boot: int = option(1000, "bootstrap resamples for CIs", min=0)
    bt_model: str | None = option(None, "saved BT model folder (same backbone) for baseline rows")
    seed: int = option(1234, "seed of demonstration draws", min=0, max=MAX_SEED)


@dataclass
class ICRMRunConfig:
    """Everything `rewardsmith icrm train` needs; config.yaml in an ICRM run directory is this, resolved."""

    model: ICRMModelConfig = field(default_factory=ICRMModelConfig)
    episodes: EpisodeConfig = field(default_factory=EpisodeConfig)
    train: TrainConfig = field(default_factory=icrm_train_defaults)
    elbo: ElboConfig = field(default_factory=ElboConfig)
    eval: ICRMEvalConfig = field(default_factory=ICRMEvalConfig)
    embed_batch_size: int = option(64, "texts per backbone forward when caching embeddings", min=1, volatile=True)
    data_dir: str | None = option(
        None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)", volatile=True
    )
