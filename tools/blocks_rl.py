"""Result blocks of docs/rl.md (and the README's RL section), rendered from docs/results/rl.json only
(experiments/rl.py summarise): the gold tracker's points, the monitors over the run and the reward-wait share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from blocks_common import ci_text, load, table
from blocks_common import source as _source


def _ci(entry: Mapping[str, Any] | None, decimals: int = 3) -> str:
    if not entry:
        return "n/a"
    return ci_text(entry.get("estimate"), [entry.get("low"), entry.get("high")], decimals)


def block_points() -> str:
    d = load("rl")
    golds = list(d["points"][0]["golds"]) if d["points"] else []
    rows = [
        [str(p["step"]), _ci(p["kl"]), _ci(p["proxy"]), *(_ci(p["golds"][g]) for g in golds), f"{p['length']:.1f}"]
        for p in d["points"]
    ]
    header = ["step", "KL to the reference (nats)", "proxy", *[f"gold: {g}" for g in golds], "mean tokens"]
    f = d["facts"]
    s = f["settings"]
    return (
        f"SmolLM2-135M-Instruct, GRPO for {s['steps']} steps ({s['prompts_per_step']} prompts x {s['generations']} "
        f"generations of at most {s['max_new_tokens']} tokens, lr {s['lr']:g}, KL coefficient {s['beta']:g}), "
        f"rewarded by `{f['proxy']}` served on loopback; each point samples {d['points'][0]['samples']} completions "
        f"of each of {f['heldout_prompts']} held-out prompts (95% CIs over prompts). The run took "
        f"{f['seconds'] / 60:.1f} min.\n\n"
        + table(header, rows)
        + "\n\n![proxy and gold against KL](rl/gold-vs-kl.png)\n\n"
        + _source("rl")
    )


def block_monitors() -> str:
    d = load("rl")
    steps = d["steps"]
    keep = steps if len(steps) <= 10 else [*steps[:: max(1, len(steps) // 10)], steps[-1]]
    rows = [
        [
            str(s["step"]),
            f"{s['reward']:.3f}" if s["reward"] is not None else "n/a",
            *(
                "n/a" if s["monitors"][k] is None else f"{s['monitors'][k]:.3f}"
                for k in ("length_mean", "length_corr", "repeated_ngram_rate", "group_reward_sd")
            ),
            ", ".join(s["firing"]) or "-",
        ]
        for s in keep
    ]
    header = [
        "step",
        "mean reward",
        "length (chars)",
        "reward-length corr",
        "repeated 4-grams",
        "group reward sd",
        "firing",
    ]
    w = d["reward_wait_share"]
    share = (
        f"Share of step time spent waiting for rewards (the HTTP round trip to the server): median "
        f"{100 * w['median']:.1f}%, at most {100 * w['max']:.1f}%, over {w['steps']} steps."
        if w["median"] is not None
        else "Reward-wait share: not measured."
    )
    return (
        "The server's monitors (GET /v1/monitors after each step; their window holds the run's last 1024 texts):\n\n"
        + table(header, rows)
        + "\n\n![monitors over the run](rl/monitors.png)\n\n"
        + share
        + "\n\n"
        + _source("rl")
    )


def block_readme() -> str:
    """The points without the figure (README paths differ), and the reward-wait share."""
    points = block_points().split("\n\n![")[0]
    share = [x for x in block_monitors().split("\n\n") if x.startswith(("Share of step time", "Reward-wait"))]
    return points + "\n\n" + "\n\n".join(share) + "\n\n" + _source("rl")


BLOCKS: dict[str, Callable[[], str]] = {"rl": block_readme, "rl-points": block_points, "rl-monitors": block_monitors}
