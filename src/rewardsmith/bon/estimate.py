"""Best-of-n estimates from N samples per prompt (METHODS.md section 4), as pure functions of score arrays.

Every input is (P, N): P prompts, N samples each, in the same order for every array. A selector (a proxy reward
model, the response length, the gold itself) picks the best of n samples drawn without replacement; the exact
expectation over all n-subsets (evaluate.best_of_n) gives, per prompt, the gold of the pick (gold@n), the
selector's own value (proxy@n) and the pick's length; prompts are averaged, and every figure carries a percentile
bootstrap CI over prompts (paired across selectors: one set of resampled prompts for all of them).

Over-optimisation is judged from data, not from a fitted curve: the n where the gold peaks is chosen on one half
of the prompts (the validation half, by a stable hash of the prompt id), and gold@N minus gold at that n is
estimated on the other half, with its CI: "over-optimised" only when the CI lies below 0, "inconclusive" when it
covers 0, "not over-optimised" when it lies above 0; "peaks at N" when the validation half peaks at N itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.data.splits import hash_fraction
from rewardsmith.evaluate.best_of_n import best_of_n_curves, kl_bound, powers_of_two
from rewardsmith.stats import bootstrap_indices, interval_verdict, percentile_interval, spearman

FloatArray = NDArray[np.float64]

LENGTH = "length"  # the selector that picks the longest response
ORACLE = "oracle"  # the gold as its own selector: the best any selector can do with these samples
VALIDATION_SALT = "bon-validation"


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def _interval(values: FloatArray, replicates: FloatArray) -> Interval:
    """The mean of per-prompt values (P,) and the percentile interval of its replicates (B,)."""
    finite = values[np.isfinite(values)]
    estimate = float(finite.mean()) if finite.size else float("nan")
    low, high = percentile_interval(replicates)
    return Interval(estimate, low, high)


def _replicate_means(per_prompt: FloatArray, idx: NDArray[np.int64]) -> FloatArray:
    """Means over resampled prompts: per_prompt (P, ...) and idx (B, P) -> (B, ...), NaN prompts left out."""
    import warnings

    resampled = per_prompt[idx]  # (B, P, ...)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate of only NaN prompts is NaN (left out)
        return np.asarray(np.nanmean(resampled, axis=1), dtype=np.float64)


def _per_n(per_prompt: FloatArray, idx: NDArray[np.int64]) -> list[dict[str, float]]:
    """Mean and CI per column of a (P, len(ns)) array of per-prompt values."""
    reps = _replicate_means(per_prompt, idx)
    return [_interval(per_prompt[:, k], reps[:, k]).as_dict() for k in range(per_prompt.shape[1])]


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


def overoptimisation(
    curves: FloatArray, ns: Sequence[int], validation: NDArray[np.bool_], idx_test: NDArray[np.int64]
) -> dict[str, Any]:
    """The peak n of the gold chosen on the validation prompts, and gold@N minus gold at that n on the test prompts
    with its CI and verdict. curves: (P, len(ns)) gold@n per prompt; idx_test: (B, P_test) resampling indices of the
    test prompts."""
    val, test = curves[validation], curves[~validation]
    if val.shape[0] == 0 or test.shape[0] == 0:
        return {"peak_n": None, "drop": None, "verdict": "not run (too few prompts for a validation half)"}
    peak = int(np.argmax(np.nanmean(val, axis=0)))
    peak_n = int(ns[peak])
    drop = test[:, -1] - test[:, peak]
    interval = _interval(drop, _replicate_means(drop, idx_test))
    if peak == len(ns) - 1:
        verdict = "peaks at N"
    else:
        verdict = {"held": "not over-optimised", "not held": "over-optimised", "inconclusive": "inconclusive"}.get(
            interval_verdict(interval.low, interval.high) or "", "inconclusive"
        )
    return {"peak_n": peak_n, "drop": interval.as_dict(), "verdict": verdict, "test_prompts": int(test.shape[0])}


def _paired_drop(
    gold_a: FloatArray, gold_b: FloatArray, validation: NDArray[np.bool_], idx_test: NDArray[np.int64]
) -> dict[str, Any] | None:
    """(gold@N - gold at a's validation peak) minus the same for b, per test prompt: its mean, CI and verdict (above
    0: a loses less after its peak than b). None without both halves."""
    if validation.all() or not validation.any():
        return None
    peak_a = int(np.argmax(np.nanmean(gold_a[validation], axis=0)))
    peak_b = int(np.argmax(np.nanmean(gold_b[validation], axis=0)))
    test_a, test_b = gold_a[~validation], gold_b[~validation]
    diff = (test_a[:, -1] - test_a[:, peak_a]) - (test_b[:, -1] - test_b[:, peak_b])
    interval = _interval(diff, _replicate_means(diff, idx_test)).as_dict()
    return {**interval, "verdict": interval_verdict(interval["low"], interval["high"])}


def best_of_n_estimates(
    prompt_ids: Sequence[str],
    selectors: Mapping[str, ArrayLike],
    golds: Mapping[str, ArrayLike],
    lengths: ArrayLike,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Every best-of-n figure of a run (see the module docstring) as a JSON-ready dict.

    selectors: proxy name -> rewards (P, N); golds: gold name -> values (P, N), NaN where the gold cannot score a
    sample (it is then left out of that prompt's figures: a prompt with any NaN is dropped for that gold); lengths:
    (P, N). Per gold: the KL bound per n, and per selector (each proxy, then the length selector and the oracle):
    gold@n, proxy@n (the selector's own value; also as its gain over n = 1 in the selector's standard deviations
    over all samples, own_gain_in_sd_at_n) and the picked length per n with CIs, gold@N - gold@1 (does the
    selector raise the gold above random choice), the over-optimisation verdict, and the within-prompt rank
    correlation of selector and gold; then, for every two proxies a and b, the paired differences of gold@n and of
    their drops after the validation peak (drop_diff: a's minus b's on the test prompts).
    """
    length_arr = np.asarray(lengths, dtype=np.float64)
    n_prompts, n_samples = length_arr.shape
    ns = powers_of_two(n_samples)
    validation = validation_half(prompt_ids)
    out: dict[str, Any] = {
        "n": n_samples,
        "ns": ns,
        "kl_bound": [kl_bound(n) for n in ns],
        "prompts": n_prompts,
        "validation_prompts": int(validation.sum()),
        "golds": {},
    }
    rng = np.random.default_rng(seed)
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
        per_selector: dict[str, Any] = {}
        for name, c in curves.items():
            gain = c.gold[:, -1] - c.gold[:, 0]
            gain_ci = _interval(gain, _replicate_means(gain, idx)).as_dict()
            corr = within_prompt_correlation(chooser[name], g)
            scale = float(np.std(chooser[name]))
            own_gain = (c.own - c.own[:, :1]) / scale if scale > 0 else np.zeros_like(c.own)
            per_selector[name] = {
                "gold_at_n": _per_n(c.gold, idx),
                "own_at_n": _per_n(c.own, idx),
                "own_sd": scale,
                "own_gain_in_sd_at_n": _per_n(own_gain, idx),
                "length_at_n": _per_n(c.length, idx),
                "gain_over_random": {**gain_ci, "verdict": interval_verdict(gain_ci["low"], gain_ci["high"])},
                "rank_correlation": {
                    **_interval(corr, _replicate_means(corr, idx)).as_dict(),
                    "prompts": int(np.isfinite(corr).sum()),
                },
                "overoptimisation": overoptimisation(c.gold, ns, validation[keep], idx_test),
            }
        proxies = list(selectors)
        paired: list[dict[str, Any]] = []
        for i, a in enumerate(proxies):
            for b in proxies[i + 1 :]:
                rows: list[dict[str, Any]] = [
                    {**row, "verdict": interval_verdict(row["low"], row["high"])}
                    for row in _per_n(curves[a].gold - curves[b].gold, idx)
                ]
                drops = _paired_drop(curves[a].gold, curves[b].gold, validation[keep], idx_test)
                paired.append({"a": a, "b": b, "gold_diff_at_n": rows, "drop_diff": drops})
        out["golds"][gold_name] = {
            "prompts": int(kept_ids.size),
            "dropped_prompts": int(n_prompts - kept_ids.size),
            "selectors": per_selector,
            "paired": paired,
        }
    return out
