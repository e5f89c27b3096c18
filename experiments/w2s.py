"""The weak-to-strong (ANCHOR) protocol of docs/w2s.md, end to end through the CLI, and its summary.

    .venv/bin/python experiments/w2s.py scale        # anchor normaliser on the W2S pool -> anchor-scale.json
    .venv/bin/python experiments/w2s.py run          # every shift run below (a finished student is reused)
    .venv/bin/python experiments/w2s.py summarise    # docs/results/shift-*.json and docs/results/pairs/shift-*.npz
    .venv/bin/python experiments/w2s.py recompute    # the statistics of docs/results/shift-*.json from their pairs/

`scale` measures the mean square of the pretrained student's reference states on the harmless W2S pool (the
normaliser of `anchor.normalise: true`, rewardsmith.w2s.metrics.reference_mean_square), so the paper's lambda of
about 1e-4 on the raw MSE maps to 1e-4 x that value on the normalised scale of the sweep.

`run` calls, in order, one `rewardsmith shift` command each (recorded in the summary), and copies each run's
results as soon as it ends (the harmless runs share a folder, whose metrics.json is the last run's):

    rewardsmith shift --config configs/shift-harmless-sweep.yaml --out runs/shift-harmless --seeds 0,1,2
    # lambda*: the sweep's validation choice (metrics.json: anchor_selection, last layer). The layer run compares the
    # last and the middle layer at lambda* (claim d); the headline runs train ANCHOR at lambda*. Their configs are
    # the committed ones with the anchor methods replaced, written next to the run folder:
    rewardsmith shift --config runs/shift-harmless-layer.yaml --out runs/shift-harmless --seeds 0,1,2
    rewardsmith shift --config runs/shift-harmless.yaml --out runs/shift-harmless --seeds 0,1,2
    rewardsmith shift --config runs/shift-helpful.yaml --out runs/shift-helpful --seeds 0,1,2
    rewardsmith shift --config configs/shift-harmless-paper.yaml --out runs/shift-harmless-paper --seeds 0,1,2

`summarise` copies each run's metrics.json (slimmed, with its command) to docs/results/<name>.json and every
model's per-pair margins (float16) to docs/results/pairs/<name>.npz, so any CI can be recomputed from the repository.

`recompute` does that without the run folders: it scores nothing, and rebuilds every statistic of each committed
docs/results/<name>.json (accuracies, gains, differences, claim statistics, with their CIs) from its pairs/<name>.npz
and the pairs' lengths (the protocol's data split again from its config), keeping what the margins do not hold (the
teacher's labels, sizes, timings, environment).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.report.results import save_results

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "docs" / "results"
PAIRS = RESULTS / "pairs"
EXE = ".venv/bin/rewardsmith"

# (results name, committed config, run folder, seeds), in the order they run: the sweep first, so the strength of
# ANCHOR is chosen on validation before the layer and headline runs use it.
SWEEP = "shift-harmless-sweep"
LAYER = "shift-harmless-layer"
PAPER_FORM = "shift-harmless-paper"
TESTBED = "shift-testbed"
RUNS = (
    (SWEEP, "configs/shift-harmless-sweep.yaml", "runs/shift-harmless", "0,1,2"),
    (LAYER, "configs/shift-harmless-sweep.yaml", "runs/shift-harmless", "0,1,2"),
    ("shift-harmless", "configs/shift-harmless.yaml", "runs/shift-harmless", "0,1,2"),
    ("shift-helpful", "configs/shift-helpful.yaml", "runs/shift-helpful", "0,1,2"),
    # ANCHOR in the paper's form (plain masked MSE, lambda = 1e-4) beside its own naive students: no choice involved
    (PAPER_FORM, "configs/shift-harmless-paper.yaml", "runs/shift-harmless-paper", "0,1,2"),
    # Weak-to-strong inside the synthetic-gold testbed: its data files are the testbed's gold labels, written by
    # `python experiments/testbed.py w2s` (which runs this same command); docs/w2s.md opens with it.
    (TESTBED, "configs/testbed-w2s.yaml", "runs/testbed/w2s", "0,1,2"),
)
# Runs whose committed config is run as it is (no choice of the sweep written into it).
AS_COMMITTED = (SWEEP, PAPER_FORM, TESTBED)


def chosen_anchor() -> dict[str, Any]:
    """The sweep's validation choice among the last-layer strengths: its method entry of the sweep config."""
    import yaml

    path = RESULTS / f"{SWEEP}.json"
    if not path.exists():
        raise SystemExit(
            f"{path.relative_to(ROOT)} is missing: run the sweep first (`experiments/w2s.py run --only {SWEEP}`)"
        )
    metrics = json.loads(path.read_text(encoding="utf-8"))
    last = next((s for s in metrics.get("anchor_selection", []) if s.get("layers") == [1.0]), None)
    if last is None:
        raise SystemExit(f"{path.relative_to(ROOT)}: no last-layer anchor_selection")
    sweep = yaml.safe_load((ROOT / RUNS[0][1]).read_text(encoding="utf-8"))
    return dict(next(m for m in sweep["methods"] if m["name"] == last["chosen"]))


def run_config(name: str, config: str) -> str:
    """The config a run uses: the committed one for the sweep; for the layer run the sweep's data and training with
    naive, ANCHOR at lambda* and ANCHOR at lambda* on the middle layer (depth 0.5); for a headline run the committed
    config with every anchor method replaced by ANCHOR at lambda*. Written to runs/<name>.yaml; returns its path."""
    import yaml

    if name in AS_COMMITTED:
        return config
    anchor = chosen_anchor()
    data = yaml.safe_load((ROOT / config).read_text(encoding="utf-8"))
    if name == LAYER:
        middle = {**anchor, "name": f"{anchor['name']}-mid", "anchor": {**anchor["anchor"], "layers": [0.5]}}
        data["methods"] = [m for m in data["methods"] if m["objective"] != "anchor"] + [anchor, middle]
    else:
        data["methods"] = [m for m in data["methods"] if m["objective"] != "anchor"] + [anchor]
    out = Path("runs") / f"{name}.yaml"
    (ROOT / out).parent.mkdir(parents=True, exist_ok=True)
    (ROOT / out).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(out)


def command(config: str, out: str, seeds: str) -> str:
    return f"rewardsmith shift --config {config} --out {out} --seeds {seeds}"


def scale(config_path: str) -> dict[str, Any]:
    """Mean square of the pretrained student's reference states (last and middle layer) on the W2S pool."""
    from rewardsmith.config import load_yaml
    from rewardsmith.data.collate import encode_pairs
    from rewardsmith.data.templates import encoder_for
    from rewardsmith.models.backbone import num_hidden_layers
    from rewardsmith.models.factory import build_reward_model
    from rewardsmith.w2s.claims import PAPER_RAW_WEIGHT
    from rewardsmith.w2s.config import ShiftConfig
    from rewardsmith.w2s.metrics import reference_mean_square
    from rewardsmith.w2s.objectives.anchor import layers_for
    from rewardsmith.w2s.pipeline import shift_data
    from rewardsmith.w2s.reference import ReferenceStateCache

    cfg = load_yaml(ShiftConfig, ROOT / config_path)
    data = shift_data(cfg, cfg.data_dir)
    model, tokenizer = build_reward_model(cfg.student, 0)
    encoded = encode_pairs(encoder_for(tokenizer, cfg.student), data.w2s)
    n_layers = num_hidden_layers(model.backbone)
    depths = {"last": 1.0, "middle": 0.5}
    layers = {name: layers_for([d], n_layers)[0] for name, d in depths.items()}
    cache = ReferenceStateCache.build(model, encoded, sorted(set(layers.values())), int(tokenizer.pad_token_id))
    ms = reference_mean_square(cache)
    out = {
        "config": config_path,
        "pairs": len(data.w2s),
        "sequences": int((cache.counts > 0).sum()),
        "paper_raw_weight": PAPER_RAW_WEIGHT,
        "layers": {
            name: {
                "depth": depths[name],
                "hidden_state_index": layer,
                "mean_square": round(ms[layer], 6),
                "paper_weight_normalised": float(f"{PAPER_RAW_WEIGHT * ms[layer]:.3g}"),
            }
            for name, layer in layers.items()
        },
        "command": "python experiments/w2s.py scale",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "anchor-scale.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


def run(names: list[str] | None) -> None:
    for name, committed, out, seeds in RUNS:
        if names and name not in names:
            continue
        config = run_config(name, committed)
        cmd = ["nice", "-n", "19", str(ROOT / EXE), "shift", "--config", config, "--out", out, "--seeds", seeds]
        print(f"running: {command(config, out, seeds)}", flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)
        save(name, config, out, seeds)


def save(name: str, config: str, out: str, seeds: str) -> None:
    """docs/results/<name>.json and docs/results/pairs/<name>.npz from the run folder's current metrics.json."""
    run_dir = ROOT / out
    path = save_results(name, run_dir, command(config, out, seeds), RESULTS)
    metrics = json.loads(path.read_text(encoding="utf-8"))
    pairs = export_pairs(run_dir, metrics, PAIRS / f"{name}.npz")
    print(f"wrote {path.relative_to(ROOT)}, {pairs.relative_to(ROOT)} ({pairs.stat().st_size / 1e6:.2f} MB)")


def export_pairs(run_dir: Path, metrics: dict[str, Any], dest: Path) -> Path:
    """Every model's per-pair margins r(chosen) - r(rejected) of the run's methods and seeds, float16, one array
    per (model, seed, split) named `<model>/seed<k>/<split>` (the teacher's seed is -1), plus each split's
    chosen-longer flags as `lengths/<split>`; written compressed."""
    arrays: dict[str, np.ndarray] = {}
    teacher = np.load(run_dir / "teacher" / "margins.npz")
    for key in teacher.files:
        if key.startswith("eval:"):
            arrays[f"teacher/seed-1/{key[5:]}"] = teacher[key].astype(np.float16)
    models = [m["name"] for m in metrics["config"]["methods"]] + (["ceiling"] if metrics["config"]["ceiling"] else [])
    for seed in metrics["config"]["seeds"]:
        for model in models:
            saved = np.load(run_dir / f"seed{seed}" / model / "margins.npz")
            for split in saved.files:
                arrays[f"{model}/seed{seed}/{split}"] = saved[split].astype(np.float16)
    dest.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dest, **arrays)
    return dest


def summarise(names: list[str] | None) -> None:
    """Copies the named runs again (`run` copies each as it ends); a shared folder holds its last run's metrics,
    so name only runs whose folder's last run they are."""
    for name, committed, out, seeds in RUNS:
        if names and name not in names:
            continue
        config = committed if name in AS_COMMITTED else f"runs/{name}.yaml"
        save(name, config, out, seeds)


def committed_margins(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The margins of docs/results/pairs/<name>.npz as compute_metrics takes them: (test margins, validation
    margins), each margins[model][seed][split] -> (N_split,) float64 (the teacher's seed -1)."""
    from rewardsmith.w2s.metrics import VAL_SPLIT

    test: dict[str, Any] = {}
    val: dict[str, Any] = {}
    with np.load(PAIRS / f"{name}.npz", allow_pickle=False) as arrays:
        for key in arrays.files:
            model, seed, split = key.split("/", 2)
            into = val if split == VAL_SPLIT else test
            into.setdefault(model, {}).setdefault(int(seed.removeprefix("seed")), {})[split] = arrays[key].astype(
                np.float64
            )
    return test, val


def recompute(names: list[str] | None) -> None:
    """Every statistic of the named committed results (default: all) rebuilt from their committed margins."""
    from rewardsmith.config import from_dict
    from rewardsmith.io.jsonsafe import json_ready
    from rewardsmith.w2s.config import ShiftConfig
    from rewardsmith.w2s.metrics import compute_metrics
    from rewardsmith.w2s.pipeline import shift_data

    for name, *_ in RUNS:
        if names and name not in names:
            continue
        path = RESULTS / f"{name}.json"
        committed = json.loads(path.read_text(encoding="utf-8"))
        config = from_dict(ShiftConfig, committed["config"])
        missing = [d.path for d in (config.source, *config.targets) if d.path and not (ROOT / d.path).exists()]
        if missing:  # the testbed's files: `python experiments/testbed.py w2s` writes them
            print(f"skipped {name}: its data files are not here ({', '.join(missing)})")
            continue
        data = shift_data(config)
        if data.sizes() != committed["sizes"]:
            raise SystemExit(f"{name}: the data splits into {data.sizes()}, the committed run had {committed['sizes']}")
        test, val = committed_margins(name)
        # The run's model order (its bootstrap draws follow it), as its metrics list the models.
        test = {model: test[model] for model in committed["methods"]}
        val = {model: val[model] for model in committed["validation"] if model in val}
        fresh = compute_metrics(config, data.eval, np.full(1, 0.5), test, None, val)
        fresh.pop("teacher_labels")  # the teacher's labels on the W2S pool are not among the margins: kept
        committed.update(json_ready(fresh))
        path.write_text(json.dumps(committed, indent=1) + "\n", encoding="utf-8")
        print(f"recomputed {path.relative_to(ROOT)} from {(PAIRS / f'{name}.npz').relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("scale", "run", "summarise", "recompute"))
    parser.add_argument("--only", nargs="*", help="results names to run or summarise (default: all)")
    parser.add_argument("--config", default="configs/shift-harmless-sweep.yaml", help="scale: the shift config")
    args = parser.parse_args()
    if args.action == "scale":
        print(json.dumps(scale(args.config), indent=1))
    elif args.action == "run":
        run(args.only)
    elif args.action == "recompute":
        recompute(args.only)
    else:
        summarise(args.only)


if __name__ == "__main__":
    main()
