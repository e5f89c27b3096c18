"""The benchmark metrics as pure functions of rewards, each written from its benchmark's published definition
(docs/benchmarks.md names the file each follows).

- `strict_correct`: RewardBench (v1) and RM-Bench count a pair right only when r_chosen > r_rejected (a tie is
  wrong).
- `best_of_n_credit`: RewardBench 2's best-of-4 credit of a row: 1/k when the first chosen completion ties k
  completions at the maximum reward, else 0.
- `ties_prompt_stats` / `ties_units` / `ties_statistic`: RewardBench 2's Ties subset: per prompt id, then the
  weighted score.
- `section_weights` / `section_scores`: RewardBench's leaderboard sections, subset accuracies weighted by
  EXAMPLE_COUNTS.
- `oracle_best_of_k`: PPE's best-of-K ceiling. The best-of-K curve itself (the expected correctness of the response a
  reward model picks from K responses drawn without replacement) is evaluate.best_of_n.best_of_n_curve, the
  estimator `rewardsmith bon` uses too.
- `conflict_pairs`: PPE's accuracy on the sampled pairs of one correct and one incorrect response.
- `roc_auc`, `pooled_auc`; `reward_length_correlation`: Spearman correlation of reward and response length.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import comb

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.evaluate.metrics import length_correlation
from rewardsmith.stats import Interval, bootstrap_indices, percentile_interval, spearman

FloatArray = NDArray[np.float64]


def strict_correct(margins: ArrayLike) -> FloatArray:
    """1.0 where the margin r_chosen - r_rejected is > 0, else 0.0 (a tie counts as wrong). margins: (N,)."""
    return np.where(np.asarray(margins, dtype=np.float64) > 0, 1.0, 0.0)


def best_of_n_credit(rewards: ArrayLike) -> float:
    """Credit of one best-of-n row whose first reward belongs to the correct completion: 1/k when it ties k
    completions (itself included) at the maximum, 0 when another completion scores higher. rewards: (K,)."""
    r = np.asarray(rewards, dtype=np.float64)
    top = r.max()
    return float(1.0 / np.count_nonzero(r == top)) if r[0] == top else 0.0


# ------------------------------------------------------------------------------------------ RewardBench 2 Ties


def ties_prompt_stats(correct: ArrayLike, rewards: ArrayLike) -> tuple[bool, float | None, float]:
    """(accurate, spread of the correct rewards, worst correct minus best incorrect) of one Ties prompt, as the
    official `sample_stats` gives them.

    correct: (M,) bool; rewards: (M,). accurate: every correct response outscores the best incorrect one (strict);
    the spread (best - worst correct) is None with fewer than two correct responses. A prompt lacking either kind
    of response is (False, None, 0.0), as the official code scores it.
    """
    c = np.asarray(correct, dtype=bool)
    r = np.asarray(rewards, dtype=np.float64)
    if not c.any() or c.all():
        return False, None, 0.0
    good, bad = r[c], r[~c]
    gap = float(good.min() - bad.max())
    spread = float(good.max() - good.min()) if good.size > 1 else None
    return gap > 0, spread, gap


TIES_COLUMNS = ("ref accurate", "tied accurate", "preferred", "preferred (hard)", "margin score", "in both")


def _ties_key(prompt: str) -> int | str:
    """The official code matches ref and tied rows by int(prompt id): "ref:007" and "tied:7" are one prompt."""
    try:
        return int(prompt)
    except ValueError:
        return prompt


def ties_units(
    sample_ids: Sequence[str], num_correct: Sequence[int], rewards: Sequence[ArrayLike]
) -> tuple[list[str], FloatArray]:
    """Per-prompt Ties values from rows whose id is "ref:<prompt>" or "tied:<prompt>" (allenai/reward-bench
    rewardbench/utils.py `process_single_model`, followed exactly).

    Each row's rewards (K,) list its num_correct correct completions first. Prompt ids are matched as integers where
    they read as one. Rows of one (kind, prompt) fill one table of completions by position, a later row's
    completion k replacing an earlier one's, as the official code's dict does. Returns (prompt ids in order of first
    appearance, values (P, 6)) with columns TIES_COLUMNS: ref accurate and tied accurate (NaN for a prompt without
    that row); for prompts with both rows (in both = 1), preferred = tied gap > tied spread and preferred (hard) =
    min(ref gap, tied gap) > tied spread where the tied spread exists (NaN elsewhere), and margin score =
    tanh(min(ref gap, tied gap) / tied spread - 1) where the spread is > 0 (NaN elsewhere: the official code leaves
    prompts whose correct completions all score the same out of the margin mean).
    """
    grouped: dict[tuple[str, int | str], dict[int, tuple[bool, float]]] = {}
    order: list[int | str] = []
    names: dict[int | str, str] = {}
    for sample_id, k, row in zip(sample_ids, num_correct, rewards, strict=True):
        kind, _, prompt = str(sample_id).partition(":")
        if kind not in ("ref", "tied") or not prompt:
            raise ValueError(f"Ties row id {sample_id!r} is not 'ref:<id>' or 'tied:<id>'")
        key = _ties_key(prompt)
        table = grouped.setdefault((kind, key), {})
        for i, value in enumerate(np.asarray(row, dtype=np.float64).tolist()):
            table[i] = (i < k, float(value))
        if key not in names:
            names[key] = prompt
            order.append(key)

    def stats(kind: str, key: int | str) -> tuple[bool, float | None, float] | None:
        table = grouped.get((kind, key))
        if table is None:
            return None
        return ties_prompt_stats([c for c, _ in table.values()], [v for _, v in table.values()])

    out = np.full((len(order), len(TIES_COLUMNS)), np.nan)
    for p, key in enumerate(order):
        ref, tied = stats("ref", key), stats("tied", key)
        if ref:
            out[p, 0] = float(ref[0])
        if tied:
            out[p, 1] = float(tied[0])
        out[p, 5] = float(bool(ref and tied))
        if ref and tied and tied[1] is not None:
            spread, hard_gap = tied[1], min(ref[2], tied[2])
            out[p, 2] = float(tied[2] > spread)
            out[p, 3] = float(hard_gap > spread)
            if spread > 0:
                out[p, 4] = float(np.tanh(hard_gap / spread - 1.0))
    return [names[k] for k in order], out


def _mean_of_finite(column: FloatArray, empty: float) -> float:
    finite = column[np.isfinite(column)]
    return float(finite.mean()) if finite.size else empty


def ties_components(values: FloatArray) -> dict[str, float]:
    """RewardBench 2's Ties components from per-prompt values (P, 6) (ties_units), as the official code averages
    them: ref and tied accuracy over the prompts with that row (0 when none); over the prompts with both rows, the
    two preferred rates over those with a tied spread (NaN when none has one, as numpy's mean of nothing) and the
    margin score over those with a spread > 0 (0 when none); all three 0 when no prompt has both rows."""
    both = values[:, 5] == 1.0
    out = {"ref accuracy": _mean_of_finite(values[:, 0], 0.0), "tied accuracy": _mean_of_finite(values[:, 1], 0.0)}
    if not both.any():
        return {**out, "correctness preferred": 0.0, "correctness preferred (hard)": 0.0, "margin score": 0.0}
    return {
        **out,
        "correctness preferred": _mean_of_finite(values[both, 2], float("nan")),
        "correctness preferred (hard)": _mean_of_finite(values[both, 3], float("nan")),
        "margin score": _mean_of_finite(values[both, 4], 0.0),
    }


def ties_statistic(values: FloatArray) -> float:
    """RewardBench 2's Ties score from per-prompt values (P, 6) (ties_units):

        0.30 tied accuracy + 0.30 ref accuracy + 0.20 preferred + 0.20 preferred (hard) + 0.01 margin

    with the components of ties_components (allenai/reward-bench rewardbench/utils.py `process_single_model`; the
    weights sum to 1.01 there too). Returns a fraction.
    """
    c = ties_components(values)
    return (
        0.30 * c["tied accuracy"]
        + 0.30 * c["ref accuracy"]
        + 0.20 * c["correctness preferred"]
        + 0.20 * c["correctness preferred (hard)"]
        + 0.01 * c["margin score"]
    )


# ---------------------------------------------------------------------------------- RewardBench (v1) sections


def section_weights(
    present: Iterable[str], example_counts: Mapping[str, int], subset_mapping: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """Section -> {subset: EXAMPLE_COUNTS weight} over the subsets present, sections without one left out."""
    have = set(present)
    out: dict[str, dict[str, float]] = {}
    for section, subsets in subset_mapping.items():
        weights = {s: float(example_counts[s]) for s in subsets if s in have}
        if weights:
            out[section] = weights
    return out


def section_scores(
    subset_scores: Mapping[str, float], example_counts: Mapping[str, int], subset_mapping: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """Section -> sum_s score_s * count_s / sum_s count_s over its subsets present in subset_scores (the
    leaderboard's prompt-weighted section score), sections without a subset left out."""
    return {
        section: sum(subset_scores[s] * w for s, w in weights.items()) / sum(weights.values())
        for section, weights in section_weights(subset_scores, example_counts, subset_mapping).items()
    }


# ------------------------------------------------------------------------------------------------ PPE best-of-K


def oracle_best_of_k(correct: ArrayLike, ks: Sequence[int]) -> FloatArray:
    """The best any reward model can do: P(at least one correct response among K drawn without replacement) =
    1 - C(n - n_correct, K) / C(n, K). correct: (n,). Returns (len(ks),)."""
    c = np.asarray(correct, dtype=bool)
    n, good = c.size, int(c.sum())
    return np.array([1.0 - comb(n - good, k) / comb(n, k) for k in ks], dtype=np.float64)


def conflict_pairs(
    rewards: ArrayLike, correct: ArrayLike, pairs: Sequence[tuple[int, int]]
) -> tuple[FloatArray, FloatArray, NDArray[np.int64]]:
    """The sampled conflict pairs of one prompt, oriented correct-first.

    rewards, correct: (n,); pairs: (i, j) response indices (0-based). Pairs whose two responses are both correct or
    both incorrect are not conflicts and are left out. Returns (credit (M,): 1 when the correct response scores
    higher, 0 when lower, 1/2 on a tie; margins (M,) r_correct - r_incorrect; oriented (M, 2) [correct, incorrect]
    indices). Raises ValueError for an index outside 0..n-1.
    """
    r = np.asarray(rewards, dtype=np.float64)
    c = np.asarray(correct, dtype=bool)
    oriented = []
    for i, j in pairs:
        if not (0 <= i < r.size and 0 <= j < r.size):
            raise ValueError(f"conflict pair ({i}, {j}) outside responses 0..{r.size - 1}")
        if c[i] != c[j]:
            oriented.append((i, j) if c[i] else (j, i))
    idx = np.asarray(oriented, dtype=np.int64).reshape(-1, 2)
    margins = r[idx[:, 0]] - r[idx[:, 1]]
    credit = np.where(margins > 0, 1.0, np.where(margins < 0, 0.0, 0.5))
    return credit, margins, idx


def roc_auc(scores: ArrayLike, positive: ArrayLike) -> float:
    """P(score of a random positive > score of a random negative) + 1/2 P(equal): the ROC AUC with ties counting
    1/2 (as sklearn.metrics.roc_auc_score). scores: (M,); positive: (M,) bool. NaN when a class is empty."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(s)  # average ranks: a tie across the classes contributes 1/2
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def pooled_auc(values: FloatArray) -> float:
    """ROC AUC of rewards as a classifier of correctness, pooled over every response of every unit.

    values: (N, 2K), the K rewards of a unit then its K labels (1 correct, 0 incorrect, NaN absent). The AUC is the
    Mann-Whitney probability that a correct response outscores an incorrect one, ties counting 1/2; NaN when
    either class is empty.
    """
    k = values.shape[1] // 2
    rewards, labels = values[:, :k].ravel(), values[:, k:].ravel()
    keep = np.isfinite(labels)
    return roc_auc(rewards[keep], labels[keep] > 0.5)


# --------------------------------------------------------------------------------------- length correlation


def _weighted_average_ranks(groups: NDArray[np.int64], weight: FloatArray, n_groups: int) -> FloatArray:
    """Average ranks (1-based) of values repeated `weight` times, from their tie groups in ascending order."""
    per_group = np.bincount(groups, weights=weight, minlength=n_groups)
    return np.asarray((np.cumsum(per_group) - per_group + (per_group + 1) / 2)[groups], dtype=np.float64)


def resampled_spearman(x: ArrayLike, y: ArrayLike, unit: ArrayLike, idx: NDArray[np.int64]) -> FloatArray:
    """Spearman correlation of x and y on resamples of units, without re-sorting: idx (B, N) draws of the N units,
    unit (M,) the unit of each of the M values. A unit drawn m times contributes its values m times, so the ranks
    of a resample are the average ranks of a weighted sample (each tie group, duplicates included, sharing its
    mean rank) and the correlation is their weighted Pearson correlation: the same number as ranking the
    resample. Returns (B,), NaN where x or y is constant."""
    xv, yv = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    owner = np.asarray(unit, dtype=np.int64)
    _, gx = np.unique(xv, return_inverse=True)
    _, gy = np.unique(yv, return_inverse=True)
    nx, ny = int(gx.max()) + 1 if gx.size else 0, int(gy.max()) + 1 if gy.size else 0
    n_units = int(idx.shape[1])
    out = np.empty(idx.shape[0])
    for b, draw in enumerate(idx):
        weight = np.bincount(draw, minlength=n_units)[owner].astype(np.float64)
        rx, ry = _weighted_average_ranks(gx, weight, nx), _weighted_average_ranks(gy, weight, ny)
        total = weight.sum()
        dx, dy = rx - (weight * rx).sum() / total, ry - (weight * ry).sum() / total
        sxx, syy = (weight * dx * dx).sum(), (weight * dy * dy).sum()
        out[b] = (weight * dx * dy).sum() / np.sqrt(sxx * syy) if sxx > 0 and syy > 0 else np.nan
    return out


def reward_length_correlation(
    rewards: Sequence[ArrayLike],
    lengths: Sequence[ArrayLike],
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Spearman correlation of reward and response length over every response of a set of rows, with a
    bootstrap CI resampling rows (a row's responses stay together).

    rewards, lengths: one (K_i,) array per row. Rows of two responses go through
    rewardsmith.evaluate.metrics.length_correlation (the pair sets' definition); others are pooled the same way
    (replicates by resampled_spearman). Returns Interval(estimate in [-1, 1], low, high, number of rows).
    """
    rows = [np.asarray(r, dtype=np.float64) for r in rewards]
    lens = [np.asarray(x, dtype=np.float64) for x in lengths]
    n = len(rows)
    if n and all(r.size == 2 for r in rows):
        rr, ll = np.stack(rows), np.stack(lens)
        return length_correlation(
            rr[:, 0], rr[:, 1], ll[:, 0], ll[:, 1], n_boot=n_boot, confidence=confidence, seed=seed
        )
    if n < 2:
        return Interval(float("nan"), float("nan"), float("nan"), n, confidence)
    flat_r, flat_l = np.concatenate(rows), np.concatenate(lens)
    value = float(spearman(flat_r, flat_l))
    if n_boot <= 0:
        return Interval(value, float("nan"), float("nan"), n, confidence)
    unit = np.repeat(np.arange(n), [r.size for r in rows])
    low, high = percentile_interval(
        resampled_spearman(flat_r, flat_l, unit, bootstrap_indices(n, n_boot, seed)), confidence
    )
    return Interval(value, low, high, n, confidence)
