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
    assert covered.startswith("At the demo's size the ceiling does not beat the teacher")
    assert "600 training pairs" in covered and "300 gold pairs" in covered
    above = stress_test_note({"gap_ceiling_minus_teacher": {"id": {"value": 9.0, "ci": [2.0, 16.0]}}, "sizes": sizes})
    assert above.startswith("The ceiling beats the teacher in domain by 9.0")
