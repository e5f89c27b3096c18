"""The PEBS protocol of docs/calibration.md through the CLI: the variant choice on hold-out splits that are never
reported, then the reported runs (30 splits) on PluriHarms and DICES-350 with each corpus's model score and with a
reward model's score, and their summary.

    .venv/bin/python experiments/calibration.py run          # every `rewardsmith calibrate run` below
    .venv/bin/python experiments/calibration.py summarise    # docs/results/calibrat*.json, docs/results/pairs/

`run` calls (a finished run folder is reused), the reward model first:

    rewardsmith train --config configs/train-harmless.yaml --out runs/harmless
    rewardsmith calibrate run --config configs/calibrate-choice.yaml --ratings R --out runs/calibrate/choice-R
    rewardsmith calibrate run --config configs/calibrate-report[-25|-18].yaml --ratings R [--model M] \\
        --out runs/calibrate/R[-rm][-25|-18]

for R in pluriharms, dices-350 and M = runs/harmless/model (a MiniLM reward model trained here,
configs/train-harmless.yaml), which scores the PluriHarms prompts and the DICES conversations itself.

`summarise` writes docs/results/calibration-choice.json (the variant kept by the rule of
rewardsmith.calibrate.claims.VARIANT_CHOICE, with the gains it read), docs/results/calibrate-<R>[-rm].json (the
full-fit run's slimmed metrics with every capped run's flat keys under `fit_size.<n>.`) and
docs/results/pairs/calibrate-<R>[-rm].npz (per split and rater: held-out counts and every method's squared-error
sum, float32), from which every CI can be recomputed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.calibrate.claim_results import settings
from rewardsmith.calibrate.claims import VARIANT_CHOICE, VARIANTS
from rewardsmith.report.results import slim

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "docs" / "results"
RUNS = "runs/calibrate"
MODEL = "runs/harmless/model"
# The reward model whose score the -rm runs use, trained first when its run folder is not complete.
MODEL_RUN = str(Path(MODEL).parent)
TRAIN_MODEL = ["rewardsmith", "train", "--config", "configs/train-harmless.yaml", "--out", MODEL_RUN, "-q"]
CORPORA = {"pluriharms": "pluriharms", "dices": "dices-350"}  # results name -> --ratings
SIZES = {
    "": "configs/calibrate-report.yaml",
    "25": "configs/calibrate-report-25.yaml",
    "18": "configs/calibrate-report-18.yaml",
}
CHOICE_CONFIG = "configs/calibrate-choice.yaml"
COMMAND = "python experiments/calibration.py run && python experiments/calibration.py summarise"


def _cli(config: str, ratings: str, out: str, model: str | None = None) -> list[str]:
    return [
        "rewardsmith",
        "calibrate",
        "run",
        "--config",
        config,
        "--ratings",
        ratings,
        *(["--model", model] if model else []),
        "--out",
        out,
        "-q",
    ]


def plan() -> dict[str, list[str]]:
    """run folder -> CLI command: the reward model, then the choice runs, then the reported runs."""
    out = {MODEL_RUN: TRAIN_MODEL}
    out |= {
        f"{RUNS}/choice-{name}": _cli(CHOICE_CONFIG, ratings, f"{RUNS}/choice-{name}")
        for name, ratings in CORPORA.items()
    }
    for name, ratings in CORPORA.items():
        for scored, model in (("", None), ("-rm", MODEL)):
            for size, config in SIZES.items():
                folder = f"{RUNS}/{name}{scored}{'-' + size if size else ''}"
                out[folder] = _cli(config, ratings, folder, model)
    return out


def _complete(folder: Path) -> bool:
    manifest = folder / "manifest.json"
    return manifest.exists() and json.loads(manifest.read_text(encoding="utf-8")).get("status") == "complete"


def run() -> None:
    for folder, cmd in plan().items():
        if _complete(ROOT / folder):
            continue
        print("running: " + " ".join(cmd), flush=True)
        subprocess.run(["nice", "-n", "19", str(ROOT / ".venv" / "bin" / cmd[0]), *cmd[1:]], cwd=ROOT, check=True)


def _metrics(folder: str) -> dict[str, Any]:
    return dict(json.loads((ROOT / folder / "metrics.json").read_text(encoding="utf-8")))


def choose() -> dict[str, Any]:
    """VARIANT_CHOICE applied to the choice runs: the mean gain over pooled of each variant over both corpora and
    every fit size (all, 25, 18) on splits 100-104; the highest is kept (the first listed on a tie)."""
    gains: dict[str, dict[str, float]] = {v: {} for v in VARIANTS}
    for name in CORPORA:
        m = _metrics(f"{RUNS}/choice-{name}")
        for label, prefix in settings(m):
            for v in VARIANTS:
                gains[v][f"{name}, {label}"] = round(m[f"{prefix}gain_vs_pooled_pct.{v}"], 4)
    means = {v: float(np.mean(list(g.values()))) for v, g in gains.items()}
    best = max(means.values())
    kept = next(v for v in VARIANTS if means[v] == best)
    return VARIANT_CHOICE.made(
        kept, {"mean_gain_vs_pooled_pct": {v: round(x, 4) for v, x in means.items()}, "gain_vs_pooled_pct": gains}
    )


def merged(name: str, scored: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The full-fit run's metrics with each capped run's flat keys under fit_size.<n>., and the per-rater arrays."""
    base = f"{RUNS}/{name}{scored}"
    metrics = _metrics(base)
    arrays: dict[str, np.ndarray] = {}
    for size in SIZES:
        m = metrics if not size else _metrics(f"{base}-{size}")
        per_rater = m["tables"]["main"]["per_rater"]
        label = size or "all"
        arrays[f"{label}/count"] = np.asarray(per_rater["count"], dtype=np.int16)
        arrays[f"{label}/rater_ids"] = np.asarray(per_rater["rater_ids"])
        for method, sse in per_rater["sse"].items():
            arrays[f"{label}/sse/{method}"] = np.asarray(sse, dtype=np.float32)
        if size:
            for key, value in m.items():
                if not isinstance(value, dict):
                    metrics[f"fit_size.{size}.{key}"] = value
    runs = {folder: " ".join(cmd) for folder, cmd in plan().items() if folder.startswith(base)}
    return {"command": COMMAND, "runs": runs, **slim(metrics)}, arrays


def summarise() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    choice = {
        "command": COMMAND,
        "runs": {f: " ".join(c) for f, c in plan().items() if "/choice-" in f},
        "choice": choose(),
    }
    (RESULTS / "calibration-choice.json").write_text(json.dumps(choice, indent=1) + "\n", encoding="utf-8")
    print(f"kept variant: {choice['choice']['chosen']} ({choice['choice']['evidence']['mean_gain_vs_pooled_pct']})")
    for name in CORPORA:
        for scored in ("", "-rm"):
            metrics, arrays = merged(name, scored)
            out = RESULTS / f"calibrate-{name}{scored}.json"
            out.write_text(json.dumps(metrics, indent=1) + "\n", encoding="utf-8")
            pairs = RESULTS / "pairs" / f"calibrate-{name}{scored}.npz"
            pairs.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(pairs, **arrays)
            print(f"wrote {out.relative_to(ROOT)}, {pairs.relative_to(ROOT)} ({pairs.stat().st_size / 1e6:.2f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("run", "summarise"))
    args = parser.parse_args()
    run() if args.action == "run" else summarise()


if __name__ == "__main__":
    main()
