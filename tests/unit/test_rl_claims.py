"""The RL probes' verdicts (rl/claim_results.py) follow their CIs and the conditions declared in rl/claims.py: the
calibration probe is "not run" unless the uncalibrated arm reached the declared KL, whatever its CI says."""

from __future__ import annotations

from typing import Any

from rewardsmith.rl.claim_results import rl_claim_results

GOLDS = ["ifeval", "runs/bon/gold/model"]


def _ci(estimate: float, low: float, high: float) -> dict[str, float]:
    return {"estimate": estimate, "low": low, "high": high}


def _arm(kl: float, collapsed: bool = False) -> dict[str, Any]:
    return {
        "kl_end": _ci(kl, kl - 0.1, kl + 0.1),
        "gold_change": {"ifeval": _ci(0.1, 0.02, 0.2), "runs/bon/gold/model": _ci(-0.1, -0.3, 0.1)},
        "collapse": {"gold_falls": collapsed, "monitors_fired": [], "collapsed": collapsed},
        "facts": {"seconds": 60.0},
        "points": [{"step": 0}, {"step": 20}],
    }


def _results(uncalibrated_kl: float) -> dict[str, Any]:
    return {
        "golds": GOLDS,
        "arms": {
            "helpful": _arm(0.5),
            "icrm": _arm(0.4),
            "bt": _arm(0.6),
            "uncalibrated": _arm(uncalibrated_kl, collapsed=True),
            "calibrated": _arm(0.8),
        },
        "paired": {
            "icrm - bt": {"ifeval": _ci(-0.1, -0.2, -0.01), "runs/bon/gold/model": _ci(0.2, 0.1, 0.3)},
            "calibrated - uncalibrated": {"ifeval": _ci(0.0, -0.1, 0.1), "runs/bon/gold/model": _ci(0.3, 0.1, 0.5)},
        },
    }


def test_verdicts_follow_the_cis() -> None:
    rows = {(r.claim.key, r.scope): r for r in rl_claim_results(_results(uncalibrated_kl=1.4))}
    assert rows[("rl.a", "helpful proxy: ifeval")].verdict == "held"
    assert rows[("rl.a", "helpful proxy: learned gold")].verdict == "inconclusive"
    assert rows[("rl.b", "ifeval")].verdict == "not held"
    assert rows[("rl.b", "learned gold")].verdict == "held"
    assert rows[("rl.c", "learned gold")].verdict == "held"
    assert rows[("rl.c", "ifeval")].verdict == "inconclusive"
    assert "uncalibrated: KL 1.40, collapsed (gold fell)" in rows[("rl.c", "learned gold")].evidence
    assert rows[("rl.d", "")].verdict == "held" and "test_rl.py::" in rows[("rl.d", "")].evidence


def test_the_calibration_probe_is_not_run_below_the_declared_kl() -> None:
    rows = {(r.claim.key, r.scope): r for r in rl_claim_results(_results(uncalibrated_kl=0.3))}
    row = rows[("rl.c", "learned gold")]
    assert row.verdict == "not run" and row.estimate is None
    assert "did not reach KL 1" in row.evidence


def test_arms_not_run_say_so() -> None:
    d = _results(uncalibrated_kl=1.4)
    d["arms"] = {"helpful": d["arms"]["helpful"]}
    d["paired"] = {}
    rows = {(r.claim.key, r.scope): r for r in rl_claim_results(d)}
    assert rows[("rl.b", "learned gold")].verdict == "not run"
    assert rows[("rl.c", "learned gold")].verdict == "not run"


def test_an_arm_that_stopped_before_its_budget_leaves_its_probe_not_run() -> None:
    d = _results(uncalibrated_kl=1.4)
    d["arms"]["calibrated"]["facts"] = {"seconds": None, "stopped": {"after_step": 20, "error": "422 empty response"}}
    d["arms"]["calibrated"]["points"] = [{"step": 0}, {"step": 10}]
    rows = {(r.claim.key, r.scope): r for r in rl_claim_results(d)}
    row = rows[("rl.c", "learned gold")]
    assert row.verdict == "not run" and row.estimate is None  # the paired CI in the file is not read
    assert "stopped after step 20 (422 empty response)" in row.evidence and "last point is step 10" in row.evidence


def _probe_arms(slopes: list[float], scale_rewards: str = "none") -> dict[str, Any]:
    """The calibration probe's arms on 4 held-out prompts: the calibrated arm's proxy before training is
    slopes[k] * r_k - 49 on prompt k (one slope for all: one affine map), the same beta in both arms."""
    d = _results(uncalibrated_kl=2.8)
    raw = [-0.2, -0.1, 0.05, 0.3]
    settings = {"beta": 0.04, "scale_rewards": scale_rewards}
    calibrated = [a * r - 49.0 for a, r in zip(slopes, raw, strict=True)]
    for name, values in (("uncalibrated", raw), ("calibrated", calibrated)):
        d["arms"][name]["points"] = [{"step": 0, "per_prompt": {"proxy": values}}, {"step": 20}]
        d["arms"][name]["facts"] = {"seconds": 60.0, "settings": settings}
    return d


def test_one_positive_affine_map_with_unstandardised_advantages_only_rescales_the_kl() -> None:
    rows = {(r.claim.key, r.scope): r for r in rl_claim_results(_probe_arms([5.9] * 4))}
    row = rows[("rl.c", "learned gold")]
    # Not a test of calibration whatever its CI says (the paired CI in the file lies above 0): shown, not judged.
    assert row.verdict == "not run" and (row.estimate, row.ci) == (0.3, (0.1, 0.5))
    assert "the calibrated reward is 5.90 r - 49.00" in row.evidence
    assert "KL coefficient 0.04 / 5.90 = 0.0068" in row.evidence
    assert "uncalibrated: KL 2.80" in row.evidence


def test_one_positive_affine_map_under_standardised_advantages_cannot_test_calibration() -> None:
    rows = {(r.claim.key, r.scope): r for r in rl_claim_results(_probe_arms([5.9] * 4, scale_rewards="group"))}
    row = rows[("rl.c", "learned gold")]
    assert row.verdict == "not run" and "group-standardised advantages undo (rl.d)" in row.evidence


def test_prompts_on_different_raters_maps_are_judged() -> None:
    """A prompt-dependent map (each prompt rated by another rater) is no global rescaling: the probe is judged."""
    rows = {(r.claim.key, r.scope): r for r in rl_claim_results(_probe_arms([5.9, 2.0, 7.5, 4.0]))}
    assert rows[("rl.c", "learned gold")].verdict == "held"


def test_the_invariance_says_what_it_is_exact_up_to() -> None:
    [row] = [r for r in rl_claim_results(_results(uncalibrated_kl=1.4)) if r.claim.key == "rl.d"]
    assert row.evidence.startswith("exact up to TRL's std + 1e-4 term and Adam's epsilon, ")
    assert row.claim.bar_text() == "exact property (up to TRL's std + 1e-4 term and Adam's epsilon)"
