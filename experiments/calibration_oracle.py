"""PEBS against the oracle that knows the true between-rater variance: the ratio of their risks from 10 to 1,000
raters, and the rate at which it falls to 1 (rewardsmith.calibrate.oracle; the claim pebs.oracle).

    .venv/bin/python experiments/calibration_oracle.py    # docs/results/calibration-oracle.json (about a minute)
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from rewardsmith.calibrate.oracle import COUNTS, N_MIN, PRIOR, oracle_study
from rewardsmith.io.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "calibration-oracle.json"
GRID = (10, 20, 50, 100, 200, 500, 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000, help="simulated panels per number of raters")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    start = time.perf_counter()
    study = oracle_study(GRID, args.replicates, args.seed)
    result = {
        "command": f"python experiments/calibration_oracle.py --replicates {args.replicates} --seed {args.seed}",
        "grid": list(GRID),
        "replicates": args.replicates,
        "seed": args.seed,
        "prior": PRIOR,
        "ratings_per_rater": list(COUNTS),
        "n_min": N_MIN,
        "ratios": [{**asdict(r), "scaled_excess": r.scaled_excess} for r in study.ratios],
        "rate": study.rate,
        "rate_ci": list(study.rate_ci),
        "seconds": round(time.perf_counter() - start, 1),
    }
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    for r in study.ratios:
        print(
            f"J={r.raters:5d}  ratio {r.ratio:.5f} [{r.ratio_ci[0]:.5f}, {r.ratio_ci[1]:.5f}]  J(ratio-1) "
            f"{r.scaled_excess:.3f}"
        )
    print(f"rate {study.rate:.3f} [{study.rate_ci[0]:.3f}, {study.rate_ci[1]:.3f}] -> {args.out}")


if __name__ == "__main__":
    main()
