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
