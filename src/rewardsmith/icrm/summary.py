"""Summary statistics of the ICRM runs over seeds (experiments/icrm.py summarise -> docs/results/icrm.json): every
protocol's figures as the mean over seeds with a 95% CI from the hierarchical bootstrap of rewardsmith.stats (seeds,
then pairs within seed; differences paired on the same draws). The inputs are each seed's `<protocol>/metrics.json`
and `per_pair.json` as `rewardsmith icrm eval` writes them, read into dicts; nothing here reads files.

The claims these figures test and their bars are in rewardsmith.icrm.claims; rewardsmith.icrm.claim_results judges
them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rewardsmith.errors import DataError
from rewardsmith.evaluate.metrics import expected_calibration_error, hypervolume_2d
from rewardsmith.icrm.claims import N_CALIBRATION_FROM, N_MAX, N_RMBENCH_FROM
from rewardsmith.icrm.protocols.calibration import reliability
from rewardsmith.stats import (
    Interval,
    hierarchical_indices,
    hierarchical_replicates,
    mean_interval,
    paired_difference,
    replicate_interval,
)

ECE_REPLICATES = 300  # ECE is re-binned in every replicate: a few hundred settle the interval
RMBENCH_KEYS = ("easy", "normal", "hard", "avg")
FLIPPED = ("harmless-flipped", "helpful-flipped")


def _r(x: float, digits: int = 4) -> float | None:
    return round(float(x), digits) if np.isfinite(x) else None


def record(interval: Interval) -> dict[str, Any]:
    """An interval as icrm.json holds it: {"mean", "ci": [low, high]}, rounded to 4 digits (None where not finite)."""
    return {"mean": _r(interval.estimate), "ci": [_r(interval.low), _r(interval.high)]}


def statistic_interval(
    arrays: list[np.ndarray], statistic: Callable[[np.ndarray], float], n_boot: int, seed: int = 0
) -> Interval:
    """statistic of each seed's array (K, ...) averaged over seeds, with a 95% hierarchical bootstrap CI: each
    replicate draws seed slots, then pairs (axis 0) within each slot, and averages the statistic over slots."""
    n_seeds, n_units = len(arrays), arrays[0].shape[0]
    seed_idx, unit_idx = hierarchical_indices(n_seeds, n_units, n_boot, seed)
    point = float(np.mean([statistic(a) for a in arrays]))
    reps = np.array(
        [
            np.mean([statistic(arrays[seed_idx[b, j]][unit_idx[b, j]]) for j in range(n_seeds)])
            for b in range(seed_idx.shape[0])
        ]
    )
    return replicate_interval(point, reps, n_units)


def _aligned(per_seed: list[dict[str, Any]], key: str, where: str) -> None:
    first = per_seed[0][key]
    for other in per_seed[1:]:
        if other[key] != first:
            raise DataError(f"{where}: the seeds scored different target pairs")


def _n_pair(n_values: list[int], preferred: int) -> tuple[int, int]:
    """(low N, high N) of a comparison: `preferred` when below the largest N, else the smallest positive N."""
    high = N_MAX if N_MAX in n_values else max(n_values)
    low = preferred if preferred in n_values and preferred < high else min(n for n in n_values if n > 0)
    return low, high


# ----------------------------------------------------------------------------------------------------
# Protocols


def summarise_steerability(
    metrics: list[dict[str, Any]], pairs: list[dict[str, Any]], n_boot: int, ceilings: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Accuracy per standard and N, BT, ICRM at the largest N minus BT, and for each flipped standard with a
    ceiling run: the ceiling's accuracy and the ICRM's share of it, (ICRM - 50) / (ceiling - 50) per seed."""
    _aligned(pairs, "pair_ids", "steerability")
    n_values = metrics[0]["n_values"]
    n = max(n_values)
    out: dict[str, Any] = {"test_pairs": metrics[0]["test_pairs"], "n_max": n, "accuracy": {}}
    for std in pairs[0]["standards"]:
        by_n = {
            str(k): record(mean_interval(100 * np.stack([p["standards"][std]["icrm"][str(k)] for p in pairs]), n_boot))
            for k in n_values
        }
        entry: dict[str, Any] = {"icrm": by_n}
        icrm_max = np.stack([p["standards"][std]["icrm"][str(n)] for p in pairs])
        if all("bt" in p["standards"][std] for p in pairs):
            bt = np.stack([p["standards"][std]["bt"] for p in pairs])
            entry["bt"] = record(mean_interval(100 * bt, n_boot))
            entry[f"icrm_n{n}_minus_bt"] = record(paired_difference(100 * icrm_max, 100 * bt, n_boot))
        if ceilings.get(std):
            _aligned([pairs[0], *ceilings[std]], "pair_ids", f"steerability ceiling of {std}")
            ceiling = np.stack([c["standards"][std]["bt"] for c in ceilings[std]])
            entry["ceiling"] = record(mean_interval(100 * ceiling, n_boot))
            entry["share_of_ceiling"] = record(
                statistic_interval(
                    list(np.stack([icrm_max, ceiling], axis=-1)),
                    lambda a: float((a[:, 0].mean() - 0.5) / (a[:, 1].mean() - 0.5)),
                    n_boot,
                )
            )
        out["accuracy"][std] = entry
    if all("bt" in p["standards"][s] for p in pairs for s in FLIPPED):
        diff = np.mean(
            [
                100
                * (
                    np.stack([p["standards"][s]["icrm"][str(n)] for p in pairs])
                    - np.stack([p["standards"][s]["bt"] for p in pairs])
                )
                for s in FLIPPED
            ],
            axis=0,
        )
        out["flipped_minus_bt_mean"] = record(mean_interval(diff, n_boot))  # a mean of paired differences
    return out


def ece_statistic(rates: np.ndarray) -> Callable[[np.ndarray], float]:
    """ECE (probability mode, 10 bins) of one seed's posterior means (K, R) against the rates 1 - p (R,)."""

    def ece(mu: np.ndarray) -> float:
        return expected_calibration_error(
            mu.ravel(), np.broadcast_to(1.0 - rates, mu.shape).ravel(), mode="probability"
        )

    return ece


def per_pair_mae(mu: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Per-pair mean over rates of |mu - (1 - p)|: (S, K, R) -> (S, K)."""
    return np.abs(mu - (1.0 - rates)).mean(axis=-1)


def reliability_statistic(rates: np.ndarray, key: str) -> Callable[[np.ndarray], float]:
    """The slope or the MAE of the reliability of one seed's posterior means (K, R) across the rates (R,)."""

    def stat(mu: np.ndarray) -> float:
        return float(reliability(mu.T, rates)[key])

    return stat


def summarise_calibration(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]], n_boot: int) -> dict[str, Any]:
    """Per N: ECE and per-pair MAE (kept beside the paper's ECE), the reliability slope and MAE across the mixing
    rates and the mean mu at each rate; the same for BT and a constant 0.5 forecast; the reliability MAE at the
    largest N minus the constant's, and at N=8 minus at the largest N (paired)."""
    _aligned(pairs, "pair_ids", "calibration")
    n_values = metrics[0]["n_values"]
    rates = np.asarray(pairs[0]["flip_rates"], dtype=np.float64)
    # mu[n]: (S, K, R) posterior means per seed, pair and demonstrated flip rate.
    mu = {str(n): np.stack([np.asarray(p["icrm_mu"][str(n)]).T for p in pairs]) for n in n_values}
    boot = min(n_boot, ECE_REPLICATES)
    constant = reliability(np.full((len(rates), 2), 0.5), rates)
    out: dict[str, Any] = {
        "test_pairs": metrics[0]["test_pairs"],
        "rates": (1.0 - rates).tolist(),
        "by_n": {},
        "constant": {"reliability_slope": 0.0, "reliability_mae": _r(constant["mae"]), "mean_mu": constant["mean_mu"]},
    }

    def block(m: np.ndarray) -> dict[str, Any]:
        return {
            "ece": record(statistic_interval(list(m), ece_statistic(rates), boot)),
            "mean_abs_error": record(mean_interval(per_pair_mae(m, rates), n_boot)),
            "reliability_slope": record(statistic_interval(list(m), reliability_statistic(rates, "slope"), boot)),
            "reliability_mae": statistic_interval(list(m), reliability_statistic(rates, "mae"), boot),
            "mean_mu": [_r(x) for x in m.mean(axis=(0, 1))],
        }

    blocks = {str(n): block(mu[str(n)]) for n in n_values}
    if all("bt_mu" in p for p in pairs):
        blocks["bt"] = block(np.stack([np.repeat(np.asarray(p["bt_mu"])[:, None], len(rates), axis=1) for p in pairs]))
    low, high = _n_pair(n_values, N_CALIBRATION_FROM)
    high_minus_constant = blocks[str(high)]["reliability_mae"].shifted(constant["mae"])  # an exact constant
    for key, b in blocks.items():
        b["reliability_mae"] = record(b["reliability_mae"])
        (out if key == "bt" else out["by_n"])[key] = b
    out["n_high"], out["n_low"] = high, low
    out["mae_high_minus_constant"] = record(high_minus_constant)
    r = len(rates)
    joined = [np.concatenate([a, b], axis=-1) for a, b in zip(mu[str(low)], mu[str(high)], strict=True)]
    mae = reliability_statistic(rates, "mae")
    out["mae_low_minus_high"] = record(statistic_interval(joined, lambda m: mae(m[:, :r]) - mae(m[:, r:]), boot))
    return out


def summarise_rmbench(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]], n_boot: int) -> dict[str, Any]:
    """Accuracy per subset and overall (every prompt weighted alike) as N grows, BT, and the change from N=1 to
    the largest N per subset, overall, and as the mean of the subsets (each subset weighted alike, its prompts
    resampled within it)."""
    _aligned(pairs, "prompt_ids", "rmbench")
    n_values = metrics[0]["n_values"]
    subsets = np.asarray(pairs[0]["subset"])
    names = list(dict.fromkeys(subsets.tolist()))
    groups = {"overall": np.ones(len(subsets), dtype=bool), **{s: subsets == s for s in names}}
    out: dict[str, Any] = {
        "prompts": {g: int(mask.sum()) for g, mask in groups.items()},
        "accuracy": {},
        "overall_weighting": "every prompt alike (subsets by their prompt counts)",
    }
    for group, mask in groups.items():
        entry: dict[str, Any] = {
            "icrm": {
                str(n): {
                    k: record(mean_interval(np.stack([p["icrm"][str(n)][k] for p in pairs])[:, mask], n_boot))
                    for k in RMBENCH_KEYS
                }
                for n in n_values
            }
        }
        if all("bt" in p for p in pairs):
            entry["bt"] = {
                k: record(mean_interval(np.stack([p["bt"][k] for p in pairs])[:, mask], n_boot)) for k in RMBENCH_KEYS
            }
        out["accuracy"][group] = entry
    low, high = _n_pair(n_values, N_RMBENCH_FROM)
    diff = np.stack([np.asarray(p["icrm"][str(high)]["avg"]) - np.asarray(p["icrm"][str(low)]["avg"]) for p in pairs])
    out["n_low"], out["n_high"] = low, high
    out["change"] = {g: record(mean_interval(diff[:, mask], n_boot)) for g, mask in groups.items()}
    # Stratified: every subset resampled on its own with the same seed draws, the replicates averaged.
    reps = np.mean([hierarchical_replicates(diff[:, subsets == s], n_boot, 0) for s in names], axis=0)
    point = float(np.mean([diff[:, subsets == s].mean() for s in names]))
    out["change"]["mean of subsets"] = record(replicate_interval(point, reps, len(subsets)))
    return out


def hv_replicates(
    respond: list[np.ndarray], refuse: list[np.ndarray], n_boot: int, seed: int = 0
) -> tuple[float, np.ndarray]:
    """Hypervolume of one frontier: per seed, respond (W, K1) and refuse (W, K2) correctness at each weight (or
    (1, K) for one point). Point: the mean over seeds of each seed's hypervolume; replicates (n_boot,): seed slots
    drawn, then each target's pairs within the slot (`seed` fixes the draws, so frontiers are paired)."""

    def hv(a: np.ndarray, b: np.ndarray) -> float:
        return hypervolume_2d(np.stack([a.mean(axis=1), b.mean(axis=1)], axis=1))

    rng = np.random.default_rng(seed)
    n_seeds = len(respond)
    seeds = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
    idx_a = rng.integers(0, respond[0].shape[1], size=(n_boot, n_seeds, respond[0].shape[1]))
    idx_b = rng.integers(0, refuse[0].shape[1], size=(n_boot, n_seeds, refuse[0].shape[1]))
    point = float(np.mean([hv(a, b) for a, b in zip(respond, refuse, strict=True)]))
    reps = np.array(
        [
            np.mean(
                [hv(respond[seeds[k, j]][:, idx_a[k, j]], refuse[seeds[k, j]][:, idx_b[k, j]]) for j in range(n_seeds)]
            )
            for k in range(n_boot)
        ]
    )
    return point, reps


def summarise_pareto(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]], n_boot: int) -> dict[str, Any]:
    """Hypervolume at every N and of BT's single point, with hierarchical bootstrap CIs from the per-pair
    correctness, the curve's peak, and the paired changes N=64 minus N=1 and N=64 minus BT."""
    _aligned(pairs, "respond_ids", "pareto")
    _aligned(pairs, "refuse_ids", "pareto")
    n_values = metrics[0]["n_values"]
    out: dict[str, Any] = {
        "respond_pairs": metrics[0]["respond_pairs"],
        "refuse_pairs": metrics[0]["refuse_pairs"],
        "hypervolume": {},
    }
    reps: dict[str, np.ndarray] = {}
    units = metrics[0]["respond_pairs"] + metrics[0]["refuse_pairs"]  # both targets' pairs are resampled
    for n in n_values:
        point, reps[str(n)] = hv_replicates(
            [np.asarray(p["icrm"][str(n)]["respond"], dtype=float) for p in pairs],
            [np.asarray(p["icrm"][str(n)]["refuse"], dtype=float) for p in pairs],
            n_boot,
        )
        out["hypervolume"][str(n)] = {
            **record(replicate_interval(point, reps[str(n)], units)),
            "per_seed": [_r(next(r["hypervolume"] for r in m["hypervolume"] if r["demos"] == n)) for m in metrics],
        }
    low, high = _n_pair(n_values, 1)
    means = {n: out["hypervolume"][str(n)]["mean"] for n in n_values}
    out["peak_n"] = max(means, key=lambda n: means[n])
    out["n_low"], out["n_high"] = low, high

    def change(a: str, b: str, point: float) -> dict[str, Any]:
        return record(replicate_interval(point, reps[a] - reps[b], units))  # frontiers drawn alike: paired

    out["high_minus_low"] = change(str(high), str(low), means[high] - means[low])
    if all("bt" in p for p in pairs):
        point, reps["bt"] = hv_replicates(
            [np.asarray(p["bt"]["respond"], dtype=float)[None] for p in pairs],
            [np.asarray(p["bt"]["refuse"], dtype=float)[None] for p in pairs],
            n_boot,
        )
        out["bt_hypervolume"] = record(replicate_interval(point, reps["bt"], units))
        out["high_minus_bt"] = change(str(high), "bt", means[high] - point)
    return out


def summarise_math500(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]], n_boot: int) -> dict[str, Any]:
    """The verifier proxy (reference above corrupted solutions) per N and BT, and the ICRM at the largest N minus
    BT; the paper's RL comparison is not run here."""
    _aligned(pairs, "pair_ids", "math500")
    n_values = metrics[0]["n_values"]
    n = max(n_values)
    out: dict[str, Any] = {
        "test_pairs": metrics[0]["test_pairs"],
        "n_max": n,
        "accuracy": {
            str(k): record(mean_interval(100 * np.stack([p["icrm"][str(k)] for p in pairs]), n_boot)) for k in n_values
        },
        "rl": "not run: no policy is trained with either reward here",
    }
    if all("bt" in p for p in pairs):
        bt = np.stack([p["bt"] for p in pairs])
        out["bt"] = record(mean_interval(100 * bt, n_boot))
        out["icrm_minus_bt"] = record(
            paired_difference(100 * np.stack([p["icrm"][str(n)] for p in pairs]), 100 * bt, n_boot)
        )
    return out
