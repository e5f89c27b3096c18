"""What an RL run's records say (rewardsmith.rl.summary, what experiments/rl.py's arm_summary and `rewardsmith rl`'s
metrics.json carry): the gold's change paired over prompts, the reward-wait share and the collapse facts of
rl/claims.py, on constructed points and steps whose answers are known."""

from __future__ import annotations

from typing import Any

import pytest

from rewardsmith.rl.summary import gold_change, reward_wait_share, run_summary

LEARNED = "runs/bon/gold/model"


def _point(step: int, learned: list[float | None], ifeval: list[float], kl: float = 0.0) -> dict[str, Any]:
    return {
        "step": step,
        "kl": {"estimate": kl, "low": kl, "high": kl},
        "per_prompt": {"golds": {LEARNED: learned, "ifeval": ifeval}},
    }


def _step(
    step: int, firing: tuple[str, ...] = (), reward_s: float | None = 0.5, step_s: float = 10.0
) -> dict[str, Any]:
    return {
        "step": step,
        "reward_seconds": reward_s,
        "logs": {"step_time": step_s},
        "monitors": {"firing": list(firing), "rules": ["brevity", "length"]},
    }


def test_gold_change_is_the_last_point_minus_the_first_paired_over_prompts() -> None:
    points = [_point(0, [0.1, 0.2, None, 0.4], [0.5] * 4), _point(10, [0.0, 0.5, 0.9, 0.1], [0.5] * 4)]
    change = gold_change(points, LEARNED, n_boot=200)
    # Per prompt: -0.1, +0.3, (no value before: left out), -0.3; the mean of the three.
    assert change["estimate"] == pytest.approx((-0.1 + 0.3 - 0.3) / 3) and change["n"] == 3
    assert change["low"] <= change["estimate"] <= change["high"]
    # Every prompt moving by the same amount leaves no interval around it.
    same = gold_change([_point(0, [0.1, 0.2], [0.0] * 2), _point(5, [0.3, 0.4], [0.0] * 2)], LEARNED, n_boot=50)
    assert (same["estimate"], same["low"], same["high"]) == pytest.approx((0.2, 0.2, 0.2))


def test_reward_wait_share_is_the_reward_seconds_over_each_steps_seconds() -> None:
    steps = [
        _step(1, reward_s=0.2, step_s=20.0),
        _step(2, reward_s=0.6, step_s=20.0),
        _step(3, reward_s=1.0, step_s=10.0),
    ]
    # A step without its reward time, or without a step time, is not counted.
    steps += [_step(4, reward_s=None), _step(5, step_s=0.0)]
    share = reward_wait_share(steps)
    assert share == pytest.approx({"median": 0.03, "max": 0.1, "steps": 3})  # shares 0.01, 0.03, 0.1
    assert reward_wait_share([]) == {"median": None, "max": None, "steps": 0}


def test_a_falling_learned_gold_or_a_late_collapse_monitor_is_a_collapse() -> None:
    rising = [_point(0, [0.0, 0.1, 0.2], [0.5] * 3), _point(9, [0.5, 0.6, 0.8], [0.5] * 3, kl=1.3)]
    falling = [_point(0, [0.5, 0.6, 0.8], [0.5] * 3), _point(9, [0.0, 0.1, 0.2], [0.5] * 3, kl=2.0)]
    quiet = [_step(k) for k in range(1, 10)]
    calm = run_summary(rising, quiet, [LEARNED, "ifeval"], n_boot=100)
    assert calm["points"] == 2 and calm["kl_end"]["estimate"] == 1.3
    assert calm["collapse"] == {"gold_falls": False, "monitors_fired_late": [], "collapsed": False}
    fell = run_summary(falling, quiet, [LEARNED, "ifeval"], n_boot=100)
    assert fell["gold_change"][LEARNED]["high"] < 0 and fell["collapse"]["gold_falls"] and fell["collapse"]["collapsed"]
    # A verifiable gold falling is no collapse: only a learned gold counts.
    ifeval_falls = [_point(0, [0.1, 0.2, 0.3], [0.9, 0.8, 0.9]), _point(9, [0.1, 0.2, 0.3], [0.1, 0.2, 0.0])]
    assert not run_summary(ifeval_falls, quiet, [LEARNED, "ifeval"], n_boot=100)["collapse"]["collapsed"]
    # Monitors: of 9 steps the last third is steps 7-9; only the collapse rules count there.
    early = [_step(k, ("collapse",) if k == 6 else ()) for k in range(1, 10)]
    late = [_step(k, ("repetition",) if k == 7 else ()) for k in range(1, 10)]
    other = [_step(k, ("length",) if k == 9 else ()) for k in range(1, 10)]
    summaries = {
        name: run_summary(rising, s, [LEARNED], n_boot=50)
        for name, s in (("early", early), ("late", late), ("other", other))
    }
    assert not summaries["early"]["collapse"]["collapsed"] and summaries["early"]["monitors_fired"] == ["collapse"]
    assert summaries["late"]["collapse"] == {
        "gold_falls": False,
        "monitors_fired_late": ["repetition"],
        "collapsed": True,
    }
    assert not summaries["other"]["collapse"]["collapsed"] and summaries["other"]["monitors_fired"] == ["length"]
    assert summaries["other"]["monitor_rules"] == ["brevity", "length"]  # what the server watched, as it said


def test_a_run_with_one_point_has_no_change() -> None:
    summary = run_summary([_point(0, [0.1], [0.5])], [], [LEARNED], n_boot=10)
    assert summary["gold_change"] == {} and not summary["collapse"]["collapsed"]
    assert run_summary([], [], [LEARNED]) == {"points": 0}
