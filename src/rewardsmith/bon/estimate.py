"""Best-of-n estimates from N samples per prompt (METHODS.md section 4), as pure functions of score arrays that
return records (rewardsmith.stats.Interval for every figure); rewardsmith.bon.metrics turns them into metrics.json
with the verdicts.

Every input is (P, N): P prompts, N samples each, in the same order for every array. A selector (a proxy reward
model, the response length, the gold itself) picks the best of n samples drawn without replacement; the exact
expectation over all n-subsets (evaluate.best_of_n) gives, per prompt, the gold of the pick (gold@n), the
selector's own value (proxy@n) and the pick's length; prompts are averaged, and every figure carries a percentile
bootstrap CI over prompts (paired across selectors: one set of resampled prompts for all of them).

Over-optimisation is judged from data, not from a fitted curve: the n where the gold peaks is chosen on one half
of the prompts (the validation half, by a stable hash of the prompt id), and gold@N minus gold at that n is
estimated on the other half, with its CI; so are gold@2 - gold@1 (a selector wrong from the first choice on is
misaligned, not over-optimised) and the rise from n = 1 to the peak (rewardsmith.bon.metrics words the verdict).
The same estimate judges an RL run's gold over its tracker points (rewardsmith.rl.summary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.data.splits import hash_fraction
from rewardsmith.evaluate.best_of_n import best_of_n_curves, kl_bound, powers_of_two
from rewardsmith.stats import Interval, bootstrap_indices, mean_interval, paired_difference, spearman

FloatArray = NDArray[np.float64]

LENGTH = "length"  # the selector that picks the longest response
ORACLE = "oracle"  # the gold as its own selector: the best any selector can do with these samples
VALIDATION_SALT = "bon-validation"


def _per_n(per_prompt: FloatArray, idx: NDArray[np.int64]) -> list[Interval]:
    """Mean and CI per column of a (P, len(ns)) array of per-prompt values, on the shared draws idx (B, P)."""
    return [mean_interval(per_prompt[:, k], indices=idx) for k in range(per_prompt.shape[1])]


def validation_half(prompt_ids: Sequence[str]) -> NDArray[np.bool_]:
    """True for the prompts of the validation half (a stable hash of the id, about half of them)."""
    return np.array([hash_fraction(str(p), VALIDATION_SALT) < 0.5 for p in prompt_ids], dtype=bool)


def within_prompt_correlation(selector: ArrayLike, gold: ArrayLike) -> FloatArray:
    """Spearman correlation of selector and gold over each prompt's N samples: (P, N) -> (P,), NaN where either is
    constant within the prompt."""
    return spearman(np.asarray(selector, dtype=np.float64), np.asarray(gold, dtype=np.float64))


@dataclass(frozen=True)
class Curves:
    """Per-prompt best-of-n curves of one selector: gold (P, len(ns)), the selector's own value (P, len(ns)) and
    the picked response's length (P, len(ns))."""

    gold: FloatArray
    own: FloatArray
    length: FloatArray


def selector_curves(selector: ArrayLike, gold: ArrayLike, lengths: ArrayLike, ns: Sequence[int]) -> Curves:
    """best-of-n curves of one selector against one gold (all (P, N))."""
    s = np.asarray(selector, dtype=np.float64)
    return Curves(best_of_n_curves(s, gold, ns), best_of_n_curves(s, s, ns), best_of_n_curves(s, lengths, ns))


@dataclass(frozen=True)
class Overoptimisation:
    """Of one gold curve (best-of-n over n, or RL over tracker points): the peak n (or step) chosen on the validation
    prompts; on the test prompts, drop = gold at the end minus gold at that peak, rise = gold at the peak minus gold
    at the start, first_step = gold at the second point minus at the first (gold@2 - gold@1); None without two
    halves. test_prompts: the prompts of the test half; peaks_at_n: the validation peak is the last point."""

    peak_n: int | None
    drop: Interval | None
    test_prompts: int
    peaks_at_n: bool
    rise: Interval | None = None
    first_step: Interval | None = None


def overoptimisation(
    curves: FloatArray, ns: Sequence[int], validation: NDArray[np.bool_], idx_test: NDArray[np.int64]
) -> Overoptimisation:
    """Over-optimisation of one selector's gold curves (P, len(ns)) (see the module docstring); idx_test: (B, P_test)
    resampling indices of the test prompts."""
    val, test = curves[validation], curves[~validation]
    if val.shape[0] == 0 or test.shape[0] == 0 or curves.shape[1] < 2:
        return Overoptimisation(None, None, int(test.shape[0]), False)
    peak = int(np.argmax(np.nanmean(val, axis=0)))
    return Overoptimisation(
        int(ns[peak]),
        mean_interval(test[:, -1] - test[:, peak], indices=idx_test),
        int(test.shape[0]),
        peak == len(ns) - 1,
        mean_interval(test[:, peak] - test[:, 0], indices=idx_test),
        mean_interval(test[:, 1] - test[:, 0], indices=idx_test),
    )


def paired_drop(
    gold_a: FloatArray, gold_b: FloatArray, validation: NDArray[np.bool_], idx_test: NDArray[np.int64]
) -> Interval | None:
    """(gold@N - gold at a's validation peak) minus the same for b, per test prompt, with its paired CI (above 0: a
    loses less after its peak than b). None without both halves."""
    if validation.all() or not validation.any():
        return None
    peak_a = int(np.argmax(np.nanmean(gold_a[validation], axis=0)))
    peak_b = int(np.argmax(np.nanmean(gold_b[validation], axis=0)))
    test_a, test_b = gold_a[~validation], gold_b[~validation]
    drop_a, drop_b = test_a[:, -1] - test_a[:, peak_a], test_b[:, -1] - test_b[:, peak_b]
    return paired_difference(drop_a, drop_b, indices=idx_test)


@dataclass(frozen=True)
class SelectorEstimates:
    """One selector's figures on one gold: per n (lists over ns) gold@n, its own value, that value's gain over
    n = 1 in own_sd (the selector's standard deviation over all samples) and the picked length; gold@N - gold@1
    (gain over random choice), the within-prompt rank correlation with the gold, and over-optimisation."""

    gold_at_n: list[Interval]
    own_at_n: list[Interval]
    own_sd: float
    own_gain_in_sd_at_n: list[Interval]
    length_at_n: list[Interval]
    gain_over_random: Interval
    rank_correlation: Interval
    overoptimisation: Overoptimisation


@dataclass(frozen=True)
class PairedEstimates:
    """Proxies a and b on one gold: a - b of gold@n per n and of the drop after each one's validation peak."""

    a: str
    b: str
    gold_diff_at_n: list[Interval]
    drop_diff: Interval | None


@dataclass(frozen=True)
class GoldEstimates:
    """Every figure on one gold: the prompts it scored (and dropped), per selector, and per two proxies."""

    prompts: int
    dropped_prompts: int
    selectors: dict[str, SelectorEstimates]
    paired: list[PairedEstimates]


@dataclass(frozen=True)
class BestOfNEstimates:
    """A run's estimates: N samples, the n grid and its KL bound, the prompts and the validation half's size."""

    n: int
    ns: list[int]
    kl_bound: list[float]
    prompts: int
    validation_prompts: int
    golds: dict[str, GoldEstimates]


def best_of_n_estimates(
    prompt_ids: Sequence[str],
    selectors: Mapping[str, ArrayLike],
    golds: Mapping[str, ArrayLike],
    lengths: ArrayLike,
    n_boot: int = 1000,
    seed: int = 0,
) -> BestOfNEstimates:
    """Every best-of-n figure of a run (see the module docstring).

    selectors: proxy name -> rewards (P, N); golds: gold name -> values (P, N), NaN where the gold cannot score a
    sample (it is then left out of that prompt's figures: a prompt with any NaN is dropped for that gold); lengths:
    (P, N). Per gold: per selector (each proxy, then the length selector and the oracle) its SelectorEstimates; then,
    for every two proxies a and b, the paired differences of gold@n and of their drops after the validation peak.
    """
    length_arr = np.asarray(lengths, dtype=np.float64)
    n_prompts, n_samples = length_arr.shape
    ns = powers_of_two(n_samples)
    validation = validation_half(prompt_ids)
    rng = np.random.default_rng(seed)
    out: dict[str, GoldEstimates] = {}
    for gold_name, gold_values in golds.items():
        gold = np.asarray(gold_values, dtype=np.float64)
        keep = np.all(np.isfinite(gold), axis=1)
        kept_ids = np.flatnonzero(keep)
        idx = bootstrap_indices(kept_ids.size, n_boot, rng)
        test_ids = np.flatnonzero(~validation[keep])
        idx_test = bootstrap_indices(test_ids.size, n_boot, rng)
        g, kept_lengths = gold[keep], length_arr[keep]
        chooser = {name: np.asarray(values, dtype=np.float64)[keep] for name, values in selectors.items()}
        chooser[LENGTH], chooser[ORACLE] = kept_lengths, g
        curves = {name: selector_curves(values, g, kept_lengths, ns) for name, values in chooser.items()}
        per_selector: dict[str, SelectorEstimates] = {}
        for name, c in curves.items():
            scale = float(np.std(chooser[name]))
            own_gain = (c.own - c.own[:, :1]) / scale if scale > 0 else np.zeros_like(c.own)
            per_selector[name] = SelectorEstimates(
                gold_at_n=_per_n(c.gold, idx),
                own_at_n=_per_n(c.own, idx),
                own_sd=scale,
                own_gain_in_sd_at_n=_per_n(own_gain, idx),
                length_at_n=_per_n(c.length, idx),
                gain_over_random=paired_difference(c.gold[:, -1], c.gold[:, 0], indices=idx),
                rank_correlation=mean_interval(within_prompt_correlation(chooser[name], g), indices=idx),
                overoptimisation=overoptimisation(c.gold, ns, validation[keep], idx_test),
            )
        proxies = list(selectors)
        paired = [
            PairedEstimates(
                a,
                b,
                [paired_difference(curves[a].gold[:, k], curves[b].gold[:, k], indices=idx) for k in range(len(ns))],
                paired_drop(curves[a].gold, curves[b].gold, validation[keep], idx_test),
            )
            for i, a in enumerate(proxies)
            for b in proxies[i + 1 :]
        ]
        out[gold_name] = GoldEstimates(int(kept_ids.size), int(n_prompts - kept_ids.size), per_selector, paired)
    return BestOfNEstimates(n_samples, ns, [kl_bound(n) for n in ns], n_prompts, int(validation.sum()), out)
