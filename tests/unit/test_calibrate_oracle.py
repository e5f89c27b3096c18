"""PEBS against the oracle that knows tau^2 (rewardsmith.calibrate.oracle): the simulation's own properties."""

from __future__ import annotations

import numpy as np

from rewardsmith.calibrate.claim_results import oracle_result
from rewardsmith.calibrate.oracle import oracle_ratio, oracle_study, replicate_risks
from rewardsmith.claims import HELD, NOT_HELD, NOT_RUN


def test_the_oracle_is_never_worse_on_average_and_the_excess_falls_with_j() -> None:
    # Per panel PEBS can beat the oracle by luck; over panels it cannot (the oracle's weights are the Bayes rule).
    risks = np.array([replicate_risks(10, d) for d in range(200)])
    assert (risks[:, 0] < risks[:, 1]).any() and risks[:, 0].mean() > risks[:, 1].mean()
    small, large = oracle_ratio(10, 200), oracle_ratio(200, 200)
    assert small.ratio > large.ratio > 1.0 and small.ratio_ci[0] > 1.0
    # The same seed gives the same panels.
    assert oracle_ratio(10, 20).ratio == oracle_ratio(10, 20).ratio


def test_the_rate_is_minus_one_when_the_excess_is_c_over_j() -> None:
    study = oracle_study([10, 40, 160], 300)
    assert -1.5 < study.rate < -0.6 and study.rate_ci[0] < study.rate < study.rate_ci[1]
    d = {
        "rate": study.rate,
        "rate_ci": list(study.rate_ci),
        "replicates": 300,
        "ratios": [{"raters": r.raters, "scaled_excess": r.scaled_excess} for r in study.ratios],
    }
    assert oracle_result(d).verdict == HELD
    # An excess that does not fall with J (rate 0) is not held; no results is not run.
    assert oracle_result({**d, "rate": 0.0, "rate_ci": [-0.2, 0.2]}).verdict == NOT_HELD
    assert oracle_result(None).verdict == NOT_RUN
