"""The demo's steering and stress-test summaries (rewardsmith.report.demo): agreement with the demonstrated standard
flips the flipped condition's accuracy, and the stress-test sentence follows the ceiling-minus-teacher interval."""

from __future__ import annotations

import pytest

from rewardsmith.report.demo import steering_agreement, stress_test_note


def test_agreement_with_the_demonstrated_standard() -> None:
    metrics = {
        "check": {
            "conditions": {
                "none": {"accuracy": 48.0, "accuracy_ci": [43.0, 53.0]},
                "as labelled": {"accuracy": 59.0, "accuracy_ci": [54.0, 64.0]},
                "flipped": {"accuracy": 40.0, "accuracy_ci": [35.0, 45.0]},
            }
        },
        "bt": {"accuracy": 57.0, "accuracy_ci": [52.0, 62.0]},
    }
    rows = {label: (value, ci) for label, value, ci in steering_agreement(metrics)}
    assert rows["ICRM, no demonstrations"] == (48.0, [43.0, 53.0])
    assert rows["ICRM, as labelled"] == (59.0, [54.0, 64.0])
    # following the flipped standard: 100 - 40, the interval mirrored
    assert rows["ICRM, flipped"] == (pytest.approx(60.0), [pytest.approx(55.0), pytest.approx(65.0)])
    assert rows["BT, as labelled"] == (57.0, [52.0, 62.0])
    assert rows["BT, flipped"] == (pytest.approx(43.0), [pytest.approx(38.0), pytest.approx(48.0)])


def test_stress_test_note_follows_the_gap_interval() -> None:
    sizes = {"w2s": 600, "gold": 300}
    covered = stress_test_note(
        {"gap_ceiling_minus_teacher": {"id": {"value": -4.3, "ci": [-11.3, 2.7]}}, "sizes": sizes}
    )
    assert "is not told apart from the teacher's (the CI covers 0): -4.3" in covered
    assert "600 training pairs" in covered and "300 gold pairs" in covered
    above = stress_test_note({"gap_ceiling_minus_teacher": {"id": {"value": 9.0, "ci": [2.0, 16.0]}}, "sizes": sizes})
    assert above.startswith("The ceiling beats the teacher in domain by 9.0")
    below = stress_test_note(
        {"gap_ceiling_minus_teacher": {"id": {"value": -9.0, "ci": [-16.0, -2.0]}}, "sizes": sizes}
    )
    assert "falls below the teacher's: -9.0" in below


def test_calibration_gains_show_pebs_against_pooled_and_per_rater_ols() -> None:
    from rewardsmith.report.demo import PEBS, calibration_gains

    assert PEBS == "PEBS (per-rater empirical-Bayes shrinkage)"
    cal = {
        "gain_vs_pooled_pct.pebs": 9.669,
        "gain_vs_pooled_ci.pebs": [7.309, 12.263],
        "gain_vs_ols_pct.pebs": 0.0665,
        "gain_vs_ols_ci.pebs": [-0.0662, 0.2170],
    }
    assert calibration_gains(cal) == "RMSE gain vs pooled 9.67 [7.31, 12.26]%; vs per-rater OLS 0.07 [-0.07, 0.22]%"
    # A comparison the demo's metrics do not hold is said not run, never filled in.
    del cal["gain_vs_ols_pct.pebs"], cal["gain_vs_ols_ci.pebs"]
    assert calibration_gains(cal).endswith("vs per-rater OLS not run")


def test_the_helpful_note_reads_the_helpful_set_of_the_train_step() -> None:
    from rewardsmith.report.demo import helpful_note

    block = {
        "accuracy": 38.71,
        "accuracy_ci": [35.6, 42.05],
        "prefers_longer_rate": 31.2,
        "length_rule_accuracy": 61.18,
    }
    note = helpful_note({"hh-rlhf/helpful-base": block})
    assert note.startswith("On hh-rlhf/helpful-base it scores 38.7 [35.6, 42.0]%, below chance,")
    assert "anti-correlated" in note and "in 31% of these pairs" in note and "wins 61.2%" in note
    # Not below chance when the interval reaches 50; nothing when the demo did not score the set.
    above = helpful_note({"hh-rlhf/helpful-base": {**block, "accuracy": 48.0, "accuracy_ci": [44.0, 52.0]}})
    assert "below chance" not in above and "anti-correlated" in above
    assert helpful_note({}) == ""


def test_model_depth_names_the_layers_kept() -> None:
    from rewardsmith.report.demo import model_depth

    assert model_depth({"config": {"model": {"num_layers": 2}}}) == " (its first 2 of 6 layers)"
    assert model_depth({"config": {"model": {"num_layers": None}}}) == ""
    assert model_depth({}) == ""
