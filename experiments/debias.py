"""Does a length-debiasing objective make the MiniLM reward models transfer better?

    .venv/bin/python experiments/debias.py run [--seeds 0 1 2] [--jobs 2]   # trains every (source, kind, seed)
    .venv/bin/python experiments/debias.py summarise                        # writes docs/results/debias.json
    .venv/bin/python experiments/debias.py summarise --seeds 0 1 2 --choice-seeds 0   # choose on seed 0's
                                                   # validation split, then the kept kind vs none over 3 seeds

`run` calls `rewardsmith train --config configs/train-<source>.yaml --debias <kind> --seed <seed>` into
runs/debias/<source>-<kind>-s<seed> (a finished run is reused). `summarise` reads every run's scores.json and
compares each debias kind with plain Bradley-Terry (kind none) on the same pairs, by the hierarchical bootstrap
(seeds, then pairs within seed) of rewardsmith.evaluate.transfer:

- length-controlled accuracy per cross-domain set and its mean over the sets, kind minus none;
- raw accuracy on the held-out split of the training file (the in-domain cost);
- the mean |Spearman correlation| between reward and response length over the cross-domain sets;
- the choice: made on the validation split of the training file only (highest mean validation
  length-controlled gain over the two sources among kinds that lose at most 1 point of validation accuracy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.evaluate.transfer import paired_differences
from rewardsmith.stats import percentile_interval, spearman

ROOT = Path(__file__).resolve().parents[1]

SOURCES = ("harmless", "helpful")
KINDS = ("none", "length-covariate", "odin", "length-balanced")
RUNS = ROOT / "runs" / "debias"
OUT = ROOT / "docs" / "results" / "debias.json"
MAX_ID_COST = 1.0  # points of validation accuracy a kept objective may lose
N_BOOT = 1000


def command(source: str, kind: str, seed: int) -> list[str]:
    out = str(run_dir(source, kind, seed).relative_to(ROOT))
    return [
        str(ROOT / ".venv" / "bin" / "rewardsmith"),
        "train",
        "--config",
        f"configs/train-{source}.yaml",
        "--debias",
        kind,
        "--seed",
        str(seed),
        "--quiet",
        "--out",
        out,
    ]


def run_dir(source: str, kind: str, seed: int) -> Path:
    return RUNS / f"{source}-{kind}-s{seed}"


def run_all(seeds: list[int], kinds: list[str], sources: list[str], jobs: int) -> None:
    env = dict(os.environ)
    if jobs > 1:  # one thread per process: the machine's cores go to parallel runs instead
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    todo = [
        (s, k, seed)
        for seed in seeds
        for s in sources
        for k in kinds
        if not (run_dir(s, k, seed) / "scores.json").exists()
    ]
    print(f"{len(todo)} runs to do", flush=True)

    def one(job: tuple[str, str, int]) -> None:
        cmd = command(*job)
        log = run_dir(*job).with_suffix(".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as fh:
            rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        print(f"{'done' if rc == 0 else f'FAILED ({rc})'}: {' '.join(cmd[1:])}", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, todo))


# ----------------------------------------------------------------------------------------------------
# Summary


def _load(source: str, kind: str, seeds: list[int]) -> list[dict[str, Any]]:
    return [json.loads((run_dir(source, kind, s) / "scores.json").read_text()) for s in seeds]


def _correct(scores: dict[str, Any]) -> np.ndarray:
    c, r = np.asarray(scores["chosen"]), np.asarray(scores["rejected"])
    return np.where(c > r, 1.0, np.where(c == r, 0.5, 0.0))


def _abs_corr(scores: dict[str, Any], idx: np.ndarray | None = None) -> np.ndarray:
    """|Spearman(reward, length)| over both responses of the pairs `idx` (rows of replicates) or all pairs."""
    arrays = [np.asarray(scores[k], dtype=np.float64) for k in ("chosen", "rejected", "chosen_chars", "rejected_chars")]
    if idx is not None:
        arrays = [a[idx] for a in arrays]
    sc, sr, lc, lr = arrays
    return np.abs(spearman(np.concatenate([sc, sr], axis=-1), np.concatenate([lc, lr], axis=-1)))


def correlation_summary(
    runs: dict[str, list[dict[str, Any]]], targets: list[str], n_boot: int, seed: int = 0
) -> dict[str, Any]:
    """Mean |corr(reward, length)| over targets and seeds for each kind, and each kind's ratio to none, with
    hierarchical bootstrap CIs (seeds, then pairs; one pair draw per target shared by every kind)."""
    rng = np.random.default_rng(seed)
    n_seeds = len(next(iter(runs.values())))
    seed_draw = {k: rng.integers(0, n_seeds, size=(n_boot, n_seeds)) for k in runs}
    reps = {k: np.zeros(n_boot) for k in runs}
    for t in targets:
        n = len(runs["none"][0][t]["chosen"])
        pair_draw = rng.integers(0, n, size=(n_boot, n_seeds, n))
        for k, by_seed in runs.items():
            per_slot = np.zeros((n_boot, n_seeds))
            for j in range(n_seeds):
                for s in range(n_seeds):
                    rows = np.nonzero(seed_draw[k][:, j] == s)[0]
                    if rows.size:
                        per_slot[rows, j] = _abs_corr(by_seed[s][t], pair_draw[rows, j])
            reps[k] += per_slot.mean(axis=1) / len(targets)
    out: dict[str, Any] = {}
    for k, by_seed in runs.items():
        point = float(np.mean([_abs_corr(by_seed[s][t]) for s in range(n_seeds) for t in targets]))
        ratio_reps = reps[k] / reps["none"]
        none_point = float(np.mean([_abs_corr(runs["none"][s][t]) for s in range(n_seeds) for t in targets]))
        out[k] = {
            "mean_abs_corr": round(point, 4),
            "mean_abs_corr_ci": [round(x, 4) for x in percentile_interval(reps[k])],
            "ratio_to_none": round(point / none_point, 4),
            "ratio_to_none_ci": [round(x, 4) for x in percentile_interval(ratio_reps)],
        }
    return out


def summarise_source(source: str, seeds: list[int], kinds: list[str], n_boot: int) -> dict[str, Any]:
    runs = {k: _load(source, k, seeds) for k in kinds}
    sets = list(runs["none"][0])
    held = next(s for s in sets if s.endswith("(held-out)"))
    val = next(s for s in sets if s.endswith("(validation)"))
    targets = [s for s in sets if s not in (held, val)]
    for k in kinds:  # every run scored the same pairs in the same order
        for r in runs[k]:
            for s in sets:
                if r[s]["pair_id"] != runs["none"][0][s]["pair_id"]:
                    raise SystemExit(f"{source}/{k}: {s} holds other pairs than the none run")
    correct = {k: {s: np.stack([_correct(r[s]) for r in runs[k]]) for s in sets} for k in kinds}
    lengths = {
        s: (np.asarray(runs["none"][0][s]["chosen_chars"]), np.asarray(runs["none"][0][s]["rejected_chars"]))
        for s in sets
    }
    controlled = paired_differences(correct, "none", lengths=lengths, n_boot=n_boot, means={"cross-domain": targets})
    raw = paired_differences(correct, "none", n_boot=n_boot, means={"cross-domain": targets})
    levels: dict[str, Any] = {}
    for k in kinds:
        levels[k] = {}
        for s in sets:
            runs_metrics = [
                json.loads((run_dir(source, k, sd) / "metrics.json").read_text())["eval"][s] for sd in seeds
            ]
            levels[k][s] = {
                key: round(float(np.mean([m[key] for m in runs_metrics])), 3)
                for key in ("accuracy", "length_controlled_accuracy", "length_rule_accuracy", "length_correlation")
            }
    return {
        "sets": {"held_out": held, "validation": val, "cross_domain": targets},
        "pairs": {s: len(runs["none"][0][s]["pair_id"]) for s in sets},
        "levels": levels,
        "controlled_vs_none": controlled,
        "raw_vs_none": raw,
        "correlation": correlation_summary(runs, targets, max(200, n_boot // 4)),
    }


def choose(by_source: dict[str, Any], kinds: list[str]) -> dict[str, Any]:
    """The kept kind, from the validation split only: the highest mean validation length-controlled gain over
    the sources among kinds losing at most MAX_ID_COST points of validation accuracy; none when no kind gains."""
    table = {}
    for k in kinds:
        if k == "none":
            continue
        lc = [src["controlled_vs_none"][k][f"d.{src['sets']['validation']}"] for src in by_source.values()]
        acc = [src["raw_vs_none"][k][f"d.{src['sets']['validation']}"] for src in by_source.values()]
        table[k] = {
            "validation_lc_gain": round(float(np.mean(lc)), 3),
            "validation_accuracy_change": round(float(np.mean(acc)), 3),
        }
    eligible = {k: v for k, v in table.items() if v["validation_accuracy_change"] >= -MAX_ID_COST}
    best = max(eligible, key=lambda k: eligible[k]["validation_lc_gain"], default=None)
    kept = best if best is not None and eligible[best]["validation_lc_gain"] > 0 else "none"
    return {
        "rule": f"highest mean validation length-controlled gain among kinds losing at most {MAX_ID_COST} point "
        "of validation accuracy (mean over sources and seeds)",
        "candidates": table,
        "kept": kept,
    }


def verdict(by_source: dict[str, Any], kept: str) -> dict[str, Any]:
    """The three shipping conditions for the kept kind, per source and pooled over the sources."""
    if kept == "none":
        return {"kept": "none", "held": False, "reason": "no kind gained on validation"}
    out: dict[str, Any] = {"kept": kept}
    for name, src in by_source.items():
        c = src["controlled_vs_none"][kept]
        held = src["sets"]["held_out"]
        cost = src["raw_vs_none"][kept][f"d.{held}"]
        corr = src["correlation"]
        out[name] = {
            "cross_domain_lc_gain": c["d.cross-domain"],
            "cross_domain_lc_gain_ci": c["d.cross-domain_ci"],
            "held_out_accuracy_change": cost,
            "held_out_accuracy_change_ci": src["raw_vs_none"][kept][f"d.{held}_ci"],
            "abs_corr_ratio": corr[kept]["ratio_to_none"],
            "abs_corr_ratio_ci": corr[kept]["ratio_to_none_ci"],
        }
    gains = [out[n]["cross_domain_lc_gain"] for n in by_source]
    lows = [out[n]["cross_domain_lc_gain_ci"][0] for n in by_source]
    out["conditions"] = {
        "lc_gain_at_least_3_with_ci_above_0": all(g >= 3.0 for g in gains) and all(lo > 0 for lo in lows),
        "abs_corr_halved": all(out[n]["abs_corr_ratio"] <= 0.5 for n in by_source),
        "held_out_cost_at_most_1": all(out[n]["held_out_accuracy_change"] >= -1.0 for n in by_source),
    }
    out["held"] = all(out["conditions"].values())
    return out


def summarise(
    seeds: list[int], kinds: list[str], sources: list[str], n_boot: int, choice_seeds: list[int] | None = None
) -> None:
    """The choice among `kinds` on the validation split over `choice_seeds` (default: `seeds`), then the kept kind
    against plain BT over `seeds` (a screening seed first, more seeds for the kept kind only)."""
    choice_seeds = choice_seeds or seeds
    screen = {s: summarise_source(s, choice_seeds, kinds, n_boot) for s in sources}
    chosen = choose(screen, kinds)
    kept = chosen["kept"]
    final_kinds = kinds if choice_seeds == seeds or kept == "none" else ["none", kept]
    by_source = (
        screen if final_kinds == kinds else {s: summarise_source(s, seeds, final_kinds, n_boot) for s in sources}
    )
    runs = {
        f"{s}-{k}-s{sd}": "rewardsmith " + " ".join(command(s, k, sd)[1:])
        for s in sources
        for k in kinds
        for sd in choice_seeds
    }
    runs.update(
        {
            f"{s}-{k}-s{sd}": "rewardsmith " + " ".join(command(s, k, sd)[1:])
            for s in sources
            for k in final_kinds
            for sd in seeds
        }
    )
    flags = f" --choice-seeds {' '.join(map(str, choice_seeds))}" if choice_seeds != seeds else ""
    result = {
        "command": f"python experiments/debias.py summarise --seeds {' '.join(map(str, seeds))}{flags}",
        "runs": runs,
        "seeds": seeds,
        "choice_seeds": choice_seeds,
        "kinds": final_kinds,
        "n_boot": n_boot,
        "sources": by_source,
        "choice": chosen,
        "verdict": verdict(by_source, kept),
    }
    if by_source is not screen:
        result["screening"] = {"kinds": kinds, "sources": screen}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}; kept: {kept}; held: {result['verdict']['held']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("run", "summarise"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS))
    parser.add_argument("--sources", nargs="+", default=list(SOURCES))
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (each on one thread when > 1)")
    parser.add_argument("--n-boot", type=int, default=N_BOOT)
    parser.add_argument(
        "--choice-seeds",
        type=int,
        nargs="+",
        default=None,
        help="summarise: seeds of the validation choice among every kind (default: --seeds); the "
        "kept kind is then compared with plain BT over --seeds",
    )
    args = parser.parse_args()
    if args.action == "run":
        run_all(args.seeds, args.kinds, args.sources, args.jobs)
    else:
        summarise(args.seeds, args.kinds, args.sources, args.n_boot, args.choice_seeds)


if __name__ == "__main__":
    main()
