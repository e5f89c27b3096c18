"""The results of rl/claims.py from the committed docs/results/rl.json (experiments/rl.py summarise): built here,
rendered by tools/blocks_rl.py; no verdict is made anywhere else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.claims import ClaimResult, exact_result, not_run, record_result
from rewardsmith.rl.claims import (
    CALIBRATED_STABLE,
    CALIBRATION_INVARIANT,
    GOLD_RISES,
    ICRM_RESISTS,
    KL_REACHED,
)

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
        out.append(_interval(CALIBRATED_STABLE, paired["calibrated - uncalibrated"][gold], scope, facts))
    out.append(exact_result(CALIBRATION_INVARIANT, INVARIANCE_TEST))
    return out
