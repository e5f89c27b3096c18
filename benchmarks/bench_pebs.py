"""PEBS versus statsmodels MixedLM on the same data, and PEBS at 10 million ratings from 100,000 raters.

Run (about a minute on 2 cores; writes benchmarks/results/pebs.json and prints tables):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pebs.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pebs.py --quick     # 1 M ratings, smaller MixedLM set

Part 1 (same data, one within-rater hold-out of 20 % per seed): fit time of PEBS (sufficient statistics
from the table + shrinkage, best of 20) and of MixedLM (random intercept and slope by rater, REML, lbfgs;
best of 2), their ratio, and held-out RMSE of both and of the pooled map. Data sets: a synthetic table
from the normal hierarchical model with uneven rater sample sizes, and PluriHarms (Harm_Level as model
score) when the data directory is present.

Part 2 (variants): held-out RMSE of the PEBS variants (uncentred as in METHODS.md, centred, joint = the
kept default) against pooled, per-rater OLS and MixedLM on synthetic raters whose model scores share one
distribution (balanced) or have rater-specific means (unbalanced, as when raters see different items).

Part 3 (scale): a synthetic table of 10 M ratings from 100,000 raters (100 each on average, Poisson
counts). Timed: sufficient statistics with numpy from integer rater codes plus the PEBS fit; and the same
from a Parquet file through DuckDB (out of core; writing the file is timed separately).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from rewardsmith.calibrate import PEBS, MixedLMCalibrator, PooledAffine, rater_stats_duckdb, stats_from_arrays
from rewardsmith.calibrate.evaluate import within_rater_split
from rewardsmith.calibrate.synthetic import simulate_parameters, simulate_ratings
from rewardsmith.data.ratings import RatingTable, load_ratings
from rewardsmith.errors import DataError

RESULTS = Path(__file__).resolve().parent / "results" / "pebs.json"


def _timed(fn, repeats: int = 1) -> tuple[float, object]:
    """Best of `repeats` wall-clock times (the machine is shared; the minimum is the least disturbed)."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.min(times)), out


def compare_with_mixedlm(name: str, table: RatingTable, seeds: int) -> dict[str, object]:
    """Fit time and held-out RMSE of PEBS, MixedLM and pooled on the same within-rater splits."""
    frame = table.frame.reset_index(drop=True)
    rows: dict[str, list[float]] = {k: [] for k in ("pebs_s", "mixedlm_s", "rmse_pebs", "rmse_mixedlm", "rmse_pooled")}
    converged = []
    for seed in range(seeds):
        held = within_rater_split(frame, 0.2, seed)
        fit, test = frame.loc[~held], frame.loc[held]
        ids, r, y = test.rater_id.to_numpy(), test.model_score.to_numpy(), test.score.to_numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pebs_s, pebs = _timed(lambda fit=fit: PEBS().fit(fit), repeats=20)
            mixed_s, mixed = _timed(lambda fit=fit: MixedLMCalibrator().fit(fit), repeats=2)
        pooled = PooledAffine().fit(fit)
        rows["pebs_s"].append(pebs_s)
        rows["mixedlm_s"].append(mixed_s)
        for key, est in (("rmse_pebs", pebs), ("rmse_mixedlm", mixed), ("rmse_pooled", pooled)):
            rows[key].append(float(np.sqrt(np.mean((est.predict(ids, r) - y) ** 2))))  # type: ignore[union-attr]
        converged.append(bool(mixed.maps_.info["converged"]))  # type: ignore[union-attr]
    out: dict[str, object] = {
        "data": name,
        "ratings": len(frame),
        "raters": int(frame.rater_id.nunique()),
        "seeds": seeds,
        "mixedlm_converged": all(converged),
    }
    out.update({k: float(np.mean(v)) for k, v in rows.items()})
    out["speedup"] = float(np.mean(rows["mixedlm_s"]) / np.mean(rows["pebs_s"]))
    out["rmse_ratio_pebs_over_mixedlm"] = float(out["rmse_pebs"] / out["rmse_mixedlm"])  # type: ignore[operator]
    return out


VARIANTS = ("pooled", "ols", "pebs-uncentred", "pebs-centred", "pebs", "mixedlm")


def variant_comparison(seeds: int, n_raters: int = 300) -> list[dict[str, object]]:
    """Held-out RMSE of each calibrator on balanced and unbalanced synthetic designs (mean over seeds)."""
    from rewardsmith.calibrate import create_calibrator

    rows = []
    for design, shift_sd in (("balanced", 0.0), ("unbalanced", 1.0)):
        sq: dict[str, list[float]] = {m: [] for m in VARIANTS}
        for seed in range(seeds):
            params = simulate_parameters(
                n_raters, slope=1.0, slope_sd=0.4, intercept_sd=0.8, correlation=0.5, seed=100 + seed
            )
            counts = np.random.default_rng(seed).integers(10, 40, size=n_raters)
            frame = simulate_ratings(params, counts, rater_r_shift_sd=shift_sd, seed=200 + seed).frame
            held = within_rater_split(frame, 0.2, seed)
            fit, test = frame.loc[~held], frame.loc[held]
            for name in VARIANTS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = create_calibrator(name).fit(fit)
                pred = est.predict(test.rater_id.to_numpy(), test.model_score.to_numpy())
                sq[name].append(float(np.mean((pred - test.score.to_numpy()) ** 2)))
        row: dict[str, object] = {"design": design, "raters": n_raters, "seeds": seeds}
        row.update({f"rmse_{m}": float(np.sqrt(np.mean(v))) for m, v in sq.items()})
        rows.append(row)
    return rows


def scale_run(n_raters: int, mean_ratings: int, seed: int = 0) -> dict[str, object]:
    """Times PEBS on a large synthetic table: numpy in memory and DuckDB from Parquet."""
    rng = np.random.default_rng(seed)
    counts = np.maximum(rng.poisson(mean_ratings, n_raters), 1)
    params = simulate_parameters(n_raters, slope=1.0, slope_sd=0.3, intercept_sd=0.5, seed=seed)
    codes = np.repeat(np.arange(n_raters, dtype=np.int64), counts)
    r = rng.standard_normal(len(codes))
    s = params.slope[codes] * r + params.intercept[codes] + rng.standard_normal(len(codes))
    out: dict[str, object] = {"ratings": len(codes), "raters": n_raters}

    def numpy_path():
        stats = stats_from_arrays(codes, r, s, n_raters=n_raters)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return PEBS().fit(stats)

    out["numpy_s"], est = _timed(numpy_path, repeats=3)
    maps = est.maps_  # type: ignore[union-attr]
    fitted_slope = maps.slope[maps.index_of(np.arange(n_raters).astype(str))]  # maps are sorted by id text
    slope_err = float(np.sqrt(np.mean((fitted_slope - params.slope) ** 2)))
    out["numpy_slope_rmse_vs_truth"] = slope_err
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ratings.parquet"
        start = time.perf_counter()
        pd.DataFrame({"rater_id": codes, "score": s, "model_score": r}).to_parquet(path, row_group_size=1_000_000)
        out["parquet_write_s"] = time.perf_counter() - start
        out["parquet_mb"] = path.stat().st_size / 2**20

        def duckdb_path():
            stats, _ = rater_stats_duckdb(path, threads=2, memory_limit="2GB")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return PEBS().fit(stats)

        out["duckdb_s"], est_db = _timed(duckdb_path, repeats=2)
    maps_db = est_db.maps_  # type: ignore[union-attr]
    out["duckdb_matches_numpy"] = bool(
        np.array_equal(maps_db.rater_ids, maps.rater_ids) and np.allclose(maps_db.slope, maps.slope)
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 M ratings and a smaller MixedLM comparison")
    parser.add_argument("--seeds", type=int, default=3, help="hold-out seeds of the MixedLM comparison")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    comparisons = []
    n_raters = 200 if args.quick else 1000
    params = simulate_parameters(n_raters, slope=1.0, slope_sd=0.3, intercept_sd=0.5, correlation=0.3, seed=1)
    counts = np.random.default_rng(2).integers(8, 60, size=n_raters)
    comparisons.append(
        compare_with_mixedlm(
            f"synthetic ({n_raters} raters, 8-59 ratings each)",
            simulate_ratings(params, counts, seed=3),
            args.seeds,
        )
    )
    try:
        comparisons.append(compare_with_mixedlm("pluriharms (Harm_Level)", load_ratings("pluriharms"), args.seeds))
    except DataError as exc:
        print(f"pluriharms skipped: {exc}")
    variants = variant_comparison(args.seeds)
    scale = scale_run(10_000 if args.quick else 100_000, 100)

    result = {
        "comparisons": comparisons,
        "variants": variants,
        "scale": scale,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.machine(),
            "cpus": __import__("os").cpu_count(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))

    print(
        f"{'data':45s} {'ratings':>8s} {'PEBS s':>8s} {'MixedLM s':>10s} {'speedup':>8s} "
        f"{'RMSE PEBS':>10s} {'RMSE MixedLM':>12s} {'RMSE pooled':>11s}"
    )
    for c in comparisons:
        print(
            f"{c['data']:45s} {c['ratings']:8d} {c['pebs_s']:8.4f} {c['mixedlm_s']:10.3f} "
            f"{c['speedup']:7.0f}x "
            f"{c['rmse_pebs']:10.4f} {c['rmse_mixedlm']:12.4f} {c['rmse_pooled']:11.4f}"
        )
    print("\nheld-out RMSE by variant (synthetic):")
    print(f"{'design':12s}" + "".join(f"{m:>16s}" for m in VARIANTS))
    for v in variants:
        print(f"{v['design']:12s}" + "".join(f"{v['rmse_' + m]:16.4f}" for m in VARIANTS))
    print(
        f"\nscale: {scale['ratings']:,} ratings from {scale['raters']:,} raters: "
        f"numpy {scale['numpy_s']:.2f} s, "
        f"DuckDB from Parquet {scale['duckdb_s']:.2f} s (writing the {scale['parquet_mb']:.0f} MB file: "
        f"{scale['parquet_write_s']:.1f} s); slope RMSE vs truth {scale['numpy_slope_rmse_vs_truth']:.3f}; "
        f"DuckDB = numpy: {scale['duckdb_matches_numpy']}"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
