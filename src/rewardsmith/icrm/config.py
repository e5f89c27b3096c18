"""Typed configuration of in-context reward modelling (ICRM): model, episodes, training, evaluation.

YAML files (configs/icrm-*.yaml) and `rewardsmith icrm` flags only fill these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rewardsmith.config import option


@dataclass
class ICRMModelConfig:
    backbone: str = option("minilm", "minilm | smollm2 | tiny-bert | tiny-llama | a local folder | a hub id")
    mode: str = option(
        "set",
        "set: demonstrations encoded once each and pooled into a context vector; "
        "concat: demonstrations serialised into the context before the target",
    )
    pooling: str = option("auto", "mean | last | cls | auto (mean for encoders, last for decoders)")
    max_length: int = option(
        192,
        "tokens per (prompt, response) sequence (set mode); concat mode: the whole "
        "context, demonstrations included, so N is bounded by it",
    )
    min_prompt_tokens: int = option(48, "prompt tokens always kept when the response is long")
    num_layers: int | None = option(None, "keep only the first k transformer layers")
    dropout: float | None = option(0.0, "dropout probability everywhere; None keeps the pretrained value")
    context_dim: int = option(128, "width of demonstration vectors and the pooled context vector (set mode)")
    hidden_dim: int = option(256, "width of the confidence head's hidden layer")
    freeze_backbone: bool = option(
        True,
        "set mode: train the head on cached backbone embeddings (frozen "
        "backbone); concat mode: False fine-tunes the backbone",
    )
    bf16: bool = option(True, "bf16 autocast for the backbone forward (pooling and heads stay fp32)")


@dataclass
class EpisodeConfig:
    sources: list[str] = option(
        [
            "pku-saferlhf/harmless",
            "hh-rlhf/harmless-base",
            "hh-rlhf/helpful-base",
            "moralchoice/low",
            "rm-bench/chat",
            "rm-bench/safety-refuse",
            "rm-bench/safety-response",
        ],
        "registered datasets episodes are drawn from (pku-saferlhf/harmless also "
        "gives the helpful standard from its second label)",
    )
    source_splits: dict[str, list[str]] = option(
        {"pku-saferlhf/harmless": ["train", "test"]},
        "files read per source (pooled before the hash split); sources not listed read their default file",
    )
    source_weights: list[float] = option([], "sampling weight per source; empty = equal")
    pairs_per_source: int | None = option(3000, "read at most this many pairs of each source")
    min_demos: int = option(0, "fewest demonstrations in an episode")
    max_demos: int = option(64, "most demonstrations in an episode (N is drawn in min..max)")
    flip_prob: float = option(0.35, "probability that an episode's standard is the flipped one (p = 1)")
    mixture_prob: float = option(
        0.3, "probability of a mixture standard: a fraction p ~ U(0.05, 0.95) of labels flipped"
    )
    soft_mixture_labels: bool = option(
        True, "mixture targets carry the soft label 1 - p instead of a sampled hard label"
    )
    test_fraction: float = option(
        0.2,
        "held-out target pairs per source (split by a hash of the first "
        "human turn; never seen in training episodes)",
    )
    demo_fraction: float = option(0.1, "held-out pool that evaluation demonstrations are drawn from")
    split_salt: str = option("icrm", "salt of the stable hash split")


@dataclass
class ICRMTrainConfig:
    steps: int = option(4000, "optimiser steps (each a batch of episodes)")
    episodes_per_step: int = option(64, "episodes per optimiser step")
    lr: float = option(1e-3, "peak learning rate (AdamW) of the heads")
    backbone_lr: float = option(2e-5, "learning rate of the backbone when it is trained (concat mode)")
    weight_decay: float = option(0.01, "AdamW weight decay")
    warmup_ratio: float = option(0.05, "linear warm-up fraction, then linear decay")
    max_grad_norm: float = option(1.0, "gradient clipping norm; 0 disables")
    kl_schedule: str = option("inverse", "lambda(N) schedule: constant | inverse | inverse_sqrt | exp")
    kl_base: float = option(0.1, "lambda(0)")
    kl_scale: float = option(8.0, "N at which the inverse schedule halves lambda")
    seed: int = option(0, "seed for initialisation and episode sampling")
    checkpoint_every: int = option(250, "steps between atomic checkpoints (0 = only at the end)")
    log_every: int = option(25, "steps between log.jsonl lines")
    embed_batch_size: int = option(64, "texts per backbone forward when caching embeddings")
    progress: bool = option(True, "show progress bars")


@dataclass
class ICRMEvalConfig:
    n_values: list[int] = option([0, 1, 2, 4, 8, 16, 32, 64], "demonstration counts evaluated")
    max_test_pairs: int | None = option(800, "held-out target pairs per protocol")
    mixture_rates: list[float] = option(
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        "demonstrated flip rates p for calibrated steerability",
    )
    pareto_weights: list[float] = option(
        [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0],
        "fractions of should-respond demonstrations traced for the frontier",
    )
    n_boot: int = option(1000, "bootstrap resamples for CIs")
    bt_model: str | None = option(None, "saved BT model folder (same backbone) for baseline rows")
    seed: int = option(1234, "seed of demonstration draws")


@dataclass
class ICRMRunConfig:
    """Everything `rewardsmith icrm train` needs; config.yaml in an ICRM run directory is this, resolved."""

    model: ICRMModelConfig = field(default_factory=ICRMModelConfig)
    episodes: EpisodeConfig = field(default_factory=EpisodeConfig)
    train: ICRMTrainConfig = field(default_factory=ICRMTrainConfig)
    eval: ICRMEvalConfig = field(default_factory=ICRMEvalConfig)
    data_dir: str | None = option(
        None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)"
    )
