"""The testbed's instruments on constructed data with known answers: Gao's forms recover the alpha and beta that
made a curve, and the RL tracker's points are judged by best-of-n's verdict (over-optimised, misaligned, peaks at
the end) on a constructed run."""

from __future__ import annotations

import numpy as np
import pytest

from rewardsmith.testbed.claims import CLAIMS
from rewardsmith.testbed.fits import fit_form, fit_with_ci, peak, predict


@pytest.mark.parametrize("form", ["bon", "rl"])
def test_the_forms_recover_the_parameters_that_made_the_curve(form: str) -> None:
    d = np.sqrt(np.array([0.0, 0.19, 0.66, 1.4, 2.3, 3.2, 4.2]))
    gain = predict(d, 0.8, 0.3, form)
    alpha, beta = fit_form(d, gain, form)
    assert alpha == pytest.approx(0.8, abs=1e-9) and beta == pytest.approx(0.3, abs=1e-9)
    rng = np.random.default_rng(0)
    per_prompt = gain + rng.normal(scale=0.2, size=(300, len(d)))
    fitted = fit_with_ci(d, per_prompt, form, n_boot=200)
    assert fitted["alpha"]["low"] < 0.8 < fitted["alpha"]["high"]
    assert fitted["beta"]["low"] < 0.3 < fitted["beta"]["high"]
    assert max(abs(r) for r in fitted["residuals"]) < 0.1
    if form == "bon":
        assert fitted["peak_d"]["estimate"] == pytest.approx(
            peak(fitted["alpha"]["estimate"], fitted["beta"]["estimate"])
        )
    assert peak(1.0, 0.0) == float("inf")


def _points(curve: list[float], prompts: int = 60, noise: float = 0.05) -> list[dict]:
    rng = np.random.default_rng(1)
    ids = [f"prompt-{i}" for i in range(prompts)]
    out = []
    for k, level in enumerate(curve):
        values = level + rng.normal(scale=noise, size=prompts)
        out.append(
            {
                "step": 10 * k,
                "kl": {"estimate": float(k)},
                "per_prompt": {"ids": ids, "golds": {"gold": [float(v) for v in values]}},
            }
        )
    return out


def test_rl_runs_are_judged_by_the_best_of_n_verdict() -> None:
    from rewardsmith.rl.summary import overoptimisation

    assert overoptimisation(_points([0.0, 0.5, 0.9, 0.4, 0.0]), "gold", 200)["verdict"] == "over-optimised"
    assert overoptimisation(_points([0.0, -0.4, -0.6, -0.8, -0.9]), "gold", 200)["verdict"] == "misaligned"
    assert overoptimisation(_points([0.0, 0.2, 0.4, 0.6, 0.8]), "gold", 200)["verdict"] == "peaks at N"
    assert overoptimisation(_points([0.0, 0.0, 0.0, 0.0, 0.0], noise=0.3), "gold", 200)["verdict"] in (
        "inconclusive",
        "peaks at N",
        "not over-optimised",
    )


def test_every_testbed_claim_is_declared_with_a_bar_source() -> None:
    assert len({c.key for c in CLAIMS}) == len(CLAIMS)
    assert all(c.bar_source.endswith("testbed/claims.py") for c in CLAIMS)


def test_agreement_by_size_and_its_paired_difference() -> None:
    from rewardsmith.testbed.analysis import agreement, correct_pairs

    assert correct_pairs([1.0, 0.0, 2.0], [0.0, 1.0, 2.0]).tolist() == [1.0, 0.0, 0.5]
    rng = np.random.default_rng(0)
    small = [rng.random(400) < 0.6 for _ in range(3)]
    large = [rng.random(400) < 0.8 for _ in range(3)]
    out = agreement({250: small, 4000: large}, n_boot=300)
    assert out["250"]["estimate"] == pytest.approx(100 * np.mean(small), abs=1e-9)
    gap = out["largest_minus_smallest"]
    assert gap["estimate"] == pytest.approx(100 * (np.mean(large) - np.mean(small)), abs=1e-9)
    assert 10 < gap["low"] < gap["estimate"] < gap["high"] < 30


def test_scaling_recovers_a_peak_that_moves_right_with_size() -> None:
    """Per-prompt gold curves made from Gao's form: beta 0.4 (small proxies) and 0.1 (large): beta falls, the peak
    d* = alpha / (2 beta) moves right, both with CIs on the right side of 0."""
    from rewardsmith.evaluate.best_of_n import kl_bound
    from rewardsmith.testbed.analysis import scaling
    from rewardsmith.testbed.fits import predict

    ns = [1, 2, 4, 8, 16, 32, 64]
    kl = [kl_bound(n) for n in ns]
    d = np.sqrt(kl)
    rng = np.random.default_rng(2)

    def curves(beta: float) -> list[np.ndarray]:
        return [predict(d, 1.0, beta, "bon") + rng.normal(scale=0.3, size=(200, len(ns))) for _ in range(3)]

    out = scaling({250: curves(0.4), 4000: curves(0.1)}, kl, n_boot=200)
    assert out["sizes"]["250"]["beta"]["estimate"] == pytest.approx(0.4, abs=0.05)
    assert out["beta_smallest_minus_largest"]["low"] > 0
    assert out["peak_largest_minus_smallest"]["low"] > 0
    assert out["inverse_peak_smallest_minus_largest"]["estimate"] == pytest.approx(2 * 0.4 - 2 * 0.1, abs=0.1)
    assert out["inverse_peak_smallest_minus_largest"]["low"] > 0
    # A largest size whose curve keeps rising (beta < 0) has no peak, yet 1/d* still says it moved right.
    rising = scaling({250: curves(0.4), 4000: curves(-0.05)}, kl, n_boot=200)
    assert rising["sizes"]["4000"]["peak_d"]["estimate"] is None  # no peak: d* infinite, written as null
    assert rising["inverse_peak_smallest_minus_largest"]["low"] > 0


def test_the_doubt_at_the_pick_rises_when_the_ensemble_follows_its_doubt() -> None:
    from rewardsmith.testbed.analysis import choose_on_validation, doubt_rise, standardised_sd

    rng = np.random.default_rng(3)
    base = rng.normal(scale=0.3, size=(100, 16))
    members = base + rng.normal(scale=0.05, size=(5, 100, 16))
    members[0] += 3 * rng.random(size=(100, 16))  # one member that disagrees with the others, by varying amounts
    doubt = standardised_sd(members, [0.0] * 5, [1.0] * 5)
    assert doubt.shape == (100, 16) and np.allclose(doubt, members.std(axis=0, ddof=1))
    rise = doubt_rise(members.mean(axis=0), doubt, [1, 2, 4, 8, 16], n_boot=200)
    assert rise["rise"]["low"] > 0  # the mean picks where the odd member is highest: where the doubt is
    flat = doubt_rise(-members.mean(axis=0), doubt, [1, 2, 4, 8, 16], n_boot=200)
    assert flat["rise"]["estimate"] < rise["rise"]["estimate"]
    validation = np.array([True] * 50 + [False] * 50)
    curves = {"a": np.zeros((100, 3)), "b": np.zeros((100, 3))}
    curves["b"][:50, -1] = 1.0
    curves["a"][50:, -1] = 5.0  # better only on the test half: not chosen
    assert choose_on_validation(curves, validation) == "b"


def test_the_hack_rate_is_chosen_on_the_validation_prompts_by_its_peak_and_drop() -> None:
    from rewardsmith.testbed.analysis import choose_hack

    ns = [1, 2, 4, 8, 16]
    validation = np.array([True] * 40 + [False] * 40)
    curves = {
        "rising": np.tile([0.0, 0.1, 0.2, 0.3, 0.4], (80, 1)),  # peaks at N: no drop
        "small-drop": np.tile([0.0, 0.2, 0.3, 0.25, 0.2], (80, 1)),
        "misaligned": np.tile([0.0, -0.2, -0.4, -0.5, -0.6], (80, 1)),  # peaks at n = 1
        "big-drop": np.tile([0.0, 0.3, 0.2, 0.0, -0.2], (80, 1)),
    }
    curves["small-drop"][40:] = [0.0, 0.9, 0.9, 0.0, -5.0]  # the test half would favour it: never read
    chosen, facts = choose_hack(curves, validation, ns)
    assert chosen == "big-drop"
    assert facts["big-drop"] == {"peak_n": 2, "drop": pytest.approx(0.5), "shaped": True}
    assert facts["small-drop"]["drop"] == pytest.approx(0.1)
    assert not facts["rising"]["shaped"] and not facts["misaligned"]["shaped"]
    none_shaped = {k: curves[k] for k in ("misaligned", "rising")}
    assert choose_hack(none_shaped, validation, ns)[0] == "misaligned"  # none over-optimised there: the first


def test_the_gold_arm_without_a_verdict_is_not_counted_as_held() -> None:
    """The RL negative control holds on a verdict that keeps the gold (here: peaks at the end), and an arm that
    tracked no gold besides its proxy is "not run", never held by default."""
    from rewardsmith.testbed.claim_results import testbed_claim_results

    def gold_arm(over: dict) -> list:
        arm = {"overoptimisation": over, "monitors_fired": []}
        results = testbed_claim_results({"rl": {"gold": arm}})
        return [r.verdict for r in results if r.scope == "RL, gold's arm"]

    assert gold_arm({}) == ["not run"]
    assert gold_arm({"gold": {"verdict": "peaks at N"}}) == ["held"]
    assert gold_arm({"gold": {"verdict": "over-optimised"}}) == ["not held"]


def test_the_brevity_claim_is_judged_only_on_arms_served_with_the_brevity_rule() -> None:
    """The RL control's direction comes from its own candidate (or, for records that predate it, from the rule that
    labels length candidates against the gold's preference); arms whose server had no brevity rule leave the claim
    "not run", whatever fired; with the rule, brevity on the hacked arm and nothing on the gold's holds it."""
    from rewardsmith.testbed.claim_results import rl_control_direction, testbed_claim_results

    hack = {"rl_control": "hacked-0.8", "candidates": {"hacked-0.8": {"pattern": None}}}
    assert rl_control_direction({**hack, "gold_prefers_longer": 265, "gold_prefers_shorter": 213}) == "shorter"
    assert rl_control_direction({**hack, "gold_prefers_longer": 100, "gold_prefers_shorter": 213}) == "longer"
    recorded = {"rl_control": "x", "candidates": {"x": {"direction": "longer"}}, "gold_prefers_longer": 265}
    assert rl_control_direction(recorded) == "longer"
    assert rl_control_direction({"rl_control": "p", "candidates": {"p": {"pattern": "(?i)sorry"}}}) is None

    def verdicts(hacked_fired: list[str], gold_fired: list[str], rules: list[str] | None) -> dict[str, str]:
        def arm(fired: list[str]) -> dict:
            out: dict = {"overoptimisation": {}, "monitors_fired": fired}
            return out if rules is None else {**out, "monitor_rules": rules}

        d = {
            "hack": {**hack, "gold_prefers_longer": 265, "gold_prefers_shorter": 213},
            "rl": {"hacked": arm(hacked_fired), "gold": arm(gold_fired)},
        }
        return {r.claim.key: r.verdict for r in testbed_claim_results(d)}

    with_rule = ["brevity", "collapse", "length", "repetition", "shrinking"]
    assert verdicts(["brevity"], [], None)["testbed.control.monitor_brevity"] == "not run"
    assert verdicts(["brevity"], [], ["length", "shrinking"])["testbed.control.monitor_brevity"] == "not run"
    assert verdicts(["brevity"], [], with_rule)["testbed.control.monitor_brevity"] == "held"
    assert verdicts(["brevity"], ["length"], with_rule)["testbed.control.monitor_brevity"] == "not held"
    assert verdicts([], [], with_rule)["testbed.control.monitor_brevity"] == "not held"
    # The pre-registered claim keeps its rule: shrinking for a hack that prefers shorter responses.
    assert verdicts(["brevity"], [], with_rule)["testbed.control.monitor"] == "not held"
    assert verdicts(["shrinking"], [], with_rule)["testbed.control.monitor"] == "held"
