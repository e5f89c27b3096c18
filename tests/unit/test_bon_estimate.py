"""Best-of-n estimates: the closed form against brute-force enumeration of every n-subset, invariances, the
oracle, the KL bound, and the verdicts the estimates give on data built to hold or not hold them."""

from __future__ import annotations

from math import log
from typing import Any

import numpy as np
import pytest
from test_bench_metrics import _enumerated_best_of_k as brute_force

from rewardsmith.bon.estimate import LENGTH, ORACLE, best_of_n_estimates, validation_half
from rewardsmith.bon.metrics import NO_HALVES, bon_metrics
from rewardsmith.evaluate.best_of_n import best_of_n_curve, best_of_n_curves, kl_bound, powers_of_two


@pytest.mark.parametrize("seed", range(20))
def test_closed_form_equals_enumeration_over_all_subsets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(2, 9))
    selector = rng.integers(0, 4, size).astype(float).tolist()  # small integers: ties at the top are common
    values = rng.normal(size=size).tolist()
    ns = list(range(1, size + 1))
    expected = [brute_force(selector, values, n) for n in ns]  # every n-subset enumerated
    np.testing.assert_allclose(best_of_n_curve(selector, values, ns), expected, rtol=0, atol=1e-12)


def test_invariant_to_the_order_of_samples_and_the_oracle_reaches_the_maximum() -> None:
    rng = np.random.default_rng(0)
    selector, values = rng.normal(size=(5, 16)), rng.normal(size=(5, 16))
    ns = powers_of_two(16)
    curves = best_of_n_curves(selector, values, ns)
    perm = rng.permutation(16)
    np.testing.assert_allclose(best_of_n_curves(selector[:, perm], values[:, perm], ns), curves, atol=1e-12)
    # n = 1 is random choice: the mean of a prompt's samples, whatever the selector.
    np.testing.assert_allclose(curves[:, 0], values.mean(axis=1), atol=1e-12)
    # The gold choosing for itself: at n = N the per-prompt maximum.
    np.testing.assert_allclose(best_of_n_curves(values, values, ns)[:, -1], values.max(axis=1), atol=1e-12)


def test_kl_bound_and_the_n_grid() -> None:
    assert kl_bound(1) == 0.0
    assert kl_bound(16) == pytest.approx(log(16) - 15 / 16)
    assert powers_of_two(16) == [1, 2, 4, 8, 16] and powers_of_two(12) == [1, 2, 4, 8, 12]
    with pytest.raises(ValueError, match="n must lie"):
        best_of_n_curve([1.0, 2.0], [0.0, 1.0], [3])


def _prompt_ids(p: int) -> list[str]:
    return [f"prompt-{k}" for k in range(p)]


def _metrics(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """metrics.json's figures and verdicts of best_of_n_estimates(*args, **kwargs)."""
    return bon_metrics(best_of_n_estimates(*args, **kwargs))


def test_a_proxy_that_tracks_the_gold_raises_it_and_one_that_rewards_length_over_optimises() -> None:
    """Gold rises with quality; the hacked proxy loves length, and the longest samples are the worst ones (so the
    gold of its best-of-n falls as n grows); the honest proxy is the gold plus a little noise."""
    rng = np.random.default_rng(1)
    p, n = 200, 16
    quality = rng.normal(size=(p, n))
    gold = quality.copy()
    length = 100 + 20 * rng.normal(size=(p, n))
    length[np.arange(p), quality.argmin(axis=1)] = 400  # the worst sample is by far the longest
    honest = gold + 0.3 * rng.normal(size=(p, n))
    hacked = 0.02 * length + 0.5 * quality
    out = _metrics(_prompt_ids(p), {"honest": honest, "hacked": hacked}, {"g": gold}, length, n_boot=300)
    block = out["golds"]["g"]["selectors"]
    assert out["ns"] == [1, 2, 4, 8, 16] and out["kl_bound"][-1] == pytest.approx(kl_bound(16))
    assert block["honest"]["gain_over_random"]["verdict"] == "held"
    assert block["honest"]["overoptimisation"]["verdict"] in ("peaks at N", "not over-optimised", "inconclusive")
    assert block["hacked"]["overoptimisation"]["verdict"] == "over-optimised"
    assert block["hacked"]["overoptimisation"]["peak_n"] < 16
    assert block["honest"]["rank_correlation"]["estimate"] > 0.8
    # The length selector picks the 400-character sample, the worst: it lowers the gold below random choice.
    assert block[LENGTH]["gain_over_random"]["verdict"] == "not held"
    assert block[LENGTH]["length_at_n"][-1]["estimate"] == pytest.approx(400.0)
    oracle = block[ORACLE]["gold_at_n"]
    assert oracle[-1]["estimate"] == pytest.approx(gold.max(axis=1).mean())
    # Paired difference honest - hacked at N: clearly positive.
    pair = out["golds"]["g"]["paired"][0]
    assert (pair["a"], pair["b"]) == ("honest", "hacked") and pair["gold_diff_at_n"][-1]["verdict"] == "held"
    assert pair["gold_diff_at_n"][0]["estimate"] == pytest.approx(0.0)  # n = 1: both choose at random
    assert pair["drop_diff"]["verdict"] == "held"  # the honest proxy loses less after its peak than the hacked one


def test_a_selector_unrelated_to_the_gold_is_inconclusive_and_the_peak_is_chosen_off_the_test_half() -> None:
    rng = np.random.default_rng(2)
    p, n = 120, 8
    gold, noise, length = rng.normal(size=(p, n)), rng.normal(size=(p, n)), 50 + rng.normal(size=(p, n))
    out = _metrics(_prompt_ids(p), {"noise": noise}, {"g": gold}, length, n_boot=300)
    entry = out["golds"]["g"]["selectors"]["noise"]
    assert entry["gain_over_random"]["verdict"] == "inconclusive"
    validation = validation_half(_prompt_ids(p))
    assert 0.3 < validation.mean() < 0.7 and out["validation_prompts"] == int(validation.sum())
    assert entry["overoptimisation"]["test_prompts"] == int((~validation).sum())


def test_prompts_the_gold_cannot_score_are_left_out_for_that_gold() -> None:
    rng = np.random.default_rng(3)
    gold = rng.normal(size=(10, 4))
    gold[3, 1] = np.nan
    out = _metrics(_prompt_ids(10), {"a": rng.normal(size=(10, 4))}, {"g": gold}, np.ones((10, 4)), n_boot=50)
    assert out["golds"]["g"]["prompts"] == 9 and out["golds"]["g"]["dropped_prompts"] == 1


def test_claim_results_follow_the_estimates() -> None:
    """bon/claim_results.py on estimates built to hold its claims: an honest proxy raises the gold, a hacked one
    over-optimises; the in-context model (here: the honest one) loses less after its peak than the BT baseline (the
    hacked one); the students' accuracy difference and gold difference share their sign."""
    from rewardsmith.bon.claim_results import bon_claim_results

    rng = np.random.default_rng(5)
    p, n = 200, 16
    quality = rng.normal(size=(p, n))
    length = 100 + 20 * rng.normal(size=(p, n))
    length[np.arange(p), quality.argmin(axis=1)] = 400
    honest = quality + 0.3 * rng.normal(size=(p, n))
    hacked = 0.02 * length + 0.5 * quality
    d = _metrics(_prompt_ids(p), {"A": honest, "B": hacked}, {"g": quality}, length, n_boot=300)
    d["proxy_labels"] = {"w2s-anchor": "A", "w2s-naive": "B", "icrm+demos": "A", "bt-baseline": "B"}
    d["students"] = {"source": "x", "anchor_minus_naive_id": {"estimate": 2.0, "ci": [0.5, 3.5]}}
    results = {(r.claim.key, r.scope): r for r in bon_claim_results(d)}
    # Rows name each proxy by the experiment's name for it (the last name given a label here).
    assert results[("bon.a", "g: icrm+demos")].verdict == "held"
    assert results[("bon.b", "g: bt-baseline")].verdict == "held"  # over-optimised: its CI lies below 0
    assert results[("bon.c", "g")].verdict == "held" and results[("bon.c", "g")].estimate > 0
    assert results[("bon.d", "g")].verdict == "held"
    d["students"]["anchor_minus_naive_id"] = {"estimate": -2.0, "ci": [-3.5, -0.5]}
    assert {r.claim.key: r.verdict for r in bon_claim_results(d) if r.scope == "g"}["bon.c"] == "not held"


def test_too_few_prompts_give_no_verdict() -> None:
    """Six prompts, a proxy that is the gold itself: gold@N lies above gold@1 on every prompt and the interval
    excludes 0, yet six prompts are too few to judge by a percentile interval: no held, no over-optimised."""
    rng = np.random.default_rng(4)
    gold = rng.normal(size=(6, 8))
    estimates = best_of_n_estimates(_prompt_ids(6), {"same": gold}, {"g": gold}, np.ones((6, 8)), n_boot=200)
    gain = estimates.golds["g"].selectors["same"].gain_over_random
    assert gain.low > 0 and gain.n == 6
    block = bon_metrics(estimates)["golds"]["g"]["selectors"]["same"]
    assert block["gain_over_random"]["verdict"] == "too few prompts"
    assert block["gain_over_random"]["n"] == 6
    assert block["overoptimisation"]["verdict"] in ("too few prompts", "peaks at N", NO_HALVES)


def _control_run(p: int = 300, n: int = 64) -> dict:
    """A constructed testbed: gold = quality - 0.6 length^2; a proxy hacked on length (quality + 1.5 length) helps at
    small n and hurts at large n; a proxy that is the gold's opposite is wrong from the first choice on."""
    from rewardsmith.bon.metrics import bon_metrics

    rng = np.random.default_rng(0)
    quality = rng.normal(size=(p, n))
    length = rng.exponential(scale=0.5, size=(p, n))
    gold = quality - 0.6 * length**2
    selectors = {"hacked": quality + 1.5 * length, "wrong": -gold}
    ids = [f"p{i}" for i in range(p)]
    return bon_metrics(best_of_n_estimates(ids, selectors, {"gold": gold}, length * 100, n_boot=200))


def test_the_verdict_tells_over_optimised_from_misaligned_and_from_the_gold_itself() -> None:
    """Positive control: the hacked proxy rises, peaks above n = 1 and falls: over-optimised. The opposite proxy
    falls from n = 2: misaligned, not over-optimised. Negative control: the gold choosing for itself (the oracle)
    never falls: it peaks at N."""
    selectors = _control_run()["golds"]["gold"]["selectors"]
    hacked = selectors["hacked"]["overoptimisation"]
    assert hacked["verdict"] == "over-optimised" and hacked["peak_n"] > 1
    assert hacked["rise"]["low"] > 0 and hacked["drop"]["high"] < 0
    wrong = selectors["wrong"]["overoptimisation"]
    assert wrong["verdict"] == "misaligned" and wrong["first_step"]["high"] < 0
    assert selectors["oracle"]["overoptimisation"]["verdict"] == "peaks at N"


def test_the_peak_is_chosen_on_the_validation_prompts_only() -> None:
    """Changing the test half's curves leaves the chosen peak where it was; changing the validation half moves it."""
    from rewardsmith.bon.estimate import overoptimisation, validation_half

    rng = np.random.default_rng(1)
    ids = [f"q{i}" for i in range(200)]
    validation = validation_half(ids)
    curves = rng.normal(size=(200, 5)) * 0.1 + np.array([0.0, 0.5, 1.0, 0.6, 0.2])
    idx = np.zeros((10, int((~validation).sum())), dtype=np.int64)
    base = overoptimisation(curves, [1, 2, 4, 8, 16], validation, idx).peak_n
    shifted_test = curves.copy()
    shifted_test[~validation] += np.array([0.0, 0.0, 0.0, 0.0, 5.0])  # the test half peaks at 16 now
    assert overoptimisation(shifted_test, [1, 2, 4, 8, 16], validation, idx).peak_n == base == 4
    shifted_validation = curves.copy()
    shifted_validation[validation] += np.array([0.0, 5.0, 0.0, 0.0, 0.0])
    assert overoptimisation(shifted_validation, [1, 2, 4, 8, 16], validation, idx).peak_n == 2
