"""Which PEBS variant to keep: held-out RMSE of the uncentred (METHODS.md), centred and joint variants against
pooled, per-rater OLS and MixedLM on synthetic raters, with intervals over data replicates and raters.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/calibration_variants.py  # docs/results/calibration-variants.json

Two designs from the normal hierarchical model (rewardsmith.calibrate.synthetic): per replicate, `--raters`
raters with (slope, intercept) ~ N((1, 0), T), slope SD 0.4, intercept SD 0.8, correlation 0.5, noise SD 1,
10-39 ratings each; model scores r ~ N(shift_j, 1) with shift_j = 0 for every rater ("balanced") or
shift_j ~ N(0, 1) ("unbalanced": raters see items with different mean model scores, as in PRISM-like designs).
Replicate d draws its raters with seed 100 + d, its rating counts with seed d and its ratings with seed 200 + d,
so the two designs share raters and noise and differ only in the shifts.

Each replicate runs the package's within-rater hold-out (rewardsmith.calibrate.evaluate.evaluate_holdout: 20 %
of every rater held out, `--split-seeds` splits). Gains are 100 (1 - RMSE_method / RMSE_reference) over all
held-out ratings; their 95 % intervals come from the hierarchical bootstrap of rewardsmith.stats (replicates,
then raters within replicate), paired across methods.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.calibrate.config import EvalConfig
from rewardsmith.calibrate.evaluate import evaluate_holdout
from rewardsmith.calibrate.synthetic import simulate_parameters, simulate_ratings
from rewardsmith.stats import hierarchical_indices, percentile_interval

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "calibration-variants.json"
METHODS = ["pooled", "ols", "pebs-uncentred", "pebs-centred", "pebs", "mixedlm"]
DESIGNS = {"balanced": 0.0, "unbalanced": 1.0}  # design -> SD of the raters' mean model-score shifts
RATER_PRIOR = {"slope": 1.0, "slope_sd": 0.4, "intercept_sd": 0.8, "correlation": 0.5, "noise_sd": 1.0}
COUNT_RANGE = (10, 40)  # ratings per rater drawn uniformly from [10, 40)
# (method, reference) pairs whose gain is reported with an interval.
COMPARISONS = (
    [(m, "pooled") for m in METHODS if m != "pooled"]
    + [(m, "ols") for m in METHODS if m not in ("pooled", "ols")]
    + [("pebs", "pebs-centred"), ("pebs", "pebs-uncentred"), ("pebs-centred", "pebs-uncentred"), ("pebs", "mixedlm")]
)


def held_out_errors(
    shift_sd: float, replicate: int, n_raters: int, config: EvalConfig
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-rater held-out squared-error sums of every method (J,) and held-out counts (J,) for one replicate."""
    params = simulate_parameters(n_raters, seed=100 + replicate, **RATER_PRIOR)
    counts = np.random.default_rng(replicate).integers(*COUNT_RANGE, size=n_raters)
    table = simulate_ratings(params, counts, rater_r_shift_sd=shift_sd, seed=200 + replicate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # clipped tau^2 or non-converged MixedLM warnings are not results here
        result = evaluate_holdout(table, config)
    return {m: result.methods[m].sse for m in METHODS}, result.count


def summarise_design(sse: dict[str, np.ndarray], count: np.ndarray, n_boot: int, confidence: float) -> dict[str, Any]:
    """RMSE per method and paired gains with hierarchical intervals; sse[m] and count are (replicates, raters)."""
    seed_idx, unit_idx = hierarchical_indices(count.shape[0], count.shape[1], n_boot, seed=0)

    def resampled_sums(values: np.ndarray) -> np.ndarray:  # (n_boot,) sums over a replicate's resampled raters
        return values[seed_idx[..., None], unit_idx].sum(axis=(1, 2))

    boot = {m: resampled_sums(v) for m, v in sse.items()}
    comparisons = []
    for method, reference in COMPARISONS:
        gain = 100 * (1 - np.sqrt(sse[method].sum() / sse[reference].sum()))
        reps = 100 * (1 - np.sqrt(boot[method] / boot[reference]))
        comparisons.append(
            {
                "method": method,
                "reference": reference,
                "gain_pct": float(gain),
                "ci": list(percentile_interval(reps, confidence)),
            }
        )
    return {
        "rmse": {m: float(np.sqrt(v.sum() / count.sum())) for m, v in sse.items()},
        "heldout_ratings": int(count.sum()),
        "comparisons": comparisons,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raters", type=int, default=300, help="raters per replicate")
    parser.add_argument("--replicates", type=int, default=10, help="independent synthetic tables per design")
    parser.add_argument("--split-seeds", type=int, default=5, help="hold-out splits per table")
    parser.add_argument("--bootstrap", type=int, default=2000, help="hierarchical bootstrap resamples")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    start = time.perf_counter()
    config = EvalConfig(holdout=0.2, seeds=args.split_seeds, methods=list(METHODS), bootstrap=0)
    designs = {}
    for design, shift_sd in DESIGNS.items():
        per_rep = [held_out_errors(shift_sd, d, args.raters, config) for d in range(args.replicates)]
        sse = {m: np.stack([errors[m] for errors, _ in per_rep]) for m in METHODS}
        count = np.stack([c for _, c in per_rep])
        designs[design] = {
            "rater_r_shift_sd": shift_sd,
            **summarise_design(sse, count, args.bootstrap, config.confidence),
        }
        print(design, {m: round(v, 4) for m, v in designs[design]["rmse"].items()}, flush=True)
    command = (
        f"OMP_NUM_THREADS=1 .venv/bin/python experiments/calibration_variants.py --raters {args.raters} "
        f"--replicates {args.replicates} --split-seeds {args.split_seeds} --bootstrap {args.bootstrap}"
    )
    result = {
        "command": command,
        "setup": {
            "raters": args.raters,
            "ratings_per_rater": [COUNT_RANGE[0], COUNT_RANGE[1] - 1],
            **RATER_PRIOR,
            "model_score_sd": 1.0,
            "holdout": config.holdout,
            "replicates": args.replicates,
            "split_seeds": args.split_seeds,
            "bootstrap": args.bootstrap,
            "confidence": config.confidence,
        },
        "designs": designs,
        "seconds": time.perf_counter() - start,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
