"""The training and evaluation sets of a `rewardsmith train` run, from its DataConfig.

The training source is split by a hash of the first human turn; its held-out part is the "<label> (held-out)"
set (and, with data.val_fraction, a "<label> (validation)" set for choosing settings), and pairs of any other
evaluation set that share a conversation with a training pair are removed and counted, so no metric is
computed on training data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rewardsmith.config import DataConfig
from rewardsmith.data.registry import load_configured
from rewardsmith.data.schema import PreferencePair
from rewardsmith.data.splits import split_pairs
from rewardsmith.errors import ConfigError


@dataclass
class PreparedData:
    train: list[PreferencePair]
    eval_sets: dict[str, list[PreferencePair]]
    summaries: dict[str, Any]


def prepare_data(cfg: DataConfig) -> PreparedData:
    """Training pairs and named held-out sets, with per-set summaries (rows read, pairs kept, drops)."""
    if cfg.train_fraction + cfg.val_fraction > 1.0 + 1e-9:
        raise ConfigError(f"data.train_fraction {cfg.train_fraction} + data.val_fraction {cfg.val_fraction} exceed 1")
    source = load_configured(cfg.train, cfg.data_dir)
    rest = max(0.0, 1.0 - cfg.train_fraction - cfg.val_fraction)
    parts = split_pairs(source.pairs, {"train": cfg.train_fraction, "validation": cfg.val_fraction, "heldout": rest})
    train = parts["train"][: cfg.train_pairs] if cfg.train_pairs else parts["train"]
    if not train:
        raise ConfigError(f"no training pairs left from {cfg.train.label}: {source.account()}, "
                          f"{len(parts['train'])} in the training split")
    train_keys = {p.group_key() for p in parts["train"]}
    eval_sets: dict[str, list[PreferencePair]] = {}
    summaries: dict[str, Any] = {"train": {**source.summary(), "label": cfg.train.label, "used": len(train)}}
    for part, suffix in (("heldout", "held-out"), ("validation", "validation")):
        if parts[part]:
            name = f"{cfg.train.label} ({suffix})"
            eval_sets[name] = parts[part][: cfg.eval_pairs or None]
            summaries[name] = {"label": name, "pairs": len(parts[part]), "used": len(eval_sets[name])}
    for ds in cfg.eval:
        loaded = load_configured(ds, cfg.data_dir)
        kept = [p for p in loaded.pairs if p.group_key() not in train_keys]
        name = ds.label
        if name in eval_sets:
            raise ConfigError(f"evaluation set {name!r} listed twice")
        eval_sets[name] = kept[: cfg.eval_pairs or None]
        summaries[name] = {**loaded.summary(), "label": name, "overlap_removed": len(loaded.pairs) - len(kept),
                           "used": len(eval_sets[name])}
    return PreparedData(train, eval_sets, summaries)
