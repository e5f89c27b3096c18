"""Every run's data, prepared one way (`rewardsmith train`, `rewardsmith shift`, the ICRM pools, `eval
--shift-config`): a source split by a stable hash of each pair's conversation (its first human turn, so one
conversation never lands on two sides) into named parts, each part capped (its first n pairs, or a stable-hash
sample of n, which does not follow file order), and every evaluation set cleaned of the conversations training
saw, the pairs removed counted, so no metric is computed on training data. `train` may split its source by row
instead (data.split: row, for pairs that share a few opening turns); its own parts then share conversations.

`split_parts` is the pure step (pairs in, parts out); `prepare_data` reads a source and its evaluation sets
through the dataset registry and applies a DataPlan.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rewardsmith.config import DataConfig, DatasetConfig
from rewardsmith.data.dataset import PairDataset
from rewardsmith.data.registry import load_configured
from rewardsmith.data.schema import PreferencePair, stable_hash
from rewardsmith.data.splits import first_turns, split_pairs
from rewardsmith.errors import ConfigError

Sampling = Literal["first", "hash"]


@dataclass(frozen=True)
class Part:
    """One part of a split: its share of the source's conversations and an optional cap on its pairs."""

    fraction: float
    cap: int | None = None


def sample(pairs: Sequence[PreferencePair], n: int | None, sampling: Sampling, salt: str) -> list[PreferencePair]:
    """At most n pairs: the first n ("first"), or n chosen by a stable hash kept in file order ("hash": file
    order is often sorted, so its head is not a sample)."""
    if n is None or len(pairs) <= n:
        return list(pairs)
    if sampling == "first":
        return list(pairs[:n])
    keyed = sorted(
        range(len(pairs)), key=lambda i: stable_hash(f"{salt}:{i}:{pairs[i].pair_id}:{pairs[i].chosen[:200]}")
    )
    return [pairs[i] for i in sorted(keyed[:n])]


Parts = dict[str, list[PreferencePair]]


def split_parts(
    pairs: Sequence[PreferencePair],
    parts: Mapping[str, Part],
    salt: str = "split",
    sampling: Sampling = "first",
    by: str = "hash",
) -> tuple[Parts, Parts]:
    """(capped parts, parts as split) of pairs split by conversation hash (by "hash"; by "row": row hash) with the
    parts' fractions (filled in order); a hash sample of part `name` is salted "<salt>:<name>"."""
    split = split_pairs(pairs, {name: part.fraction for name, part in parts.items()}, salt=salt, by=by)
    capped = {name: sample(split[name], part.cap, sampling, f"{salt}:{name}") for name, part in parts.items()}
    return capped, split


def conversations(pairs: Sequence[PreferencePair]) -> set[str]:
    """The conversation keys (PreferencePair.conversation_key: the first human turn's letters and digits) of pairs."""
    return {p.conversation_key() for p in pairs}


def unseen_mask(pairs: Sequence[PreferencePair], seen: AbstractSet[str]) -> list[bool]:
    """True for each pair whose conversation is not in `seen`."""
    return [p.conversation_key() not in seen for p in pairs]


@dataclass(frozen=True)
class DataPlan:
    """How one run's data is prepared.

    parts: the source's parts in fill order; split: how the source is cut into them (splits.SPLIT_KEYS: "hash",
    by conversation; "row", by row, and then the source's other parts keep the conversations they share with
    training); sampling: how a capped part (and an evaluation set) is cut; training: the parts whose conversations
    no evaluation set may share, taken as split (seen_from "split") or as capped ("sampled"); evals: other
    evaluation sets, each cleaned, then cut to eval_cap."""

    source: DatasetConfig
    parts: Mapping[str, Part]
    salt: str = "split"
    split: str = "hash"
    sampling: Sampling = "first"
    training: tuple[str, ...] = ()
    seen_from: Literal["split", "sampled"] = "split"
    evals: Sequence[DatasetConfig] = ()
    eval_cap: int | None = None


@dataclass
class PreparedData:
    """parts: the source's capped parts; evals: each evaluation set cleaned and cut (by its label); source: the
    source as read (its account of rows and drops); summaries: per evaluation set what was read, removed and used;
    overlap_removed: per evaluation set the pairs dropped for sharing a conversation with training."""

    parts: dict[str, list[PreferencePair]]
    evals: dict[str, list[PreferencePair]]
    source: PairDataset
    summaries: dict[str, Any] = field(default_factory=dict)
    overlap_removed: dict[str, int] = field(default_factory=dict)
    split_sizes: dict[str, int] = field(default_factory=dict)


def prepare_data(plan: DataPlan, data_dir: str | Path | None = None) -> PreparedData:
    """Reads the plan's source and evaluation sets and prepares them (see the module docstring)."""
    source = load_configured(plan.source, data_dir)
    parts, split = split_parts(source.pairs, plan.parts, plan.salt, plan.sampling, plan.split)
    used = parts if plan.seen_from == "sampled" else split
    seen = conversations([p for name in plan.training for p in used[name]])
    evals: dict[str, list[PreferencePair]] = {}
    summaries: dict[str, Any] = {}
    removed: dict[str, int] = {}
    # The hash split keeps a conversation on one side; a repeat of it with other punctuation or spacing is found
    # by its conversation key and dropped from the parts training does not see. A row split is asked for because
    # the conversations are few: its parts keep what they share.
    for name in parts:
        if name not in plan.training and plan.split == "hash":
            kept = [p for p, keep in zip(parts[name], unseen_mask(parts[name], seen), strict=True) if keep]
            if len(kept) < len(parts[name]):
                removed[name] = len(parts[name]) - len(kept)
                parts[name] = kept
    for ds in plan.evals:
        name = ds.label
        if name in evals or name in parts:
            raise ConfigError(f"evaluation set {name!r} listed twice")
        loaded = load_configured(ds, data_dir)
        kept = [p for p, keep in zip(loaded.pairs, unseen_mask(loaded.pairs, seen), strict=True) if keep]
        removed[name] = len(loaded.pairs) - len(kept)
        evals[name] = sample(kept, plan.eval_cap, plan.sampling, f"{plan.salt}:{name}")
        summaries[name] = {
            **loaded.summary(),
            "label": name,
            "overlap_removed": removed[name],
            "used": len(evals[name]),
            "set_aside": {"past the evaluation cap": len(kept) - len(evals[name])},
        }
    return PreparedData(parts, evals, source, summaries, removed, {k: len(v) for k, v in split.items()})


# ----------------------------------------------------------------------------------------------------------
# `rewardsmith train`


@dataclass
class TrainData:
    """train: the training pairs; eval_sets: the named held-out sets; summaries: per set what was read and used;
    warnings: one line each (a held-out part that came out empty)."""

    train: list[PreferencePair]
    eval_sets: dict[str, list[PreferencePair]]
    summaries: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def _why_split(pairs: Sequence[PreferencePair], split: str) -> str:
    """Why a part of a split came out empty, and what to do: the hash split keeps a conversation on one side, so
    pairs sharing a first human turn move together; with few distinct ones, a part gets none."""
    if split == "row":
        return "the row split had too few rows for its fractions"
    k = first_turns(pairs)
    return (
        f"the split hashes each pair's first human turn so that a conversation stays on one side, and the "
        f"{len(pairs)} pairs share {k} distinct first turn{'' if k == 1 else 's'}; --split-by row (data.split: row) "
        "splits by row instead"
    )


def train_data(cfg: DataConfig) -> TrainData:
    """The training pairs and named held-out sets of a `train` run: the source's training part (its first
    train_pairs), its held-out and validation parts ("<label> (held-out)", "<label> (validation)") and every other
    evaluation set cleaned of the training part's conversations, each cut to eval_pairs; with per-set summaries.
    ConfigError (one line, saying why) when no training pairs are left; a warning when a held-out or validation
    part with a share of the source came out empty."""
    if cfg.train_fraction + cfg.val_fraction > 1.0 + 1e-9:
        raise ConfigError(f"data.train_fraction {cfg.train_fraction} + data.val_fraction {cfg.val_fraction} exceed 1")
    rest = max(0.0, 1.0 - cfg.train_fraction - cfg.val_fraction)
    plan = DataPlan(
        cfg.train,
        {
            "train": Part(cfg.train_fraction, cfg.train_pairs),
            "validation": Part(cfg.val_fraction, cfg.eval_pairs),
            "heldout": Part(rest, cfg.eval_pairs),
        },
        split=cfg.split,
        training=("train",),
        evals=cfg.eval,
        eval_cap=cfg.eval_pairs,
    )
    data = prepare_data(plan, cfg.data_dir)
    train = data.parts["train"]
    if not train:
        why = f"; {_why_split(data.source.pairs, cfg.split)}" if data.source.pairs else ""
        raise ConfigError(
            f"no training pairs left from {cfg.train.label}: {data.source.account()}, "
            f"{data.split_sizes['train']} in the training split{why}"
        )
    held_out = data.split_sizes["heldout"] + data.split_sizes["validation"]
    summaries: dict[str, Any] = {
        "train": {
            **data.source.summary(),
            "label": cfg.train.label,
            "used": len(train),
            "set_aside": {
                "held out": held_out,
                "past --train-pairs": data.split_sizes["train"] - len(train),
            },
        }
    }
    if cfg.bootstrap is not None:
        draw = random.Random(cfg.bootstrap).choices(range(len(train)), k=len(train))
        train = [train[i] for i in draw]
        summaries["train"]["bootstrap"] = {"seed": cfg.bootstrap, "distinct": len(set(draw))}
    eval_sets: dict[str, list[PreferencePair]] = {}
    warnings = []
    for part, suffix in (("heldout", "held-out"), ("validation", "validation")):
        name = f"{cfg.train.label} ({suffix})"
        if data.parts[part]:
            eval_sets[name] = data.parts[part]
            used, removed = len(data.parts[part]), data.overlap_removed.get(part, 0)
            summaries[name] = {
                "label": name,
                "pairs": data.split_sizes[part],
                "used": used,
                "overlap_removed": removed,
                "set_aside": {"past --eval-pairs": data.split_sizes[part] - used - removed},
            }
        elif plan.parts[part].fraction > 0:
            warnings.append(
                f"warning: the {suffix} part of {cfg.train.label} is empty, so it has no accuracy: "
                f"{_why_split(data.source.pairs, cfg.split)}"
            )
    eval_sets.update(data.evals)
    summaries.update(data.summaries)
    return TrainData(train, eval_sets, summaries, warnings)
