"""Preference labels from a gold reward model (`rewardsmith label`; METHODS.md section 5): which pairs are judged,
and the label each gets from the gold's two rewards. Pure functions; the job scores the texts.

- Pairs of completions: every pair (i < j) of a prompt's responses, or `pairs_per_prompt` of them drawn without
  replacement by a generator seeded by (seed, prompt id), so a prompt's pairs do not depend on the others.
- Labels: the gold's preferred response is `chosen`. Hard: label 1. Soft (temperature T): label =
  sigmoid(margin / T), margin = r(chosen) - r(rejected) >= 0. A pair whose two rewards are equal (a tie, the same
  text included) says nothing and is dropped and counted.
- Noise (symmetric, rate rho): each kept pair is swapped (the gold's loser named chosen, the label kept) with
  probability rho, by a generator seeded by (seed, pair position), so the same pairs flip on every run.
- A spurious feature (a control, METHODS.md section 5): each kept pair is decided by a feature of the two texts
  instead of the gold with probability `spurious_rate` (seeded apart from the noise): `longer` or `shorter` names
  the longer or shorter response (in characters) chosen; a pair of equal lengths stays the gold's. A proxy trained
  on such labels agrees with the gold at small n and follows the feature at large n. With a tail (`spurious_tail`
  K characters) the feature decides only pairs whose text it prefers lies in the tail (the shorter one at most K
  characters long, or the longer one at least K): a proxy that agrees with the gold except on the rare extreme
  texts, which best-of-n meets more often as n grows (the gold rises, then falls, by construction). `matches`
  (with a regular expression, `spurious_pattern`) names the text that holds a match chosen where only one of the
  two does: a rare phrase the proxy learns to pay for, which best-of-n also meets more often as n grows.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rewardsmith.config import MAX_SEED, option
from rewardsmith.stats import sigmoid


@dataclass
class LabelConfig:
    """What `rewardsmith label` reads, which pairs it forms and how it labels them."""

    gold: str | None = option(None, "the gold: any model `score` takes (an ensemble too)")
    input: str | None = option(
        None,
        "pairs (any file `train` reads: prompt, chosen, rejected) or completions (a `sample` / `bon --samples` "
        "file: prompt, responses), JSONL / JSON / Parquet / CSV",
    )
    pairs_per_prompt: int | None = option(
        None, "completions: this many pairs of each prompt's responses, drawn by the seed (default: every pair)", min=1
    )
    soft: float | None = option(
        None,
        "soft labels: label = sigmoid(margin / T) at this temperature T, in the gold's reward units (default: hard "
        "labels, 1)",
        min=0.0,
        min_exclusive=True,
    )
    noise: float = option(
        0.0, "symmetric label noise: the share of pairs swapped at random (0 to 0.5)", min=0.0, max=0.5
    )
    spurious: str | None = option(
        None,
        "a control: a feature that decides a pair's label instead of the gold at --spurious-rate: longer | shorter "
        "| matches (the text holding a match of --spurious-pattern, where only one does)",
        choices=("longer", "shorter", "matches"),
    )
    spurious_rate: float = option(0.0, "the share of pairs the --spurious feature decides", min=0.0, max=1.0)
    spurious_tail: int | None = option(
        None,
        "the --spurious feature decides only pairs whose text it prefers is in this tail: at most this many "
        "characters (shorter), at least (longer); default: every pair",
        min=1,
    )
    spurious_pattern: str | None = option(
        None, "the regular expression of --spurious matches (Python syntax, searched in each response)"
    )
    seed: int = option(0, "seed of the pairs drawn, of the noise and of the spurious pairs", min=0, max=MAX_SEED)
    chunk: int = option(
        256, "texts the gold scores between two saves (a kill loses at most one chunk)", min=1, volatile=True
    )


def _generator(seed: int, key: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}\x1f{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def prompt_pairs(n: int, prompt_id: str, pairs_per_prompt: int | None, seed: int) -> list[tuple[int, int]]:
    """The (i, j), i < j, response pairs of a prompt with n responses: all of them, or pairs_per_prompt of them drawn
    without replacement (all when there are fewer), in a stable order."""
    every = list(itertools.combinations(range(n), 2))
    if pairs_per_prompt is None or pairs_per_prompt >= len(every):
        return every
    chosen = _generator(seed, prompt_id).choice(len(every), size=pairs_per_prompt, replace=False)
    return [every[k] for k in sorted(int(c) for c in chosen)]


@dataclass(frozen=True)
class Labels:
    """Per pair kept (K,): first_preferred: whether the pair's first text is the gold's preferred one (before noise);
    label: P(chosen preferred) as written; swapped: noise named the gold's loser chosen; margin: |r_a - r_b|. kept:
    the indices (into the pairs given) of the pairs kept; ties: pairs dropped as ties."""

    kept: np.ndarray
    first_preferred: np.ndarray
    label: np.ndarray
    swapped: np.ndarray
    margin: np.ndarray
    ties: int
    spurious: np.ndarray | None = None


def gold_labels(
    first: np.ndarray,
    second: np.ndarray,
    soft: float | None,
    noise: float,
    seed: int,
    lengths: tuple[np.ndarray, np.ndarray] | None = None,
    spurious: str | None = None,
    spurious_rate: float = 0.0,
    spurious_tail: int | None = None,
    matches: tuple[np.ndarray, np.ndarray] | None = None,
) -> Labels:
    """Labels of pairs whose texts the gold rewarded `first` (P,) and `second` (P,) (module docstring); lengths:
    the two texts' lengths (P,) each, which a `spurious` feature ("longer" | "shorter") reads, in its tail only when
    spurious_tail is given; matches: whether each text holds the pattern (P,) each, which "matches" reads."""
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    diff = first - second
    kept = np.flatnonzero(diff != 0)
    margin = np.abs(diff[kept])
    first_preferred = diff[kept] > 0
    decided = np.zeros(len(kept), dtype=bool)
    if spurious is not None and spurious_rate > 0:
        values = matches if spurious == "matches" else lengths
        assert values is not None
        a, b = np.asarray(values[0])[kept], np.asarray(values[1])[kept]
        drawn = _generator(seed, "spurious").random(len(first))[kept] < spurious_rate
        decided = drawn & (a != b)
        if spurious_tail is not None:
            in_tail = np.minimum(a, b) <= spurious_tail if spurious == "shorter" else np.maximum(a, b) >= spurious_tail
            decided &= in_tail
        by_feature = a < b if spurious == "shorter" else a > b
        first_preferred = np.where(decided, by_feature, first_preferred)
    label = np.ones(len(kept)) if soft is None else sigmoid(margin / soft)
    flips = _generator(seed, "noise").random(len(first))[kept] < noise if noise else np.zeros(len(kept), dtype=bool)
    return Labels(kept, first_preferred, label, flips, margin, int(len(first) - len(kept)), decided)


def agreement(label_first: Sequence[bool], model_first: Sequence[float]) -> float:
    """The share of pairs where a model's margin (first - second) has the gold's sign; ties count half."""
    m = np.asarray(model_first, dtype=np.float64)
    g = np.asarray(label_first, dtype=bool)
    if not len(m):
        return math.nan
    return float(np.mean(np.where(m == 0, 0.5, (m > 0) == g)))
