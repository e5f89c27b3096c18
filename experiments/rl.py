"""A policy trained on rewards served by rewardsmith: GRPO of SmolLM2-135M-Instruct against a reward model served
by `rewardsmith serve` on loopback, with the gold of experiments/bon.py (its learned gold and the IFEval checkers)
tracked on held-out prompts as the policy moves away from its start, and the server's reward-hacking monitors read
after every step (docs/rl.md). One run per arm (ARMS below), each in runs/rl/<arm>:

    .venv/bin/python experiments/rl.py run [--arm helpful] [--steps 30]   # one `rewardsmith rl` run folder
    .venv/bin/python experiments/rl.py inprocess [--arm helpful]          # the same rewards computed in process
    .venv/bin/python experiments/rl.py summarise                          # docs/results/rl.json, docs/rl/*.png

Arms: `helpful` (the README's helpful reward model: the main run); the ICRM probe's `icrm` (the in-context model
steered by experiments/bon.py's demonstrations) and `bt` (its Bradley-Terry baseline); the PEBS probe's
`uncalibrated` (the harmless reward model) and `calibrated` (the same model served with its PluriHarms maps, one
rater's calibrated reward), both with unstandardised advantages and a KL term (rewardsmith/rl/claims.py says why
and how the rater is chosen).

Prompts: the prompts of experiments/bon.py (runs/bon/prompts.jsonl: helpful-rejection-sampled conversations no
reward model here was trained on, each with verifiable instructions) whose rendered chat prompt is at most 192
policy tokens (a step on a 400-token conversation took 106 s against 28 s, measured in a first attempt); of those,
the first 16 by `rewardsmith rl`'s stable hash are the tracker's held-out prompts, the rest the training prompts
(the runs committed before `rewardsmith rl` existed held out the 16 whose id sorts first). Every setting is fixed
before the runs (BASE below: full fine-tune, lr 1e-5, 2 prompts x 8 generations of at most 32 tokens per step,
seed 0).

The reward-wait share is the time inside the reward function (an HTTP round trip to the server, which scores the
step's 16 completions) over the time of the step, per step, as the trainer logs it; `inprocess` times the same
completions scored by the same model loaded in the trainer's process, the alternative it is compared with.

On a GPU the same run takes `--gpu` (TRL's colocated vLLM generation, bf16); the server is the same.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.rl.claims import (
    CALIBRATION_BETA,
    CALIBRATION_LR,
    CALIBRATION_SCALE_REWARDS,
    ICRM_LR,
    ICRM_STEPS,
    PROBE_STEPS,
)

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "rl"
GOLDS = ["ifeval", "runs/bon/gold/model"]
PROMPTS = ROOT / "runs" / "bon" / "prompts.jsonl"
DEMOS = "runs/bon/demos.jsonl"
MAPS = RUNS / "calibration" / "maps.json"
START = RUNS / "policy-start"
TRACK_EVERY = 10  # steps between the tracker's points (each costs about 2.5 min here); the calibration arms took 6
HELDOUT = 16
MAX_PROMPT_TOKENS = 192  # the policy's rendered prompt; longer conversations cost a CPU step minutes (measured)
RESULTS = ROOT / "docs" / "results"
FIGURES = ROOT / "docs" / "rl"


@dataclass(frozen=True)
class Arm:
    """One run's proxy: the served model, its rater (calibrated arms) or demonstrations (in-context arms), whether
    the served reward is negated (a harm scale), and the GRPO settings it changes."""

    model: str
    rater: bool = False
    demos: str | None = None
    negate: bool = False
    changes: tuple[tuple[str, Any], ...] = ()
    steps: int = PROBE_STEPS


PROBE = (("beta", CALIBRATION_BETA), ("scale-rewards", CALIBRATION_SCALE_REWARDS), ("lr", CALIBRATION_LR))
ARMS = {
    "helpful": Arm("runs/helpful/model", steps=30),
    "icrm": Arm("runs/icrm/s0/model", demos=DEMOS, changes=(("lr", ICRM_LR),), steps=ICRM_STEPS),
    "bt": Arm("runs/icrm/bt-s0/model", changes=(("lr", ICRM_LR),), steps=ICRM_STEPS),
    "uncalibrated": Arm("runs/harmless/model", changes=PROBE),
    "calibrated": Arm("runs/harmless/model", rater=True, negate=True, changes=PROBE),
}
# Every arm's GRPO settings but those its `changes` replace (full fine-tune, 2 prompts x 8 generations of at most 32
# tokens per step, seed 0), and the tracker's.
BASE = {"prompts-per-step": 2, "generations": 8, "max-new-tokens": 32, "lr": 1e-5, "seed": 0}
TRACKER = ["--track-every", str(TRACK_EVERY), "--track-samples", "4", "--track-max-new-tokens", "32"]


def median_rater(maps_path: Path) -> tuple[str, float]:
    """rl/claims.py's RATER_RULE: the rater whose shrunk slope is the (lower) median of all raters' slopes."""
    from rewardsmith.calibrate.maps import load_maps

    maps = load_maps(maps_path)
    order = sorted(range(len(maps.rater_ids)), key=lambda j: (float(maps.slope[j]), str(maps.rater_ids[j])))
    j = order[(len(order) - 1) // 2]
    return str(maps.rater_ids[j]), float(maps.slope[j])


def arm_args(name: str, steps: int, gpu: bool) -> list[str]:
    """The `rewardsmith rl` command line of one arm."""
    arm = ARMS[name]
    settings = {**BASE, **dict(arm.changes)}
    args = ["rl", "--policy", "smollm2", "--prompts", str(PROMPTS), "--heldout", str(HELDOUT)]
    args += ["--max-prompt-tokens", str(MAX_PROMPT_TOKENS), "--proxy", arm.model, "--steps", str(steps)]
    for key, value in settings.items():
        args += [f"--{key}", str(value)]
    for gold in GOLDS:
        args += ["--gold", gold]
    if arm.rater:
        args += ["--calibration", str(MAPS), "--rater", median_rater(MAPS)[0]]
    if arm.demos:
        args += ["--demos", arm.demos]
    if arm.negate:
        args += ["--negate"]
    if gpu:
        args += ["--vllm", "--bf16"]
    return [*args, *TRACKER, "--out", str(RUNS / name)]


def run(name: str, steps: int, gpu: bool) -> None:
    """One arm through `rewardsmith rl` (a run folder: resumed after a kill, reported when finished)."""
    args = arm_args(name, steps, gpu)
    RUNS.mkdir(parents=True, exist_ok=True)
    print("$ " + shlex.join(["rewardsmith", *args]), flush=True)
    subprocess.run([str(ROOT / ".venv" / "bin" / "rewardsmith"), *args], cwd=ROOT, check=True)


def completion_text(completion: Any) -> str:
    """A logged completion's text (TRL logs a conversational completion as a list of messages)."""
    return completion[0]["content"] if not isinstance(completion, str) else completion


def inprocess(name: str) -> None:
    """The alternative to serving: each step's logged completions scored by the same model loaded in this process
    (the one inference path, as a reward function inside the trainer would), timed per step; and the rewards
    compared with those the server gave (runs/rl/<arm>/inprocess.json)."""
    import numpy as np
    import pandas as pd

    from rewardsmith.data.schema import Turn
    from rewardsmith.inference import InferenceOptions, ModelScores

    arm, out = ARMS[name], RUNS / name
    if arm.rater or arm.demos or arm.negate:
        raise SystemExit(f"--arm {name}: only an arm served as a plain reward model is timed in process")
    scorer = ModelScores(InferenceOptions(), progress=False)
    rows = []
    logged = out / "trainer" / "completions" if (out / "trainer").is_dir() else out / "completions"
    for path in sorted(logged.glob("*.parquet")):
        frame = pd.read_parquet(path)
        items = [
            (tuple(Turn(m["role"], m["content"]) for m in prompt), completion_text(completion))
            for prompt, completion in zip(frame["prompt"], frame["completion"], strict=True)
        ]
        keep = [k for k, (_, text) in enumerate(items) if text.strip()]  # an empty completion is not sent
        if not rows:
            scorer(arm.model, items[:1])  # load the model first, as the server has before its first request
        started = time.perf_counter()
        rewards = scorer(arm.model, [items[k] for k in keep])
        seconds = time.perf_counter() - started
        served = frame["rewardsmith_reward"].to_numpy(dtype=np.float64)[keep]
        rows.append(
            {
                "step": int(frame["step"].iloc[0]),
                "seconds": seconds,
                "completions": len(keep),
                "max_abs_difference": float(np.max(np.abs(rewards - served))) if keep else None,
            }
        )
    (out / "inprocess.json").write_text(json.dumps({"arm": name, "model": arm.model, "steps": rows}, indent=1) + "\n")
    print(f"wrote {out / 'inprocess.json'}: {len(rows)} steps")


def arm_summary(name: str) -> dict[str, Any] | None:
    """One arm's committed summary (None: the arm was not run): its run folder's facts, points and steps, what
    rewardsmith.rl.summary says of them, and the in-process timing where it was measured."""
    import numpy as np

    from rewardsmith.rl.summary import run_summary

    out = RUNS / name
    if not (out / "points.jsonl").exists():
        return None
    points = [json.loads(x) for x in jsonl_lines((out / "points.jsonl").read_text())]
    steps = [json.loads(x) for x in jsonl_lines((out / "steps.jsonl").read_text())]
    arm = ARMS[name]
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else None
    facts: dict[str, Any] = {
        "arm": name,
        "proxy": arm.model,
        "rater": median_rater(MAPS)[0] if arm.rater else None,
        "rater_slope": median_rater(MAPS)[1] if arm.rater else None,
        "demos": arm.demos,
        "negated": arm.negate,
        "golds": GOLDS,
        "max_prompt_tokens": MAX_PROMPT_TOKENS,
        "command": shlex.join(["rewardsmith", *arm_args(name, arm.steps, False)]),
    }
    if metrics is not None:
        facts.update({k: metrics[k] for k in ("seconds", "heldout_prompts", "train_prompts") if k in metrics})
        facts["prompts_over_the_token_limit"] = metrics.get("prompts_over_the_token_limit")
    else:  # the run stopped: what it recorded
        facts["stopped"] = {"after_step": steps[-1]["step"] if steps else 0}
    summary: dict[str, Any] = {
        "facts": facts,
        "points": points,
        "steps": [
            {
                "step": s["step"],
                "reward": s["logs"].get("reward"),
                "reward_std": s["logs"].get("reward_std"),
                "completion_length": s["logs"].get("completions/mean_length"),
                "step_time": s["logs"].get("step_time"),
                "reward_seconds": s["reward_seconds"],
                "monitors": s["monitors"]["stats"],
                "firing": s["monitors"]["firing"],
            }
            for s in steps
        ],
        **{k: v for k, v in run_summary(points, steps, GOLDS).items() if k not in ("points", "monitors_fired")},
    }
    timed = out / "inprocess.json"
    if timed.exists():
        rows = json.loads(timed.read_text())["steps"]
        by_step = {s["step"]: s for s in steps}
        shares = []
        for row in rows:
            s = by_step.get(row["step"])
            if s and s["reward_seconds"] is not None and s["logs"].get("step_time"):
                # the step as it would have run with the reward computed in process instead of over HTTP
                step_time = s["logs"]["step_time"] - s["reward_seconds"] + row["seconds"]
                shares.append(row["seconds"] / step_time)
        summary["inprocess"] = {
            "share_median": float(np.median(shares)) if shares else None,
            "share_max": float(np.max(shares)) if shares else None,
            "seconds_median": float(np.median([r["seconds"] for r in rows])),
            "served_seconds_median": float(np.median([s["reward_seconds"] for s in steps if s["reward_seconds"]])),
            "max_abs_difference": max(r["max_abs_difference"] or 0.0 for r in rows),
            "steps": len(rows),
        }
    return summary


PAIRS = (("icrm", "bt"), ("calibrated", "uncalibrated"))


def summarise() -> None:
    """docs/results/rl.json and the figures: proxy and gold against KL per arm, the probes' arms side by side, the
    monitors and the reward over steps."""
    from rewardsmith.io.atomic import atomic_write_text
    from rewardsmith.rl.summary import paired_change

    arms = {name: summary for name in ARMS if (summary := arm_summary(name)) is not None}
    paired: dict[str, Any] = {}
    for a, b in PAIRS:
        if a in arms and b in arms and not any("stopped" in arms[x]["facts"] for x in (a, b)):
            # the same held-out prompts in every arm: paired over them
            paired[f"{a} - {b}"] = {g: paired_change(arms[a]["points"], arms[b]["points"], g) for g in GOLDS}
    out = {
        "command": "python experiments/rl.py run --arm ARM (one `rewardsmith rl` each); python experiments/rl.py "
        "summarise",
        "golds": GOLDS,
        "heldout_prompts": HELDOUT,
        "arms": arms,
        "paired": paired,
    }
    atomic_write_text(RESULTS / "rl.json", json.dumps(out, indent=1) + "\n")
    figures(arms)
    print(f"wrote {RESULTS / 'rl.json'} and {FIGURES}/*.png")


def figures(arms: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    FIGURES.mkdir(parents=True, exist_ok=True)
    names = {"proxy": "proxy", "ifeval": "IFEval gold", GOLDS[-1]: "learned gold"}

    def series(ax: Any, points: list[dict[str, Any]], key: str, label: str | None = None) -> None:
        kl = [p["kl"]["estimate"] for p in points]
        values = [p["proxy"] if key == "proxy" else p["golds"][key] for p in points]
        est = [v["estimate"] for v in values]
        low = [v["low"] if v["low"] is not None else v["estimate"] for v in values]
        high = [v["high"] if v["high"] is not None else v["estimate"] for v in values]
        ax.plot(kl, est, marker="o", label=label)
        ax.fill_between(kl, low, high, alpha=0.2)
        ax.set_xlabel("KL(policy || reference), nats per completion")
        ax.set_title(names[key])

    if "helpful" in arms:
        fig, axes = plt.subplots(1, 3, figsize=(12.6, 3.4))
        for ax, key in zip(axes, ("proxy", *GOLDS), strict=True):
            series(ax, arms["helpful"]["points"], key)
        fig.tight_layout()
        fig.savefig(FIGURES / "gold-vs-kl.png", dpi=120)
        plt.close(fig)
        steps = arms["helpful"]["steps"]
        fig, axes = plt.subplots(1, 3, figsize=(12.6, 3.4))
        for ax, key in zip(axes, ("reward_mean", "length_corr", "group_reward_sd"), strict=True):
            ax.plot([s["step"] for s in steps], [s["monitors"][key] for s in steps], marker=".")
            ax.set_xlabel("step")
            ax.set_title(f"monitor: {key}")
        fig.tight_layout()
        fig.savefig(FIGURES / "monitors.png", dpi=120)
        plt.close(fig)
    for a, b in PAIRS:
        if a in arms and b in arms:
            fig, axes = plt.subplots(1, 2, figsize=(8.6, 3.4))
            for ax, key in zip(axes, GOLDS, strict=True):
                for arm in (a, b):
                    series(ax, arms[arm]["points"], key, arm)
                ax.legend()
            fig.tight_layout()
            fig.savefig(FIGURES / f"probe-{a}-vs-{b}.png", dpi=120)
            plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", "inprocess", "summarise"])
    parser.add_argument("--arm", choices=sorted(ARMS), default="helpful")
    parser.add_argument("--steps", type=int, help="default: the arm's (ARMS)")
    parser.add_argument("--gpu", action="store_true", help="TRL's colocated vLLM generation and bf16")
    args = parser.parse_args()
    if args.step == "run":
        run(args.arm, args.steps or ARMS[args.arm].steps, args.gpu)
    elif args.step == "inprocess":
        inprocess(args.arm)
    else:
        summarise()


if __name__ == "__main__":
    main()
