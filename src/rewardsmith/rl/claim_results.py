"""The results of rl/claims.py from the committed docs/results/rl.json (experiments/rl.py summarise): built here,
rendered by tools/blocks_rl.py; no verdict is made anywhere else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rewardsmith.claims import NOT_RUN, ClaimResult, exact_result, not_run, record_result
from rewardsmith.rl.claims import (
    CALIBRATED_STABLE,
    CALIBRATION_INVARIANT,
    GOLD_RISES,
    ICRM_RESISTS,
    KL_REACHED,
)

# A calibrated reward counts as one affine map of the uncalibrated one when the line through their values before
# training misses no prompt by more than this share of the calibrated values' spread (float32 rewards: ~1e-7).
AFFINE_TOLERANCE = 1e-5

INVARIANCE_TEST = "tests/integration/test_rl.py::test_positive_maps_train_the_same_policy"


def gold_label(gold: str) -> str:
    """A gold as a reader knows it: the verifiable ones by name, a reward model as the learned gold."""
    return gold if gold in ("ifeval", "math") else "learned gold"


def _interval(claim: Any, entry: Mapping[str, Any] | None, scope: str, evidence: str = "") -> ClaimResult:
    return record_result(claim, entry, scope=scope, evidence=evidence, unit="prompts")


def _kl(arm: Mapping[str, Any]) -> float | None:
    value = arm["kl_end"]["estimate"]
    return None if value is None else float(value)


def _collapse_text(name: str, arm: Mapping[str, Any]) -> str:
    c = arm["collapse"]
    why = []
    if c["gold_falls"]:
        why.append("gold fell")
    if c["monitors_fired"]:
        why.append("monitors fired: " + ", ".join(c["monitors_fired"]))
    kl = _kl(arm)
    reached = "n/a" if kl is None else f"{kl:.2f}"
    return f"{name}: KL {reached}, {'collapsed (' + '; '.join(why) + ')' if c['collapsed'] else 'no collapse'}"


def _stopped(arms: Mapping[str, Any], names: tuple[str, str]) -> str | None:
    """Why a probe's arms cannot be compared at the budget's end: the first of them that stopped short (None: none)."""
    for name in names:
        if name in arms and "stopped" in arms[name]["facts"]:
            stop, last = arms[name]["facts"]["stopped"], arms[name]["points"][-1]["step"]
            return (
                f"the {name} arm stopped after step {stop['after_step']} ({stop['error'] or 'no error logged'}), so "
                f"its last point is step {last}, not the budget's end"
            )
    return None


def affine_map(calibrated: Mapping[str, Any], uncalibrated: Mapping[str, Any]) -> dict[str, float] | None:
    """The calibrated arm's reward as an affine map of the uncalibrated arm's: slope, intercept and the largest
    residual (in the calibrated reward's unit) of the least-squares line through the two arms' per-prompt proxy
    values at step 0, where both sampled the same start policy with the same seeds (the same texts). None without
    two finite pairs of values, without spread, or without per-prompt values."""
    first_c, first_u = calibrated["points"][0], uncalibrated["points"][0]
    values_c = first_c.get("per_prompt", {}).get("proxy")
    values_u = first_u.get("per_prompt", {}).get("proxy")
    if first_c.get("step") != 0 or first_u.get("step") != 0 or not values_c or len(values_c) != len(values_u or []):
        return None
    c = np.array([np.nan if v is None else v for v in values_c], dtype=np.float64)
    u = np.array([np.nan if v is None else v for v in values_u], dtype=np.float64)
    keep = np.isfinite(c) & np.isfinite(u)
    if keep.sum() < 2 or np.ptp(u[keep]) == 0.0:
        return None
    slope, intercept = np.polyfit(u[keep], c[keep], 1)
    residual = float(np.abs(c[keep] - (slope * u[keep] + intercept)).max())
    return {
        "slope": float(slope),
        "intercept": float(intercept),
        "residual": residual,
        "spread": float(np.ptp(c[keep])),
    }


def calibration_not_tested(arms: Mapping[str, Any]) -> str | None:
    """Why the calibration probe, in the form its arms ran, cannot test calibration (None where it can): the
    calibrated reward is one affine map a r + b (a > 0) of the uncalibrated reward r for every prompt (affine_map).
    Under group-standardised advantages such a map trains the same policy (CALIBRATION_INVARIANT); with unstandardised
    ones (scale_rewards "none") it scales the advantages by a, and Adam, blind to a gradient's scale, then trains
    the uncalibrated arm's policy at KL coefficient beta / a: the arms differ in their KL strength only."""
    found = affine_map(arms["calibrated"], arms["uncalibrated"])
    if found is None or found["residual"] > AFFINE_TOLERANCE * max(found["spread"], 1e-12) or found["slope"] <= 0:
        return None
    a, b = found["slope"], found["intercept"]
    s_cal, s_unc = arms["calibrated"]["facts"]["settings"], arms["uncalibrated"]["facts"]["settings"]
    scale = (s_cal.get("scale_rewards", "group"), s_unc.get("scale_rewards", "group"))
    the_map = (
        f"the calibrated reward is {a:.2f} r {'-' if b < 0 else '+'} {abs(b):.2f}, r the uncalibrated reward (fitted "
        f"on the held-out prompts before training; largest residual {found['residual']:.1e}), one positive-slope "
        "affine map for every prompt"
    )
    if scale == ("none", "none") and s_cal["beta"] == s_unc["beta"]:
        beta = float(s_cal["beta"])
        return (
            f"compares KL strengths, not calibration: {the_map}; with unstandardised advantages (scale_rewards "
            f"'none') and Adam the calibrated arm is the uncalibrated arm at KL coefficient {beta:g} / {a:.2f} = "
            f"{beta / a:.4f} (up to Adam's epsilon and gradient clipping), so its larger drift is what a weaker KL "
            "term gives and says nothing about calibration"
        )
    if scale == ("group", "group"):
        return f"cannot test calibration: {the_map}, which group-standardised advantages undo (rl.d)"
    return None


def rl_claim_results(d: Mapping[str, Any]) -> list[ClaimResult]:
    """Every claim of rl/claims.py on every arm and gold it applies to."""
    arms, paired, golds = d["arms"], d["paired"], d["golds"]
    out: list[ClaimResult] = []
    for gold in golds:
        entry = arms["helpful"]["gold_change"][gold] if "helpful" in arms else None
        out.append(_interval(GOLD_RISES, entry, f"helpful proxy: {gold_label(gold)}"))
    for gold in golds:
        entry = paired.get("icrm - bt", {}).get(gold)
        stopped = _stopped(arms, ("icrm", "bt"))
        if stopped:
            out.append(not_run(ICRM_RESISTS, stopped, scope=gold_label(gold)))
            continue
        out.append(_interval(ICRM_RESISTS, entry, gold_label(gold)))
    for gold in golds:
        scope = gold_label(gold)
        if "calibrated" not in arms or "uncalibrated" not in arms:
            out.append(not_run(CALIBRATED_STABLE, "the probe's arms were not run", scope=scope))
            continue
        facts = "; ".join(_collapse_text(n, arms[n]) for n in ("uncalibrated", "calibrated"))
        stopped = _stopped(arms, ("uncalibrated", "calibrated"))
        if stopped:
            out.append(not_run(CALIBRATED_STABLE, f"{stopped} ({facts})", scope=scope))
            continue
        kl = _kl(arms["uncalibrated"])
        if kl is None or kl < KL_REACHED:
            out.append(
                not_run(
                    CALIBRATED_STABLE,
                    f"the uncalibrated arm did not reach KL {KL_REACHED:g} in the budget ({facts})",
                    scope=scope,
                )
            )
            continue
        result = _interval(CALIBRATED_STABLE, paired["calibrated - uncalibrated"][gold], scope, facts)
        untested = calibration_not_tested(arms)
        if untested and result.verdict != NOT_RUN:
            # The paired difference is shown, not judged: it measures two KL coefficients, not calibration.
            result = ClaimResult(
                CALIBRATED_STABLE, NOT_RUN, scope, result.estimate, result.ci, evidence=f"{untested} ({facts})"
            )
        out.append(result)
    out.append(exact_result(CALIBRATION_INVARIANT, INVARIANCE_TEST))
    return out
