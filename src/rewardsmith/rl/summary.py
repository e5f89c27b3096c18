"""What an RL run's records say (rewardsmith rl's metrics.json): the gold's change over the run per held-out prompt,
with its CI; the KL reached; the share of each step spent waiting for the served reward; which monitors fired (and
which rules the server watched); and the collapse facts of rl/claims.py. Pure functions of points.jsonl and
steps.jsonl."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rewardsmith.stats import paired_difference

# Rules whose firing in the last third of a run counts as collapse (rl/claims.py): the responses became alike,
# repeated themselves, or shrank towards empty.
COLLAPSE_RULES = ("collapse", "repetition", "shrinking")


def values(xs: Sequence[float | None]) -> np.ndarray:
    """A list with gaps (None) as float64 with NaN."""
    return np.array([np.nan if x is None else x for x in xs], dtype=np.float64)


def per_prompt(point: Mapping[str, Any], gold: str) -> np.ndarray:
    """A point's per-prompt values (P,) of one gold (NaN where a prompt had none)."""
    return values(point["per_prompt"]["golds"][gold])


def gold_change(points: Sequence[Mapping[str, Any]], gold: str, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The gold at the last point minus before training, paired over the held-out prompts (an Interval's dict)."""
    return paired_difference(per_prompt(points[-1], gold), per_prompt(points[0], gold), n_boot, seed).to_dict()


def paired_change(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], gold: str, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """(a's gold change) - (b's), paired over the prompts both runs were tracked on (the same prompts, in order)."""
    change_a = per_prompt(a[-1], gold) - per_prompt(a[0], gold)
    change_b = per_prompt(b[-1], gold) - per_prompt(b[0], gold)
    return paired_difference(change_a, change_b, n_boot, seed).to_dict()


def overoptimisation(
    points: Sequence[Mapping[str, Any]], gold: str, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any] | None:
    """The gold over the tracker's points judged as best-of-n judges its curves (bon.estimate.overoptimisation and
    bon.metrics' verdict: the peak point chosen on the validation half of the held-out prompts, the drop after it,
    the rise to it and the first step estimated on the other half), steps in place of n. None without prompt ids."""
    from rewardsmith.bon.estimate import overoptimisation as judge
    from rewardsmith.bon.estimate import validation_half
    from rewardsmith.bon.metrics import overoptimisation_record
    from rewardsmith.stats import bootstrap_indices

    ids = points[0]["per_prompt"].get("ids")
    if not ids or len(points) < 2:
        return None
    curves = np.stack([per_prompt(p, gold) for p in points], axis=1)  # (P, points)
    keep = np.all(np.isfinite(curves), axis=1)
    validation = validation_half([str(i) for i, k in zip(ids, keep, strict=True) if k])
    idx_test = bootstrap_indices(int((~validation).sum()), n_boot, seed)
    record = overoptimisation_record(judge(curves[keep], [int(p["step"]) for p in points], validation, idx_test))
    return {**record, "peak_step": record.pop("peak_n")}


def reward_wait_share(steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per step: seconds inside the reward function over the step's seconds; median, max and the steps counted."""
    share = [
        s["reward_seconds"] / s["logs"]["step_time"]
        for s in steps
        if s.get("reward_seconds") is not None and s["logs"].get("step_time")
    ]
    return {
        "median": float(np.median(share)) if share else None,
        "max": float(np.max(share)) if share else None,
        "steps": len(share),
    }


def run_summary(
    points: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]], golds: Sequence[str], n_boot: int = 1000
) -> dict[str, Any]:
    """The summary of one run (module docstring). A gold `falls` when its change's CI lies below 0; the run
    `collapsed` when a learned gold (a reward model, not a checker) falls or a COLLAPSE_RULES monitor fired in the last
    third of its steps."""
    if not points:
        return {"points": 0}
    changes = {g: gold_change(points, g, n_boot) for g in golds} if len(points) > 1 else {}
    last_third = [s for s in steps if s["step"] > (2 * len(steps)) // 3]
    fired_late = sorted({r for s in last_third for r in s["monitors"].get("firing", []) if r in COLLAPSE_RULES})
    fired = sorted({r for s in steps for r in s["monitors"].get("firing", [])})
    learned = [g for g in golds if g not in ("ifeval", "math")]
    falls = {g: c["high"] is not None and c["high"] < 0 for g, c in changes.items()}
    return {
        "points": len(points),
        "kl_end": points[-1]["kl"],
        "gold_change": changes,
        "overoptimisation": {g: overoptimisation(points, g, n_boot) for g in golds},
        "reward_wait_share": reward_wait_share(steps),
        "monitors_fired": fired,
        "monitor_rules": sorted({r for s in steps for r in s["monitors"].get("rules", [])}),
        "collapse": {
            "gold_falls": any(falls.get(g, False) for g in learned),
            "monitors_fired_late": fired_late,
            "collapsed": any(falls.get(g, False) for g in learned) or bool(fired_late),
        },
    }
