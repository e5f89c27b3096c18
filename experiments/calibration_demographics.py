"""How much of the raters' calibration differences PluriHarms's demographic columns explain: the share of the
between-rater variance of each map parameter lying between a column's groups (rewardsmith.calibrate.demographics;
the claim pebs.demographics). DICES-350 carries no demographics (the conversion dropped them).

    REWARDSMITH_DATA_DIR=../shared/data .venv/bin/python experiments/calibration_demographics.py
        # docs/results/calibration-demographics.json (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from rewardsmith.calibrate.demographics import demographic_shares
from rewardsmith.calibrate.stats import rater_stats
from rewardsmith.data.ratings import load_ratings
from rewardsmith.io.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "calibration-demographics.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    start = time.perf_counter()
    table = load_ratings("pluriharms", data_dir=os.environ.get("REWARDSMITH_DATA_DIR"))
    stats = rater_stats(table, table.demographic_columns)
    shares = demographic_shares(stats, n_boot=args.bootstrap, seed=args.seed)
    result = {
        "command": f"python experiments/calibration_demographics.py --bootstrap {args.bootstrap} --seed {args.seed}",
        "corpus": "PluriHarms",
        "raters": table.n_raters,
        "ratings": table.n_ratings,
        "columns": [asdict(s) for s in shares],
        "seconds": round(time.perf_counter() - start, 1),
    }
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    for s in shares:
        print(
            f"{s.column:22s} {s.groups} groups: slope {s.share['slope']:+.3f} {s.share_ci['slope']}, "
            f"intercept {s.share['intercept']:+.3f} {s.share_ci['intercept']}"
        )
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
