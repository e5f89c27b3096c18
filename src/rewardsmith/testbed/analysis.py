"""What the testbed's runs say, as pure functions of their saved scores (experiments/testbed.py reads the files):
each proxy size's agreement with the gold, Gao's forms fitted per size with the differences the scaling claims
compare, the doubt of an ensemble's best-of-n pick, and what is chosen on validation prompts (uwo's lambda, the
positive control's hack rate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.evaluate.best_of_n import best_of_n_curves
from rewardsmith.stats import Interval, bootstrap_indices, mean_interval, paired_difference, percentile_interval
from rewardsmith.testbed.fits import fit_form, inverse_peak, peak

FloatArray = NDArray[np.float64]


def correct_pairs(chosen: ArrayLike, rejected: ArrayLike) -> FloatArray:
    """1 where a model's reward of the gold's chosen response is above its rejected one's, 0.5 on a tie, else 0."""
    margin = np.asarray(chosen, dtype=np.float64) - np.asarray(rejected, dtype=np.float64)
    return np.where(margin > 0, 1.0, np.where(margin == 0, 0.5, 0.0))


def agreement(correct: Mapping[int, Sequence[ArrayLike]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per proxy size: the agreement with the gold (%) over its seeds (S, pairs), resampled seeds then pairs; and the
    largest size minus the smallest, seeds and pairs paired."""
    sizes = sorted(correct)
    per_size = {n: np.stack([np.asarray(c, dtype=np.float64) for c in correct[n]]) for n in sizes}
    out: dict[str, Any] = {str(n): mean_interval(per_size[n], n_boot, seed, scale=100.0).to_dict() for n in sizes}
    small, large = per_size[sizes[0]], per_size[sizes[-1]]
    seeds = min(len(small), len(large))
    out["largest_minus_smallest"] = paired_difference(large[:seeds], small[:seeds], n_boot, seed, scale=100.0).to_dict()
    return out


def gold_curves(selector: ArrayLike, gold: ArrayLike, ns: Sequence[int]) -> FloatArray:
    """Per prompt the gold of the selector's best-of-n pick (P, len(ns)) (evaluate.best_of_n)."""
    return best_of_n_curves(np.asarray(selector, dtype=np.float64), np.asarray(gold, dtype=np.float64), ns)


def _seed_mean_fit(curves: Sequence[FloatArray], d: FloatArray, rows: NDArray[np.int64]) -> tuple[float, float]:
    """(alpha, beta) averaged over seeds, each seed's form fitted to its gain over n = 1 on the prompts `rows`."""
    fits = [fit_form(d, np.nanmean(c[rows] - c[rows][:, :1], axis=0), "bon") for c in curves]
    return float(np.mean([f[0] for f in fits])), float(np.mean([f[1] for f in fits]))


def scaling(
    curves: Mapping[int, Sequence[FloatArray]], kl: Sequence[float], n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Gao's best-of-n form per proxy size (seed means of each seed's fit; prompts resampled together for every size):
    alpha, beta and the peak d* with CIs; and beta(smallest) - beta(largest), d*(largest) - d*(smallest) and
    1/d*(smallest) - 1/d*(largest)."""
    sizes = sorted(curves)
    d = np.sqrt(np.asarray(kl, dtype=np.float64))
    prompts = len(next(iter(curves.values()))[0])
    every = np.arange(prompts)
    point = {n: _seed_mean_fit(curves[n], d, every) for n in sizes}
    reps = {n: [] for n in sizes}  # type: dict[int, list[tuple[float, float]]]
    for idx in bootstrap_indices(prompts, n_boot, seed):
        for n in sizes:
            reps[n].append(_seed_mean_fit(curves[n], d, idx))

    def interval(value: float, values: Sequence[float]) -> dict[str, Any]:
        finite = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
        low, high = percentile_interval(finite) if finite.size else (float("nan"), float("nan"))
        return Interval(value, low, high, prompts).to_dict()

    out: dict[str, Any] = {"d": [float(x) for x in d], "sizes": {}}
    for n in sizes:
        a, b = point[n]
        out["sizes"][str(n)] = {
            "alpha": interval(a, [r[0] for r in reps[n]]),
            "beta": interval(b, [r[1] for r in reps[n]]),
            "peak_d": interval(peak(a, b), [peak(*r) for r in reps[n]]),
            "mean_gain": [float(x) for x in np.mean([np.nanmean(c - c[:, :1], axis=0) for c in curves[n]], axis=0)],
        }
    small, large = sizes[0], sizes[-1]
    out["beta_smallest_minus_largest"] = interval(
        point[small][1] - point[large][1], [s[1] - g[1] for s, g in zip(reps[small], reps[large], strict=True)]
    )
    out["peak_largest_minus_smallest"] = interval(
        peak(*point[large]) - peak(*point[small]),
        [peak(*g) - peak(*s) for s, g in zip(reps[small], reps[large], strict=True)],
    )
    # 1 / d* = 2 beta / alpha: finite where a curve has no peak (beta <= 0, d* infinite), so "the peak moves right"
    # is measured on every resample (the difference of d* above drops those where a size has no peak).
    out["inverse_peak_smallest_minus_largest"] = interval(
        inverse_peak(*point[small]) - inverse_peak(*point[large]),
        [inverse_peak(*s) - inverse_peak(*g) for s, g in zip(reps[small], reps[large], strict=True)],
    )
    return out


def standardised_sd(members: ArrayLike, mean: Sequence[float], sd: Sequence[float]) -> FloatArray:
    """The sd (ddof 1) across K members of their standardised rewards: members (K, ...) -> (...)."""
    m = np.asarray(members, dtype=np.float64)
    shape = (-1,) + (1,) * (m.ndim - 1)
    z = (m - np.asarray(mean).reshape(shape)) / np.asarray(sd).reshape(shape)
    return np.asarray(z.std(axis=0, ddof=1), dtype=np.float64)


def doubt_rise(
    ensemble: ArrayLike, doubt: ArrayLike, ns: Sequence[int], n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The doubt (P, N) of the ensemble's best-of-n pick at each n (mean over prompts, CIs), and at n = N minus at
    n = 1, paired over prompts."""
    curves = best_of_n_curves(np.asarray(ensemble, dtype=np.float64), np.asarray(doubt, dtype=np.float64), ns)
    return {
        "at_n": [mean_interval(curves[:, k], n_boot, seed).to_dict() for k in range(len(ns))],
        "rise": paired_difference(curves[:, -1], curves[:, 0], n_boot, seed).to_dict(),
    }


def choose_on_validation(curves: Mapping[str, FloatArray], validation: NDArray[np.bool_]) -> str:
    """The name whose gold at the largest n is highest on the validation prompts (ties: the first)."""
    return max(curves, key=lambda name: float(np.nanmean(curves[name][validation, -1])))


def choose_hack(
    curves: Mapping[str, FloatArray], validation: NDArray[np.bool_], ns: Sequence[int]
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The positive control among candidate hacked proxies (claims.py), from their gold curves (P, len(ns)) on the
    validation prompts only: the one whose mean gold peaks above n = 1 and below the largest n (bon's peak: the
    argmax of the validation mean) and drops most after it; none such, the first. Also each candidate's peak n and
    drop there, so the choice can be read."""
    facts: dict[str, dict[str, Any]] = {}
    for name, c in curves.items():
        mean = np.nanmean(np.asarray(c, dtype=np.float64)[validation], axis=0)
        top = int(np.argmax(mean))
        facts[name] = {"peak_n": int(ns[top]), "drop": float(mean[top] - mean[-1]), "shaped": 0 < top < len(ns) - 1}
    shaped = [name for name in curves if facts[name]["shaped"]]
    chosen = max(shaped, key=lambda name: facts[name]["drop"]) if shaped else next(iter(curves))
    return chosen, facts
