"""Result blocks of docs/rl.md (and the README's RL section), rendered from docs/results/rl.json only
(experiments/rl.py summarise): each arm's gold tracker points, the monitors over the main run, the reward-wait share
beside an in-process reward function, and the claims of rewardsmith.rl.claims with the verdicts
rewardsmith.rl.claim_results builds; these functions only lay them out."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Mapping
from typing import Any

from blocks_common import SMOLLM2, ci_text, claim_results_block, load, table
from blocks_common import source as _source

from rewardsmith.claims import CLAIM_HEADER, claim_row
from rewardsmith.rl.claim_results import gold_label, rl_claim_results

MAIN = "helpful"
WAIT_GOAL = 0.05  # the goal for the share of a step spent waiting for rewards
# An assumed step time where generation is fast (a GPU-class step; an assumption, not a measurement): the committed
# reward round trips are set against it to say what the CPU share becomes when the step no longer hides them.
ASSUMED_FAST_STEP_S = 1.0
PROBES = {
    "icrm - bt": "the in-context model (steered by the demonstrations) against its Bradley-Terry baseline",
    "calibrated - uncalibrated": "the harmless reward model uncalibrated against one rater's PEBS-calibrated reward",
}


def _ci(entry: Mapping[str, Any] | None, decimals: int = 3) -> str:
    if not entry:
        return "n/a"
    return ci_text(entry.get("estimate"), [entry.get("low"), entry.get("high")], decimals)


def _not_run(d: Mapping[str, Any], arm: str) -> str | None:
    return None if arm in d["arms"] else f"Not run: the `{arm}` arm (`python experiments/rl.py run --arm {arm}`)."


def _of_the_main_arm(render: Callable[[Mapping[str, Any], Mapping[str, Any]], str]) -> Callable[[], str]:
    """A block of the main arm: render(the results, the main arm), or a not-run note while that arm has not run."""

    @functools.wraps(render)
    def block() -> str:
        d = load("rl")
        missing = _not_run(d, MAIN)
        if missing:
            return missing + "\n\n" + _source("rl")
        return render(d, d["arms"][MAIN])

    return block


def _settings(arm: Mapping[str, Any]) -> str:
    f, s = arm["facts"], arm["facts"]["settings"]
    took = (
        f"took {f['seconds'] / 60:.1f} min"
        if f.get("seconds") is not None
        else f"stopped after step {f['stopped']['after_step']}: {f['stopped']['error']}"
    )
    return (
        f"GRPO for {s['steps']} steps ({s['prompts_per_step']} prompts x {s['generations']} generations of at most "
        f"{s['max_new_tokens']} tokens, lr {s['lr']:g}, KL coefficient {s['beta']:g}, advantages scaled by "
        f"{s.get('scale_rewards', 'group')}) {took}"
    )


def _points_table(d: Mapping[str, Any], arms: list[str]) -> str:
    golds = d["golds"]
    rows = [
        [
            name,
            str(p["step"]),
            _ci(p["kl"]),
            _ci(p["proxy"]),
            *(_ci(p["golds"][g]) for g in golds),
            f"{p['length']:.1f}",
        ]
        for name in arms
        for p in d["arms"][name]["points"]
    ]
    header = ["arm", "step", "KL to the reference (nats)", "proxy", *[gold_label(g) for g in golds], "mean tokens"]
    return table(header, rows)


@_of_the_main_arm
def block_points(d: Mapping[str, Any], arm: Mapping[str, Any]) -> str:
    f = arm["facts"]
    return (
        f"{SMOLLM2} rewarded by `{f['proxy']}` served on loopback: {_settings(arm)}. Each point samples "
        f"{arm['points'][0]['samples']} completions of each of {f['heldout_prompts']} held-out prompts (95% CIs over "
        "prompts).\n\n"
        + _points_table(d, [MAIN])
        + "\n\n![proxy and gold against KL](rl/gold-vs-kl.png)\n\n"
        + _source("rl")
    )


def _share_text(arm: Mapping[str, Any]) -> str:
    w = arm["reward_wait_share"]
    if w["median"] is None:
        return "Reward-wait share: not measured."
    text = (
        f"Share of step time spent waiting for rewards (the HTTP round trip to the server, which scores the step's "
        f"completions): median {100 * w['median']:.1f}%, at most {100 * w['max']:.1f}%, over {w['steps']} steps "
        f"(goal: at most {100 * WAIT_GOAL:g}% of the step; "
        + ("met at every step)." if w["max"] <= WAIT_GOAL else "exceeded at some steps).")
    )
    inproc = arm.get("inprocess")
    if inproc:
        text += (
            f" The same completions scored by the same model inside the trainer's process "
            f"(`python experiments/rl.py inprocess`): median {100 * inproc['share_median']:.1f}% of the step "
            f"({inproc['seconds_median']:.3f} s a step against {inproc['served_seconds_median']:.3f} s served); the "
            f"served and in-process rewards differ by at most {inproc['max_abs_difference']:.1e} (the model scores "
            "under bf16 autocast, as it was trained, and a text's bf16 score moves with the texts it is batched with: "
            "the server batches a step's completions across prompts)."
        )
    else:
        text += " An in-process reward function: not run."
    return text + _fast_step_text(arm)


def _fast_step_text(arm: Mapping[str, Any]) -> str:
    """The reward-wait share against an assumed fast step: the committed round trips' seconds over
    ASSUMED_FAST_STEP_S (the step's own seconds here are CPU generation, which hides the round trip)."""
    steps = [s for s in arm["steps"] if s.get("reward_seconds") is not None and s.get("step_time")]
    if not steps:
        return ""
    reward = sorted(s["reward_seconds"] for s in steps)
    step = sorted(s["step_time"] for s in steps)
    median = statistics.median(reward)
    fast = ASSUMED_FAST_STEP_S
    return (
        f" These shares are CPU figures: a step here took {step[0]:.0f}-{step[-1]:.0f} s, most of it generating "
        f"completions, which hides the round trip. The round trip alone took a median {median:.2f} s (at most "
        f"{reward[-1]:.2f} s); at an assumed {fast:g} s step (a GPU-class step time: an assumption, not measured "
        f"here) the same round trip would be {100 * median / fast:.0f}% of the step (at most "
        f"{100 * reward[-1] / fast:.0f}%), "
        + ("above" if median / fast > WAIT_GOAL else "within")
        + f" the {100 * WAIT_GOAL:g}% goal, unless the served model also scores faster there (not measured)."
    )


@_of_the_main_arm
def block_monitors(d: Mapping[str, Any], arm: Mapping[str, Any]) -> str:
    steps = arm["steps"]
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
    fired = sorted({r for s in steps for r in s["firing"]})
    verdict = (
        "No warning fired during the run."
        if not fired
        else f"Warnings fired: {', '.join(fired)} (first at step "
        + ", ".join(str(next(s["step"] for s in steps if r in s["firing"])) for r in fired)
        + ")."
    )
    return (
        "The server's monitors (GET /v1/monitors after each step; their window holds the run's last 1024 texts). "
        + verdict
        + "\n\n"
        + table(header, rows)
        + "\n\n![monitors over the run](rl/monitors.png)\n\n"
        + _share_text(arm)
        + "\n\n"
        + _source("rl")
    )


def block_probes() -> str:
    d = load("rl")
    parts = []
    for key, what in PROBES.items():
        a, b = key.split(" - ")
        missing = [m for m in (_not_run(d, a), _not_run(d, b)) if m]
        if missing:
            parts.append(f"**{what}**: " + " ".join(missing))
            continue
        arm = d["arms"][a]
        rater = arm["facts"].get("rater")
        extra = (
            f" The calibrated arm's reward is rater {rater}'s calibrated harm score negated (shrunk slope "
            f"{arm['facts']['rater_slope']:.2f} harm points per reward unit)."
            if rater
            else ""
        )
        parts.append(
            f"**{what}** ({_settings(arm)} per arm).{extra}\n\n"
            + _points_table(d, [a, b])
            + f"\n\n![{a} against {b}](rl/probe-{a}-vs-{b}.png)"
        )
    return "\n\n".join(parts) + "\n\n" + _source("rl")


def block_claims() -> str:
    return claim_results_block(rl_claim_results, "rl")


def block_readme() -> str:
    """The main run's points without the figure (README paths differ), the reward-wait share and the claims."""
    d = load("rl")
    points = block_points().split("\n\n![")[0].split("\n\nSource:")[0]
    share = _share_text(d["arms"][MAIN]) if MAIN in d["arms"] else ""
    claims = table(CLAIM_HEADER, [claim_row(r, 3) for r in rl_claim_results(d)])
    return "\n\n".join(x for x in (points, share, claims) if x) + "\n\n" + _source("rl")


BLOCKS: dict[str, Callable[[], str]] = {
    "rl": block_readme,
    "rl-points": block_points,
    "rl-monitors": block_monitors,
    "rl-probes": block_probes,
    "rl-claims": block_claims,
}
