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
    # the ceiling of each flipped standard: the BT baseline's backbone and settings trained directly on the
    # flipped labels of pku-saferlhf's train part (written to runs/icrm/ceil-<std>-s<S>.jsonl), scored by the
    # steerability protocol as its --bt-model
    rewardsmith train --config runs/icrm/ceil-<std>-s<S>.yaml --out runs/icrm/ceil-<std>-s<S>
    rewardsmith icrm eval --protocol steerability --config CFG --model runs/icrm/s<S>/model \\
        --bt-model runs/icrm/ceil-<std>-s<S>/model --seed S --out runs/icrm/ceil-eval-<std>-s<S>

The eval seed (demonstration draws) follows the training seed, so a seed is one replicate of the whole pipeline.
Training sources exclude every evaluation set (configs/icrm-minilm.yaml); targets sharing a conversation with a
training pair are dropped (each protocol's `overlap_removed`).

`summarise` reads every seed's <protocol>/metrics.json and per_pair.json and reports each protocol's figures as
the mean over seeds with a 95% CI from the hierarchical bootstrap of rewardsmith.stats (seeds, then pairs within
seed; differences paired on the same draws): steerability with each flipped standard's ceiling and the ICRM's share
of it; the reliability of mu across the mixing rates (slope and MAE) beside a constant forecast and BT; RM-Bench per
subset, overall (weighted by prompts) and the mean of the subsets; the Pareto hypervolume at every N, resampled
from per-pair correctness. The verdicts of the paper's claims are not made here: rewardsmith.icrm.claim_results
builds them from this summary (docs/results/icrm.json) against the bars of rewardsmith.icrm.claims.
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

from rewardsmith.icrm.summary import (
    FLIPPED,
    RMBENCH_KEYS,
    summarise_calibration,
    summarise_math500,
    summarise_pareto,
    summarise_rmbench,
    summarise_steerability,
)

ROOT = Path(__file__).resolve().parents[1]

CONFIG = "configs/icrm-minilm.yaml"
RUNS = ROOT / "runs" / "icrm"
OUT = ROOT / "docs" / "results" / "icrm.json"
PROTOCOLS = ("steerability", "calibration", "rmbench", "pareto", "math500")
N_BOOT = 1000
PKU = "pku-saferlhf/harmless"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def commands(seed: int, config: str, runs: Path, steps: int | None) -> dict[str, list[str]]:
    """The commands of one seed: ICRM training, BT baseline training, every evaluation protocol, and per flipped
    standard its ceiling's training and the steerability protocol with that ceiling as the BT model."""
    exe = str(ROOT / ".venv" / "bin" / "rewardsmith")
    icrm, bt, ev = (_shown(runs / f"{kind}{seed}") for kind in ("s", "bt-s", "eval-s"))
    steps_flag = ["--steps", str(steps)] if steps else []
    out = {
        f"s{seed}": [
            exe,
            "icrm",
            "train",
            "--config",
            config,
            "--seed",
            str(seed),
            *steps_flag,
            "--quiet",
            "--out",
            icrm,
        ],
        f"bt-s{seed}": [exe, "icrm", "train", "--config", config, "--bt", "--seed", str(seed), "--quiet", "--out", bt],
        f"eval-s{seed}": [
            exe,
            "icrm",
            "eval",
            "--protocol",
            "all",
            "--config",
            config,
            "--model",
            f"{icrm}/model",
            "--bt-model",
            f"{bt}/model",
            "--seed",
            str(seed),
            "--quiet",
            "--out",
            ev,
        ],
    }
    if not _trains_on_pku(config):  # the ceiling's labels must come from the train part the ICRM trains on
        return out
    for std in FLIPPED:
        ceiling = _shown(runs / f"ceil-{std}-s{seed}")
        out[f"ceil-{std}-s{seed}"] = [exe, "train", "--config", f"{ceiling}.yaml", "--quiet", "--out", ceiling]
        out[f"ceil-eval-{std}-s{seed}"] = [
            exe,
            "icrm",
            "eval",
            "--protocol",
            "steerability",
            "--config",
            config,
            "--model",
            f"{icrm}/model",
            "--bt-model",
            f"{ceiling}/model",
            "--seed",
            str(seed),
            "--quiet",
            "--out",
            _shown(runs / f"ceil-eval-{std}-s{seed}"),
        ]
    return out


def _trains_on_pku(config: str) -> bool:
    import yaml

    data = yaml.safe_load((ROOT / config).read_text(encoding="utf-8")) or {}
    return PKU in (data.get("episodes", {}).get("sources") or [])


def write_ceiling_config(seed: int, config: str, runs: Path, standard: str) -> Path:
    """The ceiling of a flipped standard: pku-saferlhf's train part (the ICRM run's split) with the labelling of
    `standard` flipped, written as a JSONL file, and a `rewardsmith train` config training the BT baseline's
    model (icrm.baseline.bt_model_config / bt_train_config, seed `seed`) on all of it. Returns the config path."""
    import yaml

    from rewardsmith.config import load_yaml, to_dict
    from rewardsmith.icrm.baseline import bt_model_config, bt_train_config
    from rewardsmith.icrm.config import ICRMRunConfig
    from rewardsmith.icrm.episodes import load_pools

    cfg = load_yaml(ICRMRunConfig, ROOT / config)
    cfg.train.seed = seed
    train = load_pools(cfg.episodes, cfg.data_dir, [PKU])[PKU]["train"]
    preferred = train.labellings[standard.removesuffix("-flipped")]  # True: the stored chosen is preferred
    # Flipped: the side the labelling does not prefer is chosen; the prompt as a chat list, read back turn by turn.
    rows = [
        {
            "prompt": [{"role": t.role, "content": t.content} for t in p.prompt],
            "chosen": p.chosen if keep else p.rejected,
            "rejected": p.rejected if keep else p.chosen,
        }
        for p, keep in zip(train.pairs, ~preferred, strict=True)
    ]
    base = runs / f"ceil-{standard}-s{seed}"
    data = base.with_suffix(".jsonl")
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run_cfg = {
        "data": {"train": {"name": "file", "path": str(data)}, "train_fraction": 1.0},
        "model": to_dict(bt_model_config(cfg)),
        "train": {**to_dict(bt_train_config(cfg)), "progress": False},
    }
    path = base.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(run_cfg, sort_keys=False), encoding="utf-8")
    return path


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
            if name.startswith("ceil-") and not name.startswith("ceil-eval-"):
                write_ceiling_config(seed, config, runs, name.removeprefix("ceil-").rsplit("-s", 1)[0])
            with (runs / f"{name}.log").open("w") as fh:
                rc = subprocess.call(["nice", "-n", "19", *cmd], cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
            print(f"{'done' if rc == 0 else f'FAILED ({rc})'}: rewardsmith {' '.join(cmd[1:])}", flush=True)
            if rc != 0:
                return  # the later steps of this seed need this one

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, seeds))


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
    pairs = {name: [_read(f, name, "per_pair.json") for f in folders] for name in PROTOCOLS}
    ceilings = {
        std: [_read(runs / f"ceil-eval-{std}-s{s}", "steerability", "per_pair.json") for s in seeds]
        for std in FLIPPED
        if all((runs / f"ceil-eval-{std}-s{s}").exists() for s in seeds)
    }
    training = json.loads((runs / f"s{seeds[0]}" / "metrics.json").read_text(encoding="utf-8"))
    cmds = {name: cmd for s in seeds for name, cmd in commands(s, config, runs, steps).items()}
    flags = f"--config {config} --seeds {' '.join(map(str, seeds))}" + (f" --steps {steps}" if steps else "")
    if runs != RUNS:
        flags += f" --runs {_shown(runs)}"
    result = {
        "command": f"python experiments/icrm.py run {flags} && python experiments/icrm.py summarise {flags}"
        + ("" if out == OUT else f" --out {_shown(out)}"),
        "runs": {name: "rewardsmith " + " ".join(cmd[1:]) for name, cmd in cmds.items()},
        "config": config,
        "seeds": seeds,
        "n_boot": n_boot,
        "training_sources": training["config"]["episodes"]["sources"],
        "targets": {
            name: {
                "targets_from": metrics[name][0]["targets_from"],
                "overlap_removed": metrics[name][0]["overlap_removed"],
            }
            for name in PROTOCOLS
        },
        "protocols": {
            "steerability": summarise_steerability(metrics["steerability"], pairs["steerability"], n_boot, ceilings),
            "calibration": summarise_calibration(metrics["calibration"], pairs["calibration"], n_boot),
            "rmbench": summarise_rmbench(metrics["rmbench"], pairs["rmbench"], n_boot),
            "pareto": summarise_pareto(metrics["pareto"], pairs["pareto"], n_boot),
            "math500": summarise_math500(metrics["math500"], pairs["math500"], n_boot),
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {_shown(out)}")
    export_pairs(pairs, ceilings, out.parent / "pairs" / "icrm.npz")


def export_pairs(pairs: dict[str, list[dict[str, Any]]], ceilings: dict[str, list[dict[str, Any]]], dest: Path) -> None:
    """Every seed's per-pair figures (correctness, posterior means, per-prompt RM-Bench accuracies) as compressed
    float16 arrays named `<protocol>/<what>/slot<k>` (k: the k-th seed of the summary), so the summary's CIs can be
    recomputed."""
    arrays: dict[str, np.ndarray] = {}
    for k, st in enumerate(pairs["steerability"]):
        for std, v in st["standards"].items():
            for n, c in v["icrm"].items():
                arrays[f"steerability/{std}/icrm{n}/slot{k}"] = np.asarray(c, dtype=np.float16)
            if "bt" in v:
                arrays[f"steerability/{std}/bt/slot{k}"] = np.asarray(v["bt"], dtype=np.float16)
    for std, runs in ceilings.items():
        for k, c in enumerate(runs):
            arrays[f"steerability/{std}/ceiling/slot{k}"] = np.asarray(c["standards"][std]["bt"], dtype=np.float16)
    for k, ca in enumerate(pairs["calibration"]):
        for n, m in ca["icrm_mu"].items():
            arrays[f"calibration/icrm{n}/slot{k}"] = np.asarray(m, dtype=np.float16)
        if "bt_mu" in ca:
            arrays[f"calibration/bt/slot{k}"] = np.asarray(ca["bt_mu"], dtype=np.float16)
    for k, rb in enumerate(pairs["rmbench"]):
        for n, v in rb["icrm"].items():
            arrays[f"rmbench/icrm{n}/slot{k}"] = np.asarray([v[key] for key in RMBENCH_KEYS], dtype=np.float16)
        if "bt" in rb:
            arrays[f"rmbench/bt/slot{k}"] = np.asarray([rb["bt"][key] for key in RMBENCH_KEYS], dtype=np.float16)
    for k, pa in enumerate(pairs["pareto"]):
        for n, v in pa["icrm"].items():
            for side in ("respond", "refuse"):
                arrays[f"pareto/icrm{n}/{side}/slot{k}"] = np.asarray(v[side], dtype=np.float16)
    for k, ma in enumerate(pairs["math500"]):
        for n, c in ma["icrm"].items():
            arrays[f"math500/icrm{n}/slot{k}"] = np.asarray(c, dtype=np.float16)
    dest.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dest, **arrays)
    print(f"wrote {_shown(dest)} ({dest.stat().st_size / 1e6:.2f} MB)")


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
