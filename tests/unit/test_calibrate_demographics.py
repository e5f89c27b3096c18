"""The share of between-rater calibration variance a demographic column explains
(rewardsmith.calibrate.demographics) on synthetic raters whose groups do or do not set their maps."""

from __future__ import annotations

import numpy as np

from rewardsmith.calibrate.claim_results import demographics_results
from rewardsmith.calibrate.demographics import demographic_shares
from rewardsmith.calibrate.stats import rater_stats
from rewardsmith.calibrate.synthetic import SyntheticRaters, simulate_ratings
from rewardsmith.claims import HELD, NOT_HELD, NOT_RUN


def _table(group_effect: float, seed: int = 0) -> object:
    rng = np.random.default_rng(seed)
    j = 120
    group = np.repeat(np.arange(4), j // 4)
    slope = 1.0 + group_effect * (group - 1.5) + 0.3 * rng.standard_normal(j)
    intercept = 0.5 * rng.standard_normal(j)
    params = SyntheticRaters(np.array([f"r{i:03d}" for i in range(j)]), slope, intercept, np.ones(j))
    table = simulate_ratings(params, 40, seed=seed + 1)
    frame = table.frame.copy()
    frame["group"] = frame["rater_id"].map(dict(zip(params.rater_ids, group.astype(str), strict=True)))
    frame["random"] = frame["rater_id"].map(
        dict(zip(params.rater_ids, rng.permutation(group).astype(str), strict=True))
    )
    return rater_stats(frame, ("group", "random"))


def test_groups_that_set_the_slope_explain_it_and_random_groups_do_not() -> None:
    shares = {s.column: s for s in demographic_shares(_table(group_effect=0.6), n_boot=300)}
    assert shares["group"].share["slope"] > 0.7 and shares["group"].share_ci["slope"][0] > 0.5
    assert abs(shares["random"].share["slope"]) < 0.2 and shares["random"].share_ci["slope"][0] < 0.0
    assert abs(shares["group"].share["intercept"]) < 0.2  # the groups do not move the intercept
    # No group effect: the grouping column explains nothing either.
    none = {s.column: s for s in demographic_shares(_table(group_effect=0.0), n_boot=300)}
    assert none["group"].share_ci["slope"][0] < 0.0 < none["group"].share_ci["slope"][1]


def test_the_claim_is_held_below_half_and_not_held_above() -> None:
    def result(share: float, ci: list[float]) -> dict:
        column = {"column": "Race", "groups": 4, "share": {"slope": share, "intercept": 0.0}}
        column["share_ci"] = {"slope": ci, "intercept": [-0.1, 0.1]}
        return {"corpus": "P", "columns": [column]}

    verdicts = [r.verdict for r in demographics_results(result(0.05, [-0.03, 0.3]), "Race")]
    assert verdicts == [HELD, HELD]
    assert demographics_results(result(0.8, [0.6, 0.9]), "Race")[0].verdict == NOT_HELD
    assert demographics_results(None, "Race")[0].verdict == NOT_RUN
