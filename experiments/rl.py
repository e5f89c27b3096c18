"""A policy trained on rewards served by rewardsmith: GRPO of SmolLM2-135M-Instruct against the README's helpful
reward model, served by `rewardsmith serve` on loopback, with the gold of experiments/bon.py (its learned gold and
the IFEval checkers) tracked on held-out prompts as the policy moves away from its start, and the server's
reward-hacking monitors read after every step (docs/rl.md).

    .venv/bin/python experiments/rl.py run [--steps 40]   # runs/rl/run: points.jsonl, steps.jsonl, completions/
    .venv/bin/python experiments/rl.py summarise          # docs/results/rl.json and docs/rl/*.png

Prompts: the 100 held-out prompts of experiments/bon.py (runs/bon/prompts.jsonl: helpful-rejection-sampled
conversations no reward model here was trained on, each with verifiable instructions); the 16 whose id sorts
first are the tracker's held-out prompts, the rest the training prompts. Every setting is fixed before the run
(GRPOSettings below: full fine-tune, lr 1e-5, no KL term, 2 prompts x 8 generations of at most 32 tokens per step).

The reward-wait share is the time inside the reward function (an HTTP round trip to the server, which scores the
step's 16 completions) over the time of the step, per step, as the trainer logs it.

On a GPU the same run takes `--gpu` (TRL's colocated vLLM generation, bf16); the server is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "runs" / "rl" / "run"
PROXY = "runs/helpful/model"
GOLDS = ["ifeval", "runs/bon/gold/model"]
PROMPTS = ROOT / "runs" / "bon" / "prompts.jsonl"
HELDOUT = 16
RESULTS = ROOT / "docs" / "results"
FIGURES = ROOT / "docs" / "rl"


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


def serve(model: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`rewardsmith serve --port 0` on loopback in its own process; its URL once it answers."""
    import httpx

    out = log.open("wb")
    proc = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "rewardsmith"), "serve", "--model", model, "--port", "0"],
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


def run(steps: int, gpu: bool) -> None:
    import httpx
    from transformers import TrainerCallback

    from rewardsmith.bon.policy import load_policy
    from rewardsmith.bon.prompts import read_prompt_record
    from rewardsmith.client import GRPOReward, RewardClient
    from rewardsmith.data.adapters.generic import iter_records
    from rewardsmith.jobs.bon import ModelScores
    from rewardsmith.jobs.inference import InferenceOptions
    from rewardsmith.rl.recipe import GRPOSettings, grpo_trainer
    from rewardsmith.rl.tracker import GoldTracker, TrackerSettings, served_proxy

    if (RUN / "steps.jsonl").exists():
        raise SystemExit(f"{RUN} holds a run already; move it away to run again")
    RUN.mkdir(parents=True, exist_ok=True)
    prompts = sorted((read_prompt_record(r, PROMPTS, k) for k, r in iter_records(PROMPTS)), key=lambda p: p.id)
    heldout, train = prompts[:HELDOUT], prompts[HELDOUT:]
    settings = GRPOSettings(
        steps=steps, prompts_per_step=2, generations=8, max_new_tokens=32, lr=1e-5, use_vllm=gpu, bf16=gpu
    )
    proc, url = serve(PROXY, RUN / "server.log")
    try:
        policy = load_policy("smollm2")
        client = RewardClient(url)
        tracker = GoldTracker(
            RUN,
            heldout,
            policy,
            GOLDS,
            ModelScores(InferenceOptions(), progress=False),
            served_proxy(client),
            TrackerSettings(every=max(1, steps // 3), samples=4, max_new_tokens=32),
        )
        reward = TimedReward(GRPOReward(url))

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
                with (RUN / "steps.jsonl").open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")

        started = time.perf_counter()
        trainer = grpo_trainer(
            policy.model, policy.tokenizer, train, reward, RUN, settings, [tracker.callback(), Monitors()]
        )
        policy.model.train()
        trainer.train()
        facts = {
            "seconds": round(time.perf_counter() - started, 1),
            "settings": settings.__dict__,
            "proxy": PROXY,
            "golds": GOLDS,
            "heldout_prompts": len(heldout),
            "train_prompts": len(train),
            "command": "python experiments/rl.py run " + " ".join(sys.argv[2:]),
        }
        (RUN / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
        client.close()
    finally:
        proc.terminate()
        proc.wait(60)


def summarise() -> None:
    """docs/results/rl.json and the figures: proxy and gold against KL, the monitors and the reward over steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from rewardsmith.io.atomic import atomic_write_text

    points = [json.loads(x) for x in (RUN / "points.jsonl").read_text().splitlines()]
    steps = [json.loads(x) for x in (RUN / "steps.jsonl").read_text().splitlines()]
    facts = json.loads((RUN / "facts.json").read_text())
    step_times = [s["logs"].get("step_time") for s in steps]
    waits = [s["reward_seconds"] for s in steps]
    share = [w / t for w, t in zip(waits, step_times, strict=True) if w is not None and t]
    out = {
        "command": "python experiments/rl.py run && python experiments/rl.py summarise",
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
    }
    atomic_write_text(RESULTS / "rl.json", json.dumps(out, indent=1) + "\n")
    FIGURES.mkdir(parents=True, exist_ok=True)
    kl = [p["kl"]["estimate"] for p in points]
    fig, axes = plt.subplots(1, 1 + len(GOLDS), figsize=(4.2 * (1 + len(GOLDS)), 3.4))
    series = [("proxy", [p["proxy"] for p in points])] + [(g, [p["golds"][g] for p in points]) for g in GOLDS]
    for ax, (name, values) in zip(axes, series, strict=True):
        est = [v["estimate"] for v in values]
        low = [v["low"] if v["low"] is not None else v["estimate"] for v in values]
        high = [v["high"] if v["high"] is not None else v["estimate"] for v in values]
        ax.plot(kl, est, marker="o")
        ax.fill_between(kl, low, high, alpha=0.25)
        ax.set_xlabel("KL(policy || reference), nats")
        ax.set_title(name if len(name) < 30 else "learned gold")
    fig.tight_layout()
    fig.savefig(FIGURES / "gold-vs-kl.png", dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, 3, figsize=(12.6, 3.4))
    x = [s["step"] for s in out["steps"]]
    for ax, key in zip(axes, ("reward_mean", "length_corr", "group_reward_sd"), strict=True):
        ax.plot(x, [s["monitors"][key] for s in out["steps"]], marker=".")
        ax.set_xlabel("step")
        ax.set_title(f"monitor: {key}")
    fig.tight_layout()
    fig.savefig(FIGURES / "monitors.png", dpi=120)
    plt.close(fig)
    print(f"wrote {RESULTS / 'rl.json'} and {FIGURES}/*.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", "summarise"])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--gpu", action="store_true", help="TRL's colocated vLLM generation and bf16")
    args = parser.parse_args()
    run(args.steps, args.gpu) if args.step == "run" else summarise()


if __name__ == "__main__":
    main()
