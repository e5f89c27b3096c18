"""`write_ensemble`: makes an ensemble folder (models.ensemble). It scores the reference texts with every member,
loaded as `score` loads it, and writes each member's scale on them, its content fingerprint and the rule."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.errors import ConfigError
from rewardsmith.inference.base import InferenceOptions
from rewardsmith.inference.ensemble import score_members
from rewardsmith.inference.items import item_texts, read_score_rows, texts_digest
from rewardsmith.inference.loading import load_inference
from rewardsmith.io.atomic import atomic_write_text
from rewardsmith.models.ensemble import (
    ENSEMBLE_FILE,
    EnsembleSpec,
    Reference,
    check_members,
    check_rule,
    member_fingerprint,
    scales,
)


def write_ensemble(
    models: Sequence[str],
    out: str | Path,
    rule: str = "mean",
    lam: float = 1.0,
    reference: str | Path | None = None,
    options: InferenceOptions | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> tuple[EnsembleSpec, np.ndarray, str]:
    """Writes the ensemble folder `out`: the members (paths relative to it), each one's content fingerprint, the
    rule, and each member's mean and sd of rewards on the reference texts (a score input file; default: the
    packaged demo sample's held-out pairs). Returns the spec, the members' reference rewards (K, M) and the
    reference's label."""
    out = Path(out)
    check_rule(rule, lam)
    check_members(out, list(models), "ensemble")
    spec_path = out / ENSEMBLE_FILE
    if out.exists() and any(out.iterdir()) and not (overwrite and spec_path.exists()):
        raise ConfigError(
            f"{out}: not empty" + ("; --overwrite replaces the ensemble it holds" if spec_path.exists() else "")
        )
    ref_label, items = reference_items(reference)
    if len(items) < 2:
        raise ConfigError(f"{ref_label}: the reference set needs at least two texts to give each member a scale")
    members = [load_inference(m, options) for m in models]
    for m, name in zip(members, models, strict=True):
        if m.in_context:
            raise ConfigError(f"ensemble: member {name} is an in-context model; an ensemble takes scalar models")
    rewards = score_members(members, items, "reference" if progress else None)
    _, sd = scales(rewards)
    for name, s in zip(models, sd, strict=True):
        if not (np.isfinite(s) and s > 0):
            raise ConfigError(f"ensemble: member {name} gives every reference text the same reward; it has no scale")
    out.mkdir(parents=True, exist_ok=True)
    spec = EnsembleSpec(
        tuple(_relative(Path(m), out) for m in models),
        rule,
        float(lam),
        Reference(
            ref_label,
            len(items),
            texts_digest(items),  # item_texts gives each prompt as its turns
            tuple(float(x) for x in rewards.mean(axis=1)),
            tuple(float(x) for x in sd),
        ),
        tuple(models),
        tuple(member_fingerprint(m) for m in models),
    )
    atomic_write_text(spec_path, json.dumps(spec.to_dict(), indent=1) + "\n")
    return spec, rewards, ref_label


def _relative(member: Path, out: Path) -> str:
    """A local member beside or under the ensemble folder's parent as a path relative to the folder (they move
    together); one elsewhere as an absolute path; a hub id as written."""
    if not member.exists():
        return str(member)
    relative = os.path.relpath(member.resolve(), out.resolve())
    return relative if not relative.startswith(os.path.join("..", "..")) else str(member.resolve())


# The default reference texts: this many pairs of each of the packaged sample's HH-RLHF test files.
REFERENCE_PAIRS = 100
REFERENCE_SETS = ("hh-rlhf/harmless-base", "hh-rlhf/helpful-base")


def reference_items(reference: str | Path | None) -> tuple[str, list[tuple[Any, str]]]:
    """(label, texts) of the reference set: a file `score` reads (both responses of a pair), or by default the
    first REFERENCE_PAIRS pairs of each REFERENCE_SETS file of the packaged sample."""
    if reference is not None:
        _, pairs, singles, _ = read_score_rows(Path(reference))
        return str(reference), item_texts(pairs, singles)
    from rewardsmith.data.registry import load_dataset
    from rewardsmith.data.sources import sample_dir

    with sample_dir() as data_dir:
        pairs = [p for name in REFERENCE_SETS for p in load_dataset(name, data_dir=data_dir).pairs[:REFERENCE_PAIRS]]
    label = f"the packaged sample: the first {REFERENCE_PAIRS} pairs of {' and '.join(REFERENCE_SETS)}"
    return label, item_texts(pairs, [False] * len(pairs))
