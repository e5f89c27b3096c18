"""`rewardsmith demo` (what `make demo` runs): the four jobs of rewardsmith on real data, offline, in minutes.

The data are the small MIT-licensed sample shipped inside the package (resources/sample: HH-RLHF, MoralChoice,
PluriHarms); the configs are resources/demo/*.yaml. Each step is its own run folder inside the demo folder, so
an interrupted demo resumes where it stopped, and each step reuses what an earlier one wrote:

1. train/      a MiniLM Bradley-Terry model on HH-RLHF harmless pairs, beside the length rule and the
               length-controlled accuracy;
2. shift/      weak-to-strong under shift (teacher, naive, anchor, ceiling): harmless pairs to MoralChoice;
3. steer/      an in-context model on step 1's frozen encoder scores step 1's held-out pairs with no, as-labelled
               and flipped demonstrations, against step 1's model on the same pairs;
4. calibrate/  per-rater calibration (PEBS and its baselines) of PluriHarms harm ratings;

then index.html, one page with each step's key number and plot, linking the four reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rewardsmith.calibrate.config import CalibrateRunConfig
from rewardsmith.config import RunConfig, from_dict, to_dict
from rewardsmith.data.sources import sample_dir
from rewardsmith.errors import ConfigError
from rewardsmith.evaluate.metrics import pairwise_accuracy
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.episodes import load_pools
from rewardsmith.icrm.steer import steering_check
from rewardsmith.inference import InContextInference, InferenceOptions, load_inference
from rewardsmith.io.environment import environment_info
from rewardsmith.io.progress import Progress
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.calibrate import run_calibrate
from rewardsmith.jobs.common import JobResult
from rewardsmith.jobs.icrm import run_icrm_train
from rewardsmith.jobs.shift import run_shift_job
from rewardsmith.jobs.train import run_train
from rewardsmith.report.demo import demo_index, steer_report
from rewardsmith.w2s.config import ShiftConfig

STEPS = ("train", "shift", "steer", "calibrate")
HARMLESS = "hh-rlhf/harmless-base"
N_DEMOS = 8


def demo_config(name: str) -> dict[str, Any]:
    """The YAML of resources/demo/<name>.yaml as a dict."""
    text = resources.files("rewardsmith.resources").joinpath("demo", f"{name}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _configs(data_dir: Path, quick: bool) -> tuple[RunConfig, ShiftConfig, ICRMRunConfig, CalibrateRunConfig]:
    train = from_dict(RunConfig, demo_config("train"))
    shift = from_dict(ShiftConfig, demo_config("shift"))
    icrm = from_dict(ICRMRunConfig, demo_config("icrm"))
    calibrate = from_dict(CalibrateRunConfig, demo_config("calibrate"))
    train.data.data_dir = icrm.data_dir = shift.data_dir = str(data_dir)
    calibrate.source.data_dir = str(data_dir)
    if quick:  # a smoke test's sizes: every step runs, none says much
        train.data.train_pairs, train.data.eval_pairs, train.model.max_length, train.eval.n_boot = 160, 100, 64, 200
        icrm.train.max_steps, icrm.train.batch_size, icrm.model.max_length = 40, 16, 64
        icrm.episodes.pairs_per_source = 400
        calibrate.evaluation.seeds, calibrate.evaluation.bootstrap, calibrate.fit_sizes = 2, 200, [25]
    return train, shift, icrm, calibrate


def _steer(folder: Path, cfg: ICRMRunConfig, train_dir: Path, progress: bool, overwrite: bool) -> dict[str, Any]:
    """Step 3: train the ICRM on step 1's frozen encoder, then the steering check on step 1's held-out pairs."""
    cfg.model.backbone = str(train_dir / "model")
    cfg.train.progress = progress
    with RunFolder.open(
        folder, "demo-steer", to_dict(cfg), overwrite=overwrite, volatile=("train.progress", "data_dir")
    ) as run:
        done = run.path / "metrics.json"
        if run.complete and done.exists():
            import json

            return dict(json.loads(done.read_text(encoding="utf-8")))
        run.claim("icrm")
        icrm = run_icrm_train(cfg, run.path / "icrm", overwrite=overwrite)
        pools = load_pools(cfg.episodes, cfg.data_dir, [HARMLESS])[HARMLESS]
        heldout, demo_pool = pools["test"].pairs, pools["demo"].pairs
        steered = load_inference(run.path / "icrm" / "model", InferenceOptions(bf16=cfg.train.bf16))
        if not isinstance(steered, InContextInference):
            raise ConfigError(f"{run.path / 'icrm' / 'model'}: not an in-context model")
        check = steering_check(steered.scorer, heldout, demo_pool, N_DEMOS, seed=cfg.eval.seed, n_boot=cfg.eval.n_boot)
        chosen, rejected = load_inference(train_dir / "model", InferenceOptions(bf16=cfg.train.bf16)).score_pairs(
            heldout
        )
        bt_acc = pairwise_accuracy(chosen - rejected, n_boot=cfg.eval.n_boot, seed=cfg.eval.seed)
        metrics = {
            "check": check,
            "bt": {"accuracy": bt_acc.estimate, "accuracy_ci": bt_acc.ci},
            "icrm_train": {k: icrm.metrics[k] for k in ("steps", "episodes_seen", "seconds", "final_terms")},
            "pools": icrm.metrics["pools"],
            "environment": environment_info(cfg.train.seed),
        }
        run.write_json("metrics.json", metrics)
        run.claim("plots")
        steer_report(metrics, run)
        run.mark_complete()
        return metrics


def run_demo(out: str | Path, progress: bool = True, overwrite: bool = False, quick: bool = False) -> JobResult:
    """Runs (or resumes) the demo into the run folder `out`; returns the index page's summary."""
    out = Path(out)
    with (
        sample_dir() as data_dir,
        RunFolder.open(out, "demo", {"quick": quick, "steps": list(STEPS)}, overwrite=overwrite) as folder,
    ):
        t0 = time.perf_counter()
        train_cfg, shift_cfg, icrm_cfg, cal_cfg = _configs(data_dir, quick)
        train_cfg.train.progress = progress
        for step in (*STEPS, "index.html", "metrics.json"):
            folder.claim(step)
        results: dict[str, Any] = {}
        seconds: dict[str, float] = {}
        steps: tuple[tuple[str, str, Callable[[], dict[str, Any]]], ...] = (
            ("train", "trained", lambda: run_train(train_cfg, out / "train", overwrite).metrics),
            (
                "shift",
                "stress-tested",
                lambda: (
                    run_shift_job(shift_cfg, out / "shift", quick=quick, progress=progress, overwrite=overwrite).metrics
                ),
            ),
            ("steer", "steered", lambda: _steer(out / "steer", icrm_cfg, out / "train", progress, overwrite)),
            ("calibrate", "calibrated", lambda: run_calibrate(cal_cfg, out / "calibrate", overwrite).metrics),
        )
        with Progress("demo", len(STEPS), enabled=progress, unit="steps") as bar:
            for k, (name, done, run_step) in enumerate(steps, start=1):
                started = time.perf_counter()
                results[name] = run_step()
                seconds[name] = round(time.perf_counter() - started, 1)
                bar.update(k, done)
        rows, page = demo_index(results, folder, quick)
        # Every step's metrics in one file (the README's demo table is built from it); seconds: this invocation,
        # so a resumed demo reports only what it ran (a step reused from an earlier run takes about none).
        total = round(time.perf_counter() - t0, 1)
        folder.write_json("metrics.json", {**results, "quick": quick, "seconds": total, "step_seconds": seconds})
        folder.mark_complete()
        return JobResult(
            out,
            f"rewardsmith demo -> {page}",
            results,
            rows,
            [
                "seconds per step: " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()) + f"; {total:.0f} in all",
                f"open {page.resolve()} for the page with all four steps",
            ],
        )
