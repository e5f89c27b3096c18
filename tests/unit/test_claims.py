"""The claim records: verdicts by hand-computed intervals, the sides of a bar, tolerances, majorities, "not run", and
the capability builders on small metrics dicts whose contrasts are known."""

from __future__ import annotations

import numpy as np
import pytest

from rewardsmith.claims import (
    HELD,
    INCONCLUSIVE,
    NOT_HELD,
    NOT_RUN,
    Choice,
    Claim,
    ClaimResult,
    claim_row,
    interval_result,
    majority_result,
    not_run,
    point_only,
    record_result,
    tolerance_result,
)

ABOVE = Claim("P", "k.above", "x beats y", "x - y (points)", 0.0, "here")
BELOW = Claim("P", "k.below", "x is below a constant", "x - c", 0.0, "here", held_when="below")
MARGIN = Claim("P", "k.margin", "x at least as good as y", "x - y", -2.0, "here", bar_note="margin 2")
TOL = Claim("P", "k.tol", "forecast within 0.2", "forecast - realised", 0.2, "here", kind="tolerance")
MOST = Claim("P", "k.most", "on most targets", "count", 0.0, "here", kind="majority")


def test_interval_verdicts_on_either_side_of_the_bar() -> None:
    assert interval_result(ABOVE, 1.0, [0.1, 2.0]).verdict == HELD
    assert interval_result(ABOVE, -1.0, [-2.0, -0.1]).verdict == NOT_HELD
    assert interval_result(ABOVE, 0.5, [-0.1, 1.0]).verdict == INCONCLUSIVE
    # held below: the same intervals read the other way round
    assert interval_result(BELOW, -1.0, [-2.0, -0.1]).verdict == HELD
    assert interval_result(BELOW, 1.0, [0.1, 2.0]).verdict == NOT_HELD
    assert interval_result(BELOW, 0.5, [-0.1, 1.0]).verdict == INCONCLUSIVE
    # a non-inferiority bar: -1.5 [-1.9, -1.1] lies above -2
    assert interval_result(MARGIN, -1.5, [-1.9, -1.1]).verdict == HELD
    assert interval_result(MARGIN, -3.0, [-4.0, -2.1]).verdict == NOT_HELD


def test_an_interval_on_too_few_units_gets_no_verdict() -> None:
    few = interval_result(ABOVE, 1.0, [0.5, 1.5], n=3, unit="prompts")
    assert (few.verdict, few.estimate, few.ci) == ("too few prompts", 1.0, (0.5, 1.5))
    assert interval_result(BELOW, -1.0, [-2.0, -0.1], n=3).verdict == "too few units"
    assert interval_result(ABOVE, 1.0, [0.5, 1.5], n=10).verdict == HELD
    assert "**too few prompts**" in claim_row(few)[-1]
    # The records capabilities commit, either shape, with or without their count of units.
    assert record_result(ABOVE, {"estimate": 1.0, "low": 0.5, "high": 1.5, "n": 4}, unit="pairs").verdict == (
        "too few pairs"
    )
    assert record_result(ABOVE, {"estimate": 1.0, "ci": [0.5, 1.5]}).verdict == HELD
    assert record_result(ABOVE, None, missing="absent").evidence == "absent"
    assert majority_result(MOST, [few, interval_result(ABOVE, 1.0, [0.5, 1.5])]).verdict == INCONCLUSIVE


def test_missing_estimates_are_not_run_and_missing_intervals_inconclusive() -> None:
    assert interval_result(ABOVE, None, None).verdict == NOT_RUN
    assert interval_result(ABOVE, float("nan"), [0.0, 1.0]).verdict == NOT_RUN
    r = interval_result(ABOVE, 3.0, [None, 4.0])
    assert (r.verdict, r.ci, r.estimate) == (INCONCLUSIVE, None, 3.0)
    assert not_run(ABOVE, "needs a GPU").to_dict()["verdict"] == "not run"
    with pytest.raises(ValueError):
        ClaimResult(ABOVE, "maybe")


def test_tolerance_is_judged_on_the_error_ci() -> None:
    assert tolerance_result(TOL, 0.05, [-0.1, 0.2]).verdict == HELD
    assert tolerance_result(TOL, -0.2, [-0.2, 0.0]).verdict == HELD  # the ends count as inside
    miss = tolerance_result(TOL, -2.09, [-4.4, -0.3])
    assert miss.verdict == NOT_HELD and miss.ci == (-4.4, -0.3)
    assert tolerance_result(TOL, 0.5, [0.25, 0.9]).verdict == NOT_HELD
    # A point inside the tolerance with a wide CI decides nothing, nor does a point outside it whose CI reaches in.
    wide = tolerance_result(TOL, 0.1, [-4.8, 4.8])
    assert (wide.verdict, wide.estimate) == (INCONCLUSIVE, 0.1)
    assert tolerance_result(TOL, -2.09, [-4.4, 0.2]).verdict == INCONCLUSIVE
    bare = tolerance_result(TOL, 0.15)
    assert (bare.verdict, bare.evidence) == (INCONCLUSIVE, "no interval")
    assert tolerance_result(TOL, None).verdict == NOT_RUN
    with pytest.raises(ValueError):
        interval_result(TOL, 0.1, [0.0, 0.2])  # a tolerance claim is not judged by an interval


def test_majority_counts_held_targets() -> None:
    held, bad, unsure = (interval_result(ABOVE, v, ci) for v, ci in ((1, [0.5, 2]), (-1, [-2, -0.5]), (0, [-1, 1])))
    assert majority_result(MOST, [held, held, bad]).verdict == HELD  # 2 of 3
    assert majority_result(MOST, [held, bad, unsure]).verdict == INCONCLUSIVE  # 1 held, 1 not held of 3
    assert majority_result(MOST, [bad, bad, held, unsure]).verdict == NOT_HELD  # half not held
    result = majority_result(MOST, [held, unsure, not_run(ABOVE, "x")])
    assert (result.verdict, result.estimate, result.details["of"]) == (INCONCLUSIVE, 1.0, 2)
    assert majority_result(MOST, [not_run(ABOVE, "x")]).verdict == NOT_RUN


def test_row_marks_own_questions_and_few_seeds() -> None:
    own = Claim("P", "own.x", "a question of ours", "m", 8.0, "here", own=True, bar_note="the project's bar")
    row = claim_row(interval_result(own, 9.13, [7.02, 11.29], scope="PluriHarms", seeds=2), 2)
    assert row[0].startswith("project's own: ")
    assert row[4] == "9.13 [7.02, 11.29]"
    assert row[5] == "> 8 (the project's bar)"
    assert row[6] == "**inconclusive** (2 seeds)"
    assert claim_row(interval_result(BELOW, -1.0, [-2.0, -0.5], seeds=3))[5] == "< 0"


def test_a_point_without_its_interval_is_shown_and_not_judged() -> None:
    r = point_only(ABOVE, 1.55, "needs `make it`", scope="t1", seeds=3)
    assert (r.verdict, r.estimate, r.ci) == (NOT_RUN, 1.55, None)
    row = claim_row(r, 2)
    assert row[4] == "1.55 (point; no CI)" and row[6] == "**not run**; needs `make it`"
    assert point_only(ABOVE, None, "x").estimate is None
    assert claim_row(point_only(ABOVE, float("nan"), "x"))[4] == "-"


def test_choice_records_what_was_chosen_on_which_split() -> None:
    c = Choice("P", "c", "the teacher", "a, b", "best on validation", "validation split", "here")
    made = c.made("b", {"validation_accuracy": {"a": 55.0, "b": 58.7}})
    assert made["chosen"] == "b" and made["split"] == "validation split" and made["evidence"]["validation_accuracy"]


# ----------------------------------------------------------------------------------------------------
# The capabilities' builders


def _est(value: float, low: float, high: float) -> dict[str, object]:
    return {"value": value, "ci": [low, high]}


def test_w2s_claims_per_target_and_not_run_without_a_sweep() -> None:
    from rewardsmith.w2s.claim_results import paper_claims

    targets = ["t1", "t2", "t3"]
    headline = {
        "name": "harmless",
        "targets": targets,
        "seeds": [0, 1, 2],
        "methods": {"naive": {"wrg": 3.0, "wrg_ci": [1.0, 5.0]}},
        "claim_statistics": {
            "gain_lost": {"t1": _est(-1.0, -3.0, 1.0), "t2": _est(4.0, 2.0, 6.0), "t3": _est(-5.0, -7.0, -3.0)},
            "anchor": {"method": "anchor-0.1", "weight": 0.1},
            "anchor_vs_best_other": {
                "others": ["naive", "seam"],
                "t1": _est(1.0, 0.2, 2.0),
                "t2": _est(0.5, 0.1, 1.0),
                "t3": _est(-1.0, -2.0, 0.5),
            },
        },
    }
    results = paper_claims(headline, None)
    by_key: dict[str, list[ClaimResult]] = {}
    for r in results:
        by_key.setdefault(r.claim.key, []).append(r)
    assert [r.verdict for r in by_key["w2s.a.wrg"]] == [HELD]
    assert [r.verdict for r in by_key["w2s.a.aog"]] == [INCONCLUSIVE, HELD, NOT_HELD]
    assert [r.scope for r in by_key["w2s.a.aog"]] == ["harmless: t1", "harmless: t2", "harmless: t3"]
    assert by_key["w2s.b.most"][0].verdict == HELD  # held on 2 of 3 targets
    assert {r.verdict for r in by_key["w2s.c"] + by_key["w2s.c.strong"] + by_key["w2s.d"]} == {NOT_RUN}


def _methods(**levels: dict[str, float]) -> dict[str, dict[str, float]]:
    return {name: dict(v) for name, v in levels.items()}


def test_w2s_claims_from_metrics_without_claim_statistics() -> None:
    """Older metrics: the interval claims they hold are judged, the rest show their point as "not run"."""
    from rewardsmith.w2s.claim_results import paper_claims

    targets = ["t1", "t2"]
    headline = {
        "name": "harmless",
        "targets": targets,
        "seeds": [0, 1, 2],
        "anchor_selection": [{"layers": [1.0], "chosen": "anchor-0.1", "weight": 0.1}],
        "methods": _methods(
            naive={"wrg": 3.0, "wrg_ci": [1.0, 5.0], "aog.t1": 4.0, "aog.t2": -2.0, "nts.t1": 4.0, "nts.t2": -2.0},
            seam={"nts.t1": 5.0, "nts.t2": -3.0},
            **{"anchor-0.1": {"nts.t1": 3.0, "nts.t2": 1.0}},
        ),
    }
    methods = [
        {"name": f"anchor-{w:g}", "objective": "anchor", "anchor": {"weight": w, "layers": [1.0], "normalise": True}}
        for w in (0.1, 1.0, 10.0)
    ]
    sweep = {
        "name": "harmless",
        "targets": targets,
        "seeds": [0, 1, 2],
        "config": {"methods": methods},
        "anchor_selection": [{"layers": [1.0], "chosen": "anchor-0.1", "weight": 0.1}],
        "validation": {"naive": {"accuracy": 59.8}, "anchor-0.1": {"accuracy": 58.9}},
        "vs_naive": {
            "anchor-10": {"d.id": -9.3, "d.id_ci": [-12.4, -6.3]},
            "anchor-0.1": {"d.t1": -1.0, "d.t2": 2.0},
            "anchor-0.1-mid": {"d.t1": 0.5, "d.t2": 1.0},
        },
    }
    by_key: dict[str, list[ClaimResult]] = {}
    for r in paper_claims(headline, sweep):
        by_key.setdefault(r.claim.key, []).append(r)
    assert [r.verdict for r in by_key["w2s.a.wrg"]] == [HELD]
    # WRG - AOG per target, as points: 3 - 4 and 3 - (-2)
    assert [(r.verdict, r.estimate) for r in by_key["w2s.a.aog"]] == [(NOT_RUN, -1.0), (NOT_RUN, 5.0)]
    # ANCHOR's NTS minus the best of naive and SEAM: 3 - 5 and 1 - (-2)
    assert [r.estimate for r in by_key["w2s.b"]] == [-2.0, 3.0]
    most = by_key["w2s.b.most"][0]
    assert most.verdict == NOT_RUN and "highest on 1 of 2 targets" in most.evidence
    # (c): the choice 0.1 is the grid's smallest strength, so the trade-off cannot show
    trade = by_key["w2s.c"][0]
    assert trade.verdict == NOT_RUN and "at its edge" in trade.evidence and "naive, strength 0, 59.8" in trade.evidence
    assert "grid (0, 0.1," in trade.evidence  # strength 0 is part of the grid
    strong = by_key["w2s.c.strong"][0]  # the strongest anchor's paired ID difference to naive, held below 0
    assert (strong.verdict, strong.estimate, strong.ci) == (HELD, -9.3, (-12.4, -6.3))
    # (d) last minus middle at 0.1, each against naive: -1 - 0.5 and 2 - 1
    assert [(r.verdict, r.estimate) for r in by_key["w2s.d"]] == [(NOT_RUN, -1.5), (NOT_RUN, 1.0)]


def test_w2s_trade_off_is_judged_only_on_a_grid_that_brackets_the_choice() -> None:
    from rewardsmith.w2s.claim_results import sweep_claims

    methods = [
        {"name": f"anchor-{w:g}", "objective": "anchor", "anchor": {"weight": w, "layers": [1.0], "normalise": True}}
        for w in (0.01, 0.1, 1.0)
    ]
    stats = {
        "anchor": {"method": "anchor-0.1", "weight": 0.1},
        "anchor_grid": {"strongest": "anchor-1"},
        "trade_off": {"t1": _est(2.0, 0.5, 3.5)},
        "too_strong": {"id": _est(-5.0, -7.0, -3.0)},
    }
    sweep = {
        "seeds": [0, 1, 2],
        "config": {"methods": methods},
        "claim_statistics": stats,
        "anchor_selection": [{"layers": [1.0], "chosen": "anchor-0.1", "weight": 0.1}],
    }
    layer = {
        "seeds": [0, 1, 2],
        "claim_statistics": {
            "anchor": {"method": "anchor-0.1"},
            "last_minus_middle": {"middle": "anchor-0.1-mid", "t1": _est(-1.0, -1.8, -0.2)},
        },
    }
    results = {r.claim.key: r for r in sweep_claims(sweep, layer, "harmless", ["t1"])}
    assert results["w2s.c"].verdict == HELD and results["w2s.c.strong"].verdict == HELD
    assert results["w2s.d"].verdict == HELD  # the CI lies above the -2 margin
    edge = {
        **sweep,
        "anchor_selection": [{"layers": [1.0], "chosen": "anchor-1", "weight": 1.0}],
        "claim_statistics": {**stats, "anchor": {"method": "anchor-1", "weight": 1.0}},
    }
    assert {r.claim.key: r for r in sweep_claims(edge, None, "harmless", ["t1"])}["w2s.c"].verdict == NOT_RUN
    # The smallest positive strength, chosen: strength 0 (the naive student) lies below it, so the optimum is inside
    # the grid when naive scores lower on validation, and at its edge (0) when naive scores higher.
    smallest = {
        **sweep,
        "anchor_selection": [{"layers": [1.0], "chosen": "anchor-0.01", "weight": 0.01}],
        "claim_statistics": {**stats, "anchor": {"method": "anchor-0.01", "weight": 0.01}},
    }
    for naive, verdict in ((59.0, HELD), (61.0, NOT_RUN)):
        run = {**smallest, "validation": {"naive": {"accuracy": naive}, "anchor-0.01": {"accuracy": 60.0}}}
        assert {r.claim.key: r for r in sweep_claims(run, None, "harmless", ["t1"])}["w2s.c"].verdict == verdict
    without_naive = {**smallest, "validation": {"anchor-0.01": {"accuracy": 60.0}}}
    assert {r.claim.key: r for r in sweep_claims(without_naive, None, "harmless", ["t1"])}["w2s.c"].verdict == NOT_RUN


def test_icrm_claims_from_an_earlier_summary() -> None:
    """An earlier summary: ECE without the reliability, levels without paired changes, an overall change in its
    claims list."""
    from rewardsmith.icrm.claim_results import icrm_claim_results, icrm_own_results

    level = {"mean": 0.05, "ci": [0.04, 0.06]}
    summary = {
        "seeds": [0, 1, 2, 3, 4],
        "claims": [{"claim": "RM-Bench accuracy rises with N (paper ...)", "mean": 4.7, "ci": [3.1, 6.5]}],
        "protocols": {
            "calibration": {"by_n": {"0": {"ece": level}, "64": {"ece": level}}, "bt": {"ece": level}},
            "rmbench": {
                "accuracy": {
                    "overall": {"icrm": {"1": {"avg": {"mean": 66.0}}, "64": {"avg": {"mean": 71.0}}}},
                    "chat": {"icrm": {"1": {"avg": {"mean": 48.0}}, "64": {"avg": {"mean": 46.5}}}},
                }
            },
            "pareto": {
                "hypervolume": {"1": {"mean": 0.27}, "8": {"mean": 0.42}, "64": {"mean": 0.28}},
                "bt_hypervolume": {"mean": 0.35},
            },
        },
    }
    paper = {(r.claim.key, r.scope): r for r in icrm_claim_results(summary)}
    tracking = paper[("icrm.tracking", "moralchoice/low")]
    assert tracking.verdict == NOT_RUN and "constant forecast passes" in tracking.evidence
    assert paper[("icrm.rmbench", "rm-bench overall")].verdict == HELD
    chat = paper[("icrm.rmbench", "rm-bench chat")]
    assert (chat.verdict, chat.estimate) == (NOT_RUN, pytest.approx(-1.5))
    pareto = paper[("icrm.pareto", "rm-bench safety respond/refuse")]
    assert pareto.verdict == NOT_RUN and pareto.estimate == pytest.approx(0.01) and "peaks at N=8" in pareto.evidence
    assert paper[("icrm.flipped", "pku-saferlhf harmless-flipped")].verdict == NOT_RUN  # no steerability protocol
    own = {(r.claim.key, r.scope): r for r in icrm_own_results(summary)}
    assert own[("icrm.pareto-bt", "rm-bench safety respond/refuse")].estimate == pytest.approx(0.28 - 0.35)
    assert own[("icrm.math500-proxy", "math-500")].verdict == NOT_RUN


def test_icrm_claims_read_the_summary() -> None:
    from rewardsmith.icrm.claim_results import icrm_claim_results, icrm_own_results

    rec = {"mean": 0.6, "ci": [0.55, 0.65]}
    summary = {
        "seeds": [0, 1, 2],
        "protocols": {
            "steerability": {
                "n_max": 64,
                "accuracy": {
                    "harmless-flipped": {
                        "icrm_n64_minus_bt": {"mean": 12.0, "ci": [9.0, 15.0]},
                        "share_of_ceiling": {"mean": 0.4, "ci": [0.2, 0.6]},
                        "ceiling": {"mean": 60.0},
                        "icrm": {"64": {"mean": 54.0, "ci": [51.0, 57.0]}, "0": {"mean": 49.5}},
                        "bt": {"mean": 42.0},
                    },
                    "helpful-flipped": {
                        "icrm_n64_minus_bt": {"mean": 14.0, "ci": [11.0, 17.0]},
                        "icrm": {"64": {"mean": 51.0, "ci": [48.0, 54.0]}},
                    },
                    "harmless": {"icrm_n64_minus_bt": {"mean": -3.9, "ci": [-6.5, -0.9]}},
                    "helpful": {"icrm_n64_minus_bt": {"mean": -7.0, "ci": [-10.1, -3.8]}},
                },
            },
            "calibration": {
                "n_high": 64,
                "by_n": {"64": {"reliability_slope": rec}},
                "constant": {"reliability_mae": 0.273},
                "mae_high_minus_constant": {"mean": -0.1, "ci": [-0.12, -0.08]},
                "mae_low_minus_high": {"mean": 0.01, "ci": [-0.01, 0.03]},
            },
        },
    }
    paper = {(r.claim.key, r.scope): r.verdict for r in icrm_claim_results(summary)}
    # Judged against chance, not against BT (which scores below chance on a flipped standard): 12 points above BT
    # but a CI covering 50 decides nothing.
    assert paper[("icrm.flipped", "pku-saferlhf harmless-flipped")] == HELD
    assert paper[("icrm.flipped", "pku-saferlhf helpful-flipped")] == INCONCLUSIVE
    assert paper[("icrm.tracking", "moralchoice/low")] == HELD  # slope CI above 0.5
    assert paper[("icrm.reliability", "moralchoice/low")] == HELD  # below the constant's MAE
    assert paper[("icrm.calibration-n", "moralchoice/low")] == INCONCLUSIVE
    assert paper[("icrm.math500", "math-500")] == NOT_RUN
    own = {(r.claim.key, r.scope): r.verdict for r in icrm_own_results(summary)}
    assert own[("icrm.flipped-share", "pku-saferlhf harmless-flipped")] == INCONCLUSIVE  # covers 0.5
    assert own[("icrm.flipped-share", "pku-saferlhf helpful-flipped")] == NOT_RUN  # no ceiling
    assert own[("icrm.default-cost", "pku-saferlhf harmless")] == NOT_HELD


def test_pebs_forecast_miss_gets_its_cause() -> None:
    from rewardsmith.calibrate.claim_results import pebs_claim_results

    m = {
        "gain_vs_pooled_pct.pebs-uncentred": 9.13,
        "gain_vs_pooled_ci.pebs-uncentred": [7.3, 11.3],
        "gain_vs_ols_pct.pebs-uncentred": -0.5,
        "gain_vs_ols_ci.pebs-uncentred": [-1.0, -0.1],
        "forecast_gain_pct.pebs-uncentred": 7.0,
        "forecast_full_pilot_gain_pct.pebs-uncentred": 8.2,
        "residual_heteroscedasticity": -0.19,
        "pair_accuracy_invariant.pebs-uncentred": True,
    }
    results = {r.claim.key: r for r in pebs_claim_results({"PluriHarms": m})}
    assert results["pebs.gain"].verdict == HELD
    assert results["pebs.vs-ols"].verdict == NOT_HELD
    assert results["pebs.prism"].verdict == NOT_RUN
    assert results["pebs.monotone"].verdict == HELD
    forecast = results["pebs.forecast"]
    assert forecast.verdict == NOT_HELD and forecast.estimate == pytest.approx(-2.13)
    assert forecast.ci == pytest.approx((7.0 - 11.3, 7.0 - 7.3))
    # 8.2 - 9.13 of the miss is the normal model's, 7.0 - 8.2 the pilot's noise
    assert "-0.93" in forecast.evidence and "-1.20" in forecast.evidence and "-0.19" in forecast.evidence
    # A CI reaching into the tolerance decides nothing; binary ratings and a pilot as large as the fit part are out
    # of the claim's scope.
    wide = {**m, "gain_vs_pooled_ci.pebs-uncentred": [6.9, 11.3]}
    assert {r.claim.key: r for r in pebs_claim_results({"P": wide})}["pebs.forecast"].verdict == INCONCLUSIVE
    binary = {**m, "config": {"source": {"ratings": "dices-350"}}}
    assert "binary" in {r.claim.key: r for r in pebs_claim_results({"D": binary})}["pebs.forecast"].evidence
    whole = {**m, "fit_ratings_per_rater_mean": 18.0, "config": {"evaluation": {"pilot_per_rater": 20}}}
    result = {r.claim.key: r for r in pebs_claim_results({"P": whole})}["pebs.forecast"]
    assert result.verdict == NOT_RUN and "whole" in result.evidence


def test_reliability_of_a_tracking_and_a_constant_forecast() -> None:
    from rewardsmith.icrm.protocols.calibration import reliability

    rates = np.linspace(0.0, 1.0, 11)
    half_tracking = 0.5 + 0.5 * ((1.0 - rates) - 0.5)  # slope 0.5 around the centre
    r = reliability(np.tile(half_tracking[:, None], (1, 7)), rates)
    assert r["slope"] == pytest.approx(0.5)
    # the centred line of slope s misses by (1 - s) |x - 0.5|: mean over the 11 rates = 0.5 * 3 / 11
    assert r["mae"] == pytest.approx(0.5 * 3.0 / 11)
    constant = reliability(np.full((11, 3), 0.5), rates)
    assert (constant["slope"], constant["mae"]) == (pytest.approx(0.0), pytest.approx(3.0 / 11))


# The claims for which the papers give a figure (ANCHOR: AOG 0.60 -> 4.41 and a 20-point drop; ICRM: 89% on flipped
# labels, ECE 0.099 -> 0.076, RM-Bench 60.5 -> 70.8, MATH-500 53.8; PEBS: -9.66% / -8.58% RMSE and the 0.2-point
# forecast tolerance). Every row of these in the committed docs must print the figure, never "none given".
QUANTIFIED = {
    "w2s.a.aog",
    "w2s.b",
    "w2s.c",
    "own.anchor-ood",
    "own.anchor-paper-form",
    "icrm.flipped",
    "icrm.tracking",
    "icrm.reliability",
    "icrm.calibration-n",
    "icrm.rmbench",
    "icrm.math500",
    "pebs.gain",
    "pebs.prism",
    "pebs.forecast",
}


def _claim_rows(doc: str) -> list[list[str]]:
    """The rows of the claim tables in a rendered doc (header: CLAIM_HEADER)."""
    from rewardsmith.claims import CLAIM_HEADER

    header = "| " + " | ".join(CLAIM_HEADER) + " |"
    rows, inside = [], False
    for line in doc.splitlines():
        if line == header:
            inside = True
        elif inside and line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif not line.startswith("|"):
            inside = False
    return rows


def test_every_row_of_a_claim_the_papers_quantify_prints_the_papers_figure() -> None:
    from pathlib import Path

    from rewardsmith.calibrate import claims as pebs
    from rewardsmith.icrm import claims as icrm
    from rewardsmith.w2s import claims as w2s

    claims = {c.key: c for m in (w2s, icrm, pebs) for c in (*m.PAPER_CLAIMS, *m.OWN_CLAIMS)}
    assert set(claims) >= QUANTIFIED
    missing = sorted(k for k in QUANTIFIED if claims[k].paper_figure is None)
    assert not missing, f"claims the papers quantify have no paper_figure: {missing}"
    docs = Path(__file__).resolve().parents[2] / "docs"
    rows = [row for name in ("w2s.md", "icrm.md", "calibration.md") for row in _claim_rows((docs / name).read_text())]
    for key in sorted(QUANTIFIED):
        statement = claims[key].statement
        mine = [r for r in rows if r[0].removeprefix("project's own: ") == statement]
        assert mine, f"{key}: no row in docs/w2s.md, icrm.md or calibration.md"
        assert all(r[3] != "none given" for r in mine), f"{key}: a row prints 'none given'"


def test_the_papers_figure_is_placed_against_our_ci() -> None:
    quantified = Claim("P", "k.fig", "x", "y", 0.0, "here", "+3.81", paper_value=3.81)
    outside = claim_row(interval_result(quantified, 0.0, [-3.2, 3.1]))
    assert "the paper's +3.81 lies outside our CI" in outside[-1]
    assert "lies inside our CI" in claim_row(interval_result(quantified, 3.6, [-1.1, 8.3]))[-1]
    assert "paper's" not in claim_row(interval_result(quantified, 3.6, None))[-1]  # no CI, nothing to place it in


def test_w2s_paper_form_rows_per_target_and_not_run_without_its_run() -> None:
    from rewardsmith.w2s.claim_results import paper_form_claims

    targets = ["t1", "t2"]
    missing = paper_form_claims(None, targets)
    assert [r.verdict for r in missing] == [NOT_RUN, NOT_RUN]
    assert "python experiments/w2s.py run --only shift-harmless-paper" in missing[0].evidence
    run = {
        "name": "harmless",
        "targets": targets,
        "seeds": [0, 1, 2],
        "vs_naive": {"anchor-paper-raw": {"d.t1": 0.1, "d.t1_ci": [-1.0, 1.2], "d.t2": 2.0, "d.t2_ci": [0.5, 3.5]}},
    }
    rows = paper_form_claims(run, targets)
    assert [r.verdict for r in rows] == [INCONCLUSIVE, HELD]
    assert [r.scope for r in rows] == ["harmless: t1", "harmless: t2"]
    # The paper's +3.81 is placed against each CI.
    assert "outside our CI" in claim_row(rows[0])[-1] and "outside our CI" in claim_row(rows[1])[-1]


def _student_margins(flip: dict[str, int], shift: float = 0.0) -> dict[str, np.ndarray]:
    """Margins of naive and the paper's form on seeds 0-1 of splits id and t1: the paper's form is naive's margins
    plus `shift`, with the sign of the first flip[split] pairs of seed 0 reversed."""
    out: dict[str, np.ndarray] = {}
    for seed in (0, 1):
        for split, n in (("id", 200), ("t1", 100)):
            naive = np.where(np.arange(n) % 2 == 0, 0.5, -0.5)  # right on even pairs, wrong on odd ones
            mine = naive + shift
            if seed == 0:
                mine[: flip.get(split, 0)] *= -1.0
            out[f"naive/seed{seed}/{split}"], out[f"anchor-paper-raw/seed{seed}/{split}"] = naive, mine
    out["teacher/seed-1/id"] = np.ones(200)  # no naive of its seed: not compared
    return out


def test_naive_agreement_counts_the_pairs_whose_correctness_differs() -> None:
    from rewardsmith.w2s.claim_results import equal_to_naive, naive_agreement

    a = naive_agreement(_student_margins({"id": 3}, shift=0.002), "anchor-paper-raw")
    assert (a["seeds"], a["differing"], a["pairs"]) == (2, 3, 600)
    assert a["by_split"]["id"] == pytest.approx(
        {"differing": 3, "pairs": 400, "share": 3 / 400, "max_abs_difference": 1.002}  # |-(0.5 + 0.002) - 0.5|
    )
    assert a["identical"] == ["t1"] and a["max_share"] == pytest.approx(3 / 400) and equal_to_naive(a)
    # 2 of 200 pairs of t1 on the two seeds is 1%: no longer below the share that makes a method naive's equal.
    assert not equal_to_naive(naive_agreement(_student_margins({"t1": 2}), "anchor-paper-raw"))
    assert naive_agreement(_student_margins({}), "anchor-0.003") == {} and not equal_to_naive({})


def test_w2s_paper_form_equal_to_naive_is_not_run_with_its_interval_shown() -> None:
    from rewardsmith.w2s.claim_results import naive_agreement, paper_form_claims

    run = {
        "name": "harmless",
        "targets": ["t1"],
        "seeds": [0, 1],
        "vs_naive": {"anchor-paper-raw": {"d.t1": 0.0, "d.t1_ci": [-0.3, 0.2]}},
    }
    equal = naive_agreement(_student_margins({"id": 1}), "anchor-paper-raw")
    [row] = paper_form_claims(run, ["t1"], equal)
    assert (row.verdict, row.estimate, row.ci) == (NOT_RUN, 0.0, (-0.3, 0.2))
    assert row.evidence.startswith("equal to naive at this scale") and "0 of 200 pair predictions" in row.evidence
    rendered = claim_row(row)
    assert rendered[4] == "0.0 [-0.3, 0.2] (not judged)" and "paper's" not in rendered[-1]
    # A paper's form that moved the students is judged on its interval.
    moved = naive_agreement(_student_margins({"t1": 30}), "anchor-paper-raw")
    assert [r.verdict for r in paper_form_claims(run, ["t1"], moved)] == [INCONCLUSIVE]
    assert [r.verdict for r in paper_form_claims(run, ["t1"])] == [INCONCLUSIVE]  # no margins: judged as before


def test_gap_search_bar_needs_the_gap_its_ci_and_an_informative_teacher() -> None:
    from rewardsmith.w2s.claim_results import gap_search_result

    n = 300
    truth = np.ones(n)
    ceiling = [np.where(np.arange(n) < 0.75 * n, truth, -truth) for _ in range(3)]  # 75% correct, 3 seeds
    teacher = np.where(np.arange(n) % 100 < 58, truth, -truth)  # 58% correct: informative
    r = gap_search_result(ceiling, teacher, n_boot=500)
    assert r["gap"] == pytest.approx(17.0) and r["gap_ci"][0] > 0 and r["informative"] and r["reaches_bar"]
    coin = np.where(np.arange(n) % 2 == 0, truth, -truth)  # 50%: its CI covers chance
    r = gap_search_result(ceiling, coin, n_boot=500)
    assert r["gap"] == pytest.approx(25.0) and not r["informative"] and not r["reaches_bar"]
    close = [np.where(np.arange(n) % 100 < 63, truth, -truth)]  # a 5-point gap misses the 8-point bar
    assert not gap_search_result(close, teacher, n_boot=500)["reaches_bar"]


def test_single_pilot_errors_pair_each_splits_forecast_with_its_realised_gain() -> None:
    from rewardsmith.calibrate.claim_results import single_pilot_errors

    forecasts = [5.0, 7.0, None, 9.0, 6.0]
    realised = [6.0, 6.0, 4.0, 6.0, 6.0]  # errors -1, +1, (failed pilot), +3, 0
    m = {"forecast_gain_by_split.pebs-uncentred": forecasts, "gain_by_split.pebs-uncentred": realised}
    one = single_pilot_errors(m, "")
    assert one is not None and one["splits"] == 4
    assert one["median_abs"] == pytest.approx(1.0)
    assert one["p5"] == pytest.approx(np.percentile([-1, 1, 3, 0], 5))
    assert one["p95"] == pytest.approx(np.percentile([-1, 1, 3, 0], 95))
    # A run written before the per-split forecasts were kept has none: the column says not run.
    assert single_pilot_errors({"gain_by_split.pebs-uncentred": realised}, "") is None


def test_w2s_debiased_row_not_judged_on_the_set_its_objective_was_chosen_on() -> None:
    from rewardsmith.w2s.claim_results import own_claims

    d = {"d.hh-rlhf/harmless-base": 3.0, "d.hh-rlhf/harmless-base_ci": [1.0, 5.0], "d.t2": 3.0, "d.t2_ci": [1.0, 5.0]}
    headline = {
        "name": "harmless",
        "targets": ["hh-rlhf/harmless-base", "t2"],
        "seeds": [0, 1, 2],
        "vs_naive_length_controlled": {"naive-length-covariate": d},
    }
    rows = [r for r in own_claims(headline) if r.claim.key == "own.length-covariate"]
    assert [r.verdict for r in rows] == [NOT_RUN, HELD]
    assert "not independent of the choice" in rows[0].evidence
