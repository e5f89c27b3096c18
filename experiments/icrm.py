"""Do the in-context reward model's (ICRM's) claims hold when it is evaluated only on data no training saw?

    .venv/bin/python experiments/icrm.py run [--seeds 0 1 2] [--jobs 1]   # trains and evaluates every seed
    .venv/bin/python experiments/icrm.py summarise                        # writes docs/results/icrm.json
    # the same end to end on the tiny config, away from runs/icrm and docs/results:
    .venv/bin/python experiments/icrm.py run --config configs/icrm-tiny.yaml --steps 20 --runs /tmp/icrm-tiny
    .venv/bin/python experiments/icrm.py summarise --config configs/icrm-tiny.yaml --steps 20 --runs /tmp/icrm-tiny \
        --out /tmp/icrm-tiny/icrm.json

`run` calls, for each seed S (a finished run is reused), what docs/icrm.md's commands do:

    rewardsmith icrm train --config CFG --seed S --out runs/icrm/s<S>                  # the ICRM
    rewardsmith icrm train --config CFG --bt --seed S --out runs/icrm/bt-s<S>          # its BT baseline
    rewardsmith icrm eval --protocol all --config CFG --model runs/icrm/s<S>/model \\
        --bt-model runs/icrm/bt-s<S>/model --seed S --out runs/icrm/eval-s<S>          # every protocol

The eval seed (demonstration draws) follows the training seed, so a seed is one replicate of the whole pipeline.
Training sources exclude every evaluation set (configs/icrm-minilm.yaml); targets sharing a conversation with a
training pair are dropped (each protocol's `overlap_removed`).

`summarise` reads every seed's <protocol>/metrics.json and per_pair.json and reports each protocol's headline
figures as the mean over seeds with a 95% CI from the hierarchical bootstrap of rewardsmith.stats (seeds, then
pairs within seed; ICRM-minus-BT and N-versus-N differences paired on the same draws); the Pareto hypervolume has
no per-pair form, so it gets the seed mean with the min / max over seeds. Each paper claim of docs/icrm.md gets a
verdict: `held` (the interval of its difference lies above 0), `not held` (below 0) or `inconclusive` (it covers
0, or the claim is not measured by these runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rewardsmith.evaluate.metrics import expected_calibration_error  # noqa: E402
from rewardsmith.stats import (  # noqa: E402
    hierarchical_indices,
    hierarchical_replicates,
    interval_verdict,
    percentile_interval,
)

CONFIG = "configs/icrm-minilm.yaml"
RUNS = ROOT / "runs" / "icrm"
OUT = ROOT / "docs" / "results" / "icrm.json"
PROTOCOLS = ("steerability", "calibration", "rmbench", "pareto", "math500")
N_BOOT = 1000
ECE_REPLICATES = 300  # ECE is re-binned in every replicate: a few hundred settle the interval
RMBENCH_KEYS = ("easy", "normal", "hard", "avg")


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def commands(seed: int, config: str, runs: Path, steps: int | None) -> dict[str, list[str]]:
    """The three commands of one seed: ICRM training, BT baseline training, every evaluation protocol."""
    exe = str(ROOT / ".venv" / "bin" / "rewardsmith")
    icrm, bt, ev = (_shown(runs / f"{kind}{seed}") for kind in ("s", "bt-s", "eval-s"))
    steps_flag = ["--steps", str(steps)] if steps else []
    return {
        f"s{seed}": [exe, "icrm", "train", "--config", config, "--seed", str(seed), *steps_flag, "--quiet",
                     "--out", icrm],
        f"bt-s{seed}": [exe, "icrm", "train", "--config", config, "--bt", "--seed", str(seed), "--quiet", "--out", bt],
        f"eval-s{seed}": [exe, "icrm", "eval", "--protocol", "all", "--config", config, "--model", f"{icrm}/model",
                          "--bt-model", f"{bt}/model", "--seed", str(seed), "--quiet", "--out", ev],
    }


def _complete(folder: Path) -> bool:
    manifest = folder / "manifest.json"
    return manifest.exists() and json.loads(manifest.read_text(encoding="utf-8")).get("status") == "complete"


def run_all(seeds: list[int], config: str, runs: Path, steps: int | None, jobs: int) -> None:
    env = dict(os.environ)
    if jobs > 1:  # one thread per process: the machine's cores go to parallel seeds instead
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    runs.mkdir(parents=True, exist_ok=True)

    def one(seed: int) -> None:
        for name, cmd in commands(seed, config, runs, steps).items():
            if _complete(runs / name):
                continue
            with (runs / f"{name}.log").open("w") as fh:
                rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
            print(f"{'done' if rc == 0 else f'FAILED ({rc})'}: rewardsmith {' '.join(cmd[1:])}", flush=True)
            if rc != 0:
                return  # the later steps of this seed need this one

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, seeds))


# ----------------------------------------------------------------------------------------------------
# Statistics over seeds x pairs


def verdict(low: float | None, high: float | None) -> str:
    """held when the interval of a claim's difference lies above 0, not held below 0, else inconclusive."""
    return interval_verdict(low, high) or "inconclusive"


def _r(x: float, digits: int = 4) -> float | None:
    return round(float(x), digits) if np.isfinite(x) else None


def mean_ci(values: np.ndarray, n_boot: int, seed: int = 0) -> dict[str, Any]:
    """Mean of a (S, K) seeds x pairs array with its 95% hierarchical bootstrap CI (same `seed` = same draws,
    so intervals of arrays over the same pairs are paired)."""
    reps = hierarchical_replicates(values, n_boot, seed)
    low, high = percentile_interval(reps)
    return {"mean": _r(values.mean()), "ci": [_r(low), _r(high)]}


def statistic_ci(arrays: list[np.ndarray], statistic: Callable[[np.ndarray], float], n_boot: int,
                 seed: int = 0) -> dict[str, Any]:
    """statistic of each seed's array (K, ...) averaged over seeds, with a 95% hierarchical bootstrap CI: each
    replicate draws seed slots, then pairs (axis 0) within each slot, and averages the statistic over slots."""
    n_seeds, n_units = len(arrays), arrays[0].shape[0]
    seed_idx, unit_idx = hierarchical_indices(n_seeds, n_units, n_boot, seed)
    point = float(np.mean([statistic(a) for a in arrays]))
    reps = np.array([np.mean([statistic(arrays[seed_idx[b, j]][unit_idx[b, j]]) for j in range(n_seeds)])
                     for b in range(seed_idx.shape[0])])
    low, high = percentile_interval(reps)
    return {"mean": _r(point), "ci": [_r(low), _r(high)]}


def seed_range(values: list[float]) -> dict[str, Any]:
    """Mean over seeds with the min / max over seeds (for figures without a per-pair form)."""
    v = np.asarray(values, dtype=np.float64)
    return {"mean": _r(v.mean()), "min": _r(v.min()), "max": _r(v.max()), "per_seed": [_r(x) for x in v]}


def _aligned(per_seed: list[dict[str, Any]], key: str, where: str) -> None:
    first = per_seed[0][key]
    for other in per_seed[1:]:
        if other[key] != first:
            raise SystemExit(f"{where}: the seeds scored different target pairs")


def _n_pair(n_values: list[int], preferred: int) -> tuple[int, int]:
    """(low N, high N) of a claim: `preferred` when below the largest N, else the smallest positive N."""
    high = max(n_values)
    low = preferred if preferred in n_values and preferred < high else min(n for n in n_values if n > 0)
    return low, high


# ----------------------------------------------------------------------------------------------------
# Protocols


def summarise_steerability(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]],
                           n_boot: int) -> dict[str, Any]:
    _aligned(pairs, "pair_ids", "steerability")
    n_values = metrics[0]["n_values"]
    out: dict[str, Any] = {"test_pairs": metrics[0]["test_pairs"], "accuracy": {}}
    for std in pairs[0]["standards"]:
        by_n = {str(n): mean_ci(100 * np.stack([p["standards"][std]["icrm"][str(n)] for p in pairs]), n_boot)
                for n in n_values}
        entry: dict[str, Any] = {"icrm": by_n}
        if all("bt" in p["standards"][std] for p in pairs):
            bt = 100 * np.stack([p["standards"][std]["bt"] for p in pairs])
            icrm_max = 100 * np.stack([p["standards"][std]["icrm"][str(max(n_values))] for p in pairs])
            entry["bt"] = mean_ci(bt, n_boot)
            entry[f"icrm_n{max(n_values)}_minus_bt"] = mean_ci(icrm_max - bt, n_boot)
        out["accuracy"][std] = entry
    return out


def claim_flipped(pairs: list[dict[str, Any]], n_values: list[int], n_boot: int) -> dict[str, Any]:
    """ICRM accuracy on the flipped standards at the largest N minus BT's, per pair averaged over the two."""
    n = max(n_values)
    flipped = ("harmless-flipped", "helpful-flipped")
    if not all("bt" in p["standards"][s] for p in pairs for s in flipped):
        return {"verdict": "inconclusive", "reason": "no BT baseline in the runs"}
    diff = np.mean([100 * (np.stack([p["standards"][s]["icrm"][str(n)] for p in pairs])
                           - np.stack([p["standards"][s]["bt"] for p in pairs])) for s in flipped], axis=0)
    est = mean_ci(diff, n_boot)
    return {"measure": f"accuracy (points) on the flipped pku-saferlhf standards, ICRM at N={n} minus BT "
                       "(mean of harmless-flipped and helpful-flipped)", **est, "verdict": verdict(*est["ci"])}


def _ece(rates: np.ndarray) -> Callable[[np.ndarray], float]:
    """ECE (probability mode, 10 bins) of one seed's posterior means (K, R) against the rates 1 - p (R,)."""
    def ece(mu: np.ndarray) -> float:
        return expected_calibration_error(mu.ravel(), np.broadcast_to(1.0 - rates, mu.shape).ravel(),
                                          mode="probability")
    return ece


def _mae(mu: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Per-pair mean over rates of |mu - (1 - p)|: (S, K, R) -> (S, K)."""
    return np.abs(mu - (1.0 - rates)).mean(axis=-1)


def summarise_calibration(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]],
                          n_boot: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    _aligned(pairs, "pair_ids", "calibration")
    n_values = metrics[0]["n_values"]
    rates = np.asarray(pairs[0]["flip_rates"], dtype=np.float64)
    # mu[n]: (S, K, R) posterior means per seed, pair and demonstrated flip rate.
    mu = {str(n): np.stack([np.asarray(p["icrm_mu"][str(n)]).T for p in pairs]) for n in n_values}
    ece_boot = min(n_boot, ECE_REPLICATES)
    out: dict[str, Any] = {"test_pairs": metrics[0]["test_pairs"], "by_n": {}}
    for n in n_values:
        out["by_n"][str(n)] = {"ece": statistic_ci(list(mu[str(n)]), _ece(rates), ece_boot),
                               "mean_abs_error": mean_ci(_mae(mu[str(n)], rates), n_boot)}
    if all("bt_mu" in p for p in pairs):
        bt = np.stack([np.repeat(np.asarray(p["bt_mu"])[:, None], len(rates), axis=1) for p in pairs])
        mu["bt"] = bt
        out["bt"] = {"ece": statistic_ci(list(bt), _ece(rates), ece_boot), "mean_abs_error": mean_ci(_mae(bt, rates),
                                                                                                      n_boot)}
    return out, mu


def claim_ece(mu: dict[str, np.ndarray], rates: np.ndarray, n_values: list[int], n_boot: int) -> dict[str, Any]:
    """ECE at N=8 (or the smallest positive N) minus ECE at the largest N, paired on the same draws; the mean
    absolute error's change beside it."""
    low, high = _n_pair(n_values, 8)
    ece = _ece(rates)
    arrays = [np.concatenate([a, b], axis=-1) for a, b in zip(mu[str(low)], mu[str(high)], strict=True)]
    r = len(rates)

    def drop(m: np.ndarray) -> float:
        return ece(m[:, :r]) - ece(m[:, r:])

    est = statistic_ci(arrays, drop, min(n_boot, ECE_REPLICATES))
    mae = mean_ci(_mae(mu[str(low)], rates) - _mae(mu[str(high)], rates), n_boot)
    return {"measure": f"ECE at N={low} minus ECE at N={high} (moralchoice/low, unseen)", **est,
            "mean_abs_error_drop": mae, "verdict": verdict(*est["ci"])}


def summarise_rmbench(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]], n_boot: int) -> dict[str, Any]:
    _aligned(pairs, "prompt_ids", "rmbench")
    n_values = metrics[0]["n_values"]
    subsets = np.asarray(pairs[0]["subset"])
    groups = {"overall": np.ones(len(subsets), dtype=bool), **{s: subsets == s for s in dict.fromkeys(subsets)}}
    out: dict[str, Any] = {"prompts": {g: int(mask.sum()) for g, mask in groups.items()}, "accuracy": {}}
    for group, mask in groups.items():
        entry: dict[str, Any] = {"icrm": {str(n): {k: mean_ci(np.stack([p["icrm"][str(n)][k] for p in pairs])[:, mask],
                                                              n_boot) for k in RMBENCH_KEYS} for n in n_values}}
        if all("bt" in p for p in pairs):
            entry["bt"] = {k: mean_ci(np.stack([p["bt"][k] for p in pairs])[:, mask], n_boot) for k in RMBENCH_KEYS}
        out["accuracy"][group] = entry
    return out


def claim_rmbench(pairs: list[dict[str, Any]], n_values: list[int], n_boot: int) -> dict[str, Any]:
    low, high = _n_pair(n_values, 1)
    diff = np.stack([np.asarray(p["icrm"][str(high)]["avg"]) - np.asarray(p["icrm"][str(low)]["avg"])
                     for p in pairs])
    est = mean_ci(diff, n_boot)
    return {"measure": f"RM-Bench average accuracy (points) at N={high} minus N={low} (all subsets, unseen)", **est,
            "verdict": verdict(*est["ci"])}


def summarise_pareto(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    n_values = metrics[0]["n_values"]
    out: dict[str, Any] = {"respond_pairs": metrics[0]["respond_pairs"], "refuse_pairs": metrics[0]["refuse_pairs"],
                           "interval": "min / max over seeds",
                           "hypervolume": {str(n): seed_range([next(r["hypervolume"] for r in m["hypervolume"]
                                                                    if r["demos"] == n) for m in metrics])
                                           for n in n_values}}
    if all("bt" in m for m in metrics):
        out["bt_hypervolume"] = seed_range([m["bt"]["hypervolume"] for m in metrics])
    return out


def claim_pareto(metrics: list[dict[str, Any]], n_values: list[int]) -> dict[str, Any]:
    low, high = _n_pair(n_values, 1)

    def hv(m: dict[str, Any], n: int) -> float:
        return float(next(r["hypervolume"] for r in m["hypervolume"] if r["demos"] == n))

    est = seed_range([hv(m, high) - hv(m, low) for m in metrics])
    return {"measure": f"hypervolume at N={high} minus N={low} (rm-bench safety-response / safety-refuse, unseen)",
            **est, "interval": "min / max over seeds (no per-pair bootstrap)", "verdict": verdict(est["min"],
                                                                                                  est["max"])}


def summarise_math500(metrics: list[dict[str, Any]], pairs: list[dict[str, Any]], n_boot: int) -> dict[str, Any]:
    _aligned(pairs, "pair_ids", "math500")
    n_values = metrics[0]["n_values"]
    out: dict[str, Any] = {"test_pairs": metrics[0]["test_pairs"],
                           "accuracy": {str(n): mean_ci(100 * np.stack([p["icrm"][str(n)] for p in pairs]), n_boot)
                                        for n in n_values}}
    if all("bt" in p for p in pairs):
        out["bt"] = mean_ci(100 * np.stack([p["bt"] for p in pairs]), n_boot)
    return out


def claim_math500(pairs: list[dict[str, Any]], n_values: list[int], n_boot: int) -> dict[str, Any]:
    out: dict[str, Any] = {"verdict": "inconclusive",
                           "reason": "not measured: no policy is trained with either reward here"}
    if all("bt" in p for p in pairs):
        n = max(n_values)
        proxy = mean_ci(100 * (np.stack([p["icrm"][str(n)] for p in pairs]) - np.stack([p["bt"] for p in pairs])),
                        n_boot)
        out["proxy"] = {"measure": f"verifier accuracy (points, reference above corrupted solution) of the ICRM at "
                                   f"N={n} minus BT", **proxy, "verdict": verdict(*proxy["ci"])}
    return out


# ----------------------------------------------------------------------------------------------------
# Summary


def _read(folder: Path, name: str, file: str) -> dict[str, Any]:
    path = folder / name / file
    if not path.exists():
        raise SystemExit(f"{_shown(path)} is missing: run `experiments/icrm.py run` first")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def summarise(seeds: list[int], config: str, runs: Path, steps: int | None, n_boot: int, out: Path) -> None:
    folders = [runs / f"eval-s{s}" for s in seeds]
    metrics = {name: [_read(f, name, "metrics.json") for f in folders] for name in PROTOCOLS}
    pairs = {name: [_read(f, name, "per_pair.json") for f in folders] for name in PROTOCOLS if name != "pareto"}
    n_values = metrics["steerability"][0]["n_values"]
    training = json.loads((runs / f"s{seeds[0]}" / "metrics.json").read_text(encoding="utf-8"))
    calibration, mu = summarise_calibration(metrics["calibration"], pairs["calibration"], n_boot)
    rates = np.asarray(pairs["calibration"][0]["flip_rates"], dtype=np.float64)
    claims = [
        {"claim": "the KL term keeps the optimum interior (mu < 1, tau finite) where BT runs to infinity",
         "verdict": "held", "evidence": "exact, a property of the loss rather than of these runs: "
                                        "tests/unit/test_beta_elbo.py::test_interior_optimum_where_bt_runs_to_infinity"},
        {"claim": "static RMs cannot follow flipped demonstrations; the ICRM can",
         **claim_flipped(pairs["steerability"], n_values, n_boot)},
        {"claim": "ECE falls as N grows (paper 0.099 at N = 8 to 0.076 at N = 64, moral dilemmas)",
         **claim_ece(mu, rates, n_values, n_boot)},
        {"claim": "RM-Bench accuracy rises with N (paper 60.5% at N = 1 to 70.8% at N = 64)",
         **claim_rmbench(pairs["rmbench"], n_values, n_boot)},
        {"claim": "mixing two objectives traces a Pareto frontier whose hypervolume grows with N",
         **claim_pareto(metrics["pareto"], n_values)},
        {"claim": "ICRM reward beats a BT RM as the RL reward on MATH-500 (53.8% vs 51.4%)",
         **claim_math500(pairs["math500"], n_values, n_boot)},
    ]
    cmds = {name: cmd for s in seeds for name, cmd in commands(s, config, runs, steps).items()}
    flags = f"--config {config} --seeds {' '.join(map(str, seeds))}" + (f" --steps {steps}" if steps else "")
    if runs != RUNS:
        flags += f" --runs {_shown(runs)}"
    result = {
        "command": f"python experiments/icrm.py run {flags} && python experiments/icrm.py summarise {flags}"
                   + ("" if out == OUT else f" --out {_shown(out)}"),
        "runs": {name: "rewardsmith " + " ".join(cmd[1:]) for name, cmd in cmds.items()},
        "config": config, "seeds": seeds, "n_boot": n_boot,
        "training_sources": training["config"]["episodes"]["sources"],
        "targets": {name: {"targets_from": metrics[name][0]["targets_from"],
                           "overlap_removed": metrics[name][0]["overlap_removed"]} for name in PROTOCOLS},
        "protocols": {
            "steerability": summarise_steerability(metrics["steerability"], pairs["steerability"], n_boot),
            "calibration": calibration,
            "rmbench": summarise_rmbench(metrics["rmbench"], pairs["rmbench"], n_boot),
            "pareto": summarise_pareto(metrics["pareto"]),
            "math500": summarise_math500(metrics["math500"], pairs["math500"], n_boot),
        },
        "claims": claims,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {_shown(out)}")
    for c in claims:
        print(f"  {c['verdict']:>12}: {c['claim']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("run", "summarise"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--config", default=CONFIG, help="ICRM config of every run (relative to the repository)")
    parser.add_argument("--steps", type=int, default=None, help="ICRM optimiser steps (default: the config's)")
    parser.add_argument("--runs", type=Path, default=RUNS, help="folder of the run folders")
    parser.add_argument("--out", type=Path, default=OUT, help="summarise: the JSON written")
    parser.add_argument("--jobs", type=int, default=1, help="seeds in parallel (each on one thread when > 1)")
    parser.add_argument("--n-boot", type=int, default=N_BOOT)
    args = parser.parse_args()
    runs, out = args.runs.resolve(), args.out.resolve()
    if args.action == "run":
        run_all(args.seeds, args.config, runs, args.steps, args.jobs)
    else:
        summarise(args.seeds, args.config, runs, args.steps, args.n_boot, out)


if __name__ == "__main__":
    main()
