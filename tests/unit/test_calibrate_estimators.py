"""PEBS and baselines: known answers (hand-computed shrinkage, simulated rater recovery), invariances."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from rewardsmith.calibrate import (
    CALIBRATORS,
    PEBS,
    GroupAffine,
    MixedLMCalibrator,
    PerRaterOLS,
    PooledAffine,
    create_calibrator,
    rater_stats,
)
from rewardsmith.calibrate.estimators import shared_params
from rewardsmith.calibrate.evaluate import _pair_concordance
from rewardsmith.calibrate.shrinkage import STATUS_SINGLE_MODEL_SCORE, STATUS_SPARSE, shrink
from rewardsmith.calibrate.synthetic import simulate_parameters, simulate_ratings
from rewardsmith.errors import ConfigError, DataError, UnknownNameError


def _frame(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["rater_id", "item_id", "score", "model_score"])


@pytest.fixture(scope="module")
def simulated():
    params = simulate_parameters(300, slope=1.0, intercept=0.5, slope_sd=0.3, intercept_sd=0.5, seed=3)
    return params, simulate_ratings(params, 80, seed=4)


# ---------------------------------------------------------------------------------------------- shrinkage


def test_shrinkage_weights_match_a_hand_computed_case():
    # Four raters; slopes 1, 2, 3, 6 with sampling variances 1, 1, 2, 1/2; intercepts all 0 (variance 1).
    theta = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [6.0, 0.0]])
    cov = np.zeros((4, 2, 2))
    cov[:, 0, 0] = [1.0, 1.0, 2.0, 0.5]
    cov[:, 1, 1] = 1.0
    out = shrink(theta, cov, np.ones(4, bool), joint=False, fallback_population=np.zeros(2))
    # mean slope 3; sample variance (4 + 1 + 0 + 9) / 3 = 14/3; mean V = 9/8 -> tau^2 = 14/3 - 9/8 = 85/24
    tau2 = 85 / 24
    assert out.tau2[0, 0] == pytest.approx(tau2)
    weights = np.array([85 / 109, 85 / 109, 85 / 133, 85 / 97])  # tau^2 / (tau^2 + V_j)
    np.testing.assert_allclose(out.weight[:, 0], weights)
    np.testing.assert_allclose(out.theta[:, 0], 3 + weights * (theta[:, 0] - 3))
    np.testing.assert_allclose(out.theta[:, 0], [3 - 170 / 109, 3 - 85 / 109, 3.0, 3 + 255 / 97])
    # Intercepts: sample variance 0 - mean V 1 < 0 -> clipped, weight 0, population value for everyone.
    assert out.clipped.tolist() == [False, True]
    assert out.tau2[1, 1] == 0.0
    np.testing.assert_allclose(out.weight[:, 1], 0.0)
    np.testing.assert_allclose(out.theta[:, 1], 0.0)


def test_joint_equals_independent_when_covariances_vanish():
    # Intercept deviations orthogonal to slope deviations and diagonal V: T and every W_j are diagonal.
    theta = np.array([[1.0, 1.0], [2.0, -2.0], [3.0, 1.0], [6.0, 0.0]])
    cov = np.zeros((4, 2, 2))
    cov[:, 0, 0] = [1.0, 1.0, 2.0, 0.5]
    cov[:, 1, 1] = [1.0, 0.5, 1.0, 1.5]
    elig = np.ones(4, bool)
    joint = shrink(theta, cov, elig, joint=True, fallback_population=np.zeros(2))
    indep = shrink(theta, cov, elig, joint=False, fallback_population=np.zeros(2))
    np.testing.assert_allclose(joint.theta, indep.theta)
    np.testing.assert_allclose(joint.weight, indep.weight)


def test_sparse_raters_get_population_values():
    theta = np.array([[1.0, 0.0], [3.0, 1.0], [np.nan, np.nan]])
    cov = np.stack([np.eye(2) * 0.1, np.eye(2) * 0.1, np.full((2, 2), np.nan)])
    out = shrink(theta, cov, np.array([True, True, False]), joint=False, fallback_population=np.zeros(2))
    np.testing.assert_allclose(out.theta[2], out.population)
    np.testing.assert_allclose(out.population, [2.0, 0.5])
    assert out.weight[2].tolist() == [0.0, 0.0]


def test_tau2_clipped_when_raters_do_not_differ():
    # Every rater has the same true map; with few ratings the sampling noise exceeds the spread.
    params = simulate_parameters(60, slope=1.0, slope_sd=0.0, intercept_sd=0.0, seed=0)
    table = simulate_ratings(params, 8, seed=1)
    with pytest.warns(RuntimeWarning, match="clipped at 0"):
        est = PEBS(joint=False).fit(table)
    info = est.maps_.info
    assert info["tau2_clipped_slope"] or info["tau2_clipped_intercept"]
    for name in ("slope", "intercept"):
        if info[f"tau2_clipped_{name}"]:
            assert info[f"tau2_{name}"] == 0.0
            assert info[f"tau2_raw_{name}"] <= 0.0
            np.testing.assert_allclose(est.maps_.diagnostics[f"weight_{name}"], 0.0)
    if info["tau2_clipped_slope"]:
        np.testing.assert_allclose(est.maps_.slope, info["population_slope"])


# ---------------------------------------------------------------------------------------------- recovery


def test_pebs_recovers_simulated_slopes_and_intercepts(simulated):
    params, table = simulated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pebs = PEBS().fit(table)
    ols = PerRaterOLS().fit(table)
    assert np.array_equal(pebs.maps_.rater_ids, params.rater_ids)
    slope_err = np.sqrt(np.mean((pebs.maps_.slope - params.slope) ** 2))
    ols_slope_err = np.sqrt(np.mean((ols.maps_.slope - params.slope) ** 2))
    intercept_err = np.sqrt(np.mean((pebs.maps_.intercept - params.intercept) ** 2))
    assert np.corrcoef(pebs.maps_.slope, params.slope)[0, 1] > 0.9
    assert np.corrcoef(pebs.maps_.intercept, params.intercept)[0, 1] > 0.95
    # OLS slope SE is 1/sqrt(80) = 0.11 here; the posterior SD sqrt(tau2 V / (tau2 + V)) is 0.105.
    assert slope_err < 0.125 and intercept_err < 0.15
    assert slope_err < ols_slope_err  # shrinkage lowers the parameter error
    info = pebs.maps_.info
    assert info["tau2_slope"] == pytest.approx(params.slope.var(), rel=0.35)
    assert info["population_slope"] == pytest.approx(params.slope.mean(), abs=0.05)


def test_ols_matches_polyfit_and_pooled_matches_lstsq(simulated):
    _, table = simulated
    frame = table.frame
    ols = PerRaterOLS().fit(table)
    for rid in ols.maps_.rater_ids[:5]:
        sub = frame[frame.rater_id == rid]
        slope, intercept = np.polyfit(sub.model_score, sub.score, 1)
        j = ols.maps_.index_of([rid])[0]
        assert ols.maps_.slope[j] == pytest.approx(slope, rel=1e-9)
        assert ols.maps_.intercept[j] == pytest.approx(intercept, rel=1e-9, abs=1e-9)
    pooled = PooledAffine().fit(table)
    slope, intercept = np.polyfit(frame.model_score, frame.score, 1)
    assert pooled.maps_.population_slope == pytest.approx(slope, rel=1e-9)
    assert pooled.maps_.population_intercept == pytest.approx(intercept, rel=1e-9)


def test_fit_from_sufficient_statistics_equals_fit_from_rows(simulated):
    _, table = simulated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        a = PEBS().fit(table).maps_
        b = PEBS().fit(rater_stats(table)).maps_
    np.testing.assert_allclose(a.slope, b.slope)
    np.testing.assert_allclose(a.intercept, b.intercept)


def test_centring_matters_only_without_joint_shrinkage():
    params = simulate_parameters(150, slope_sd=0.4, intercept_sd=0.6, correlation=0.6, centre=3.0, seed=5)
    table = simulate_ratings(params, 15, r_mean=3.0, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        joint_c = PEBS(joint=True, centre=True).fit(table).maps_
        joint_u = PEBS(joint=True, centre=False).fit(table).maps_
        indep_c = PEBS(joint=False, centre=True).fit(table).maps_
        indep_u = PEBS(joint=False, centre=False).fit(table).maps_
    # Joint shrinkage is equivariant under a shift of r (no clipping here); separate shrinkage moves the
    # intercepts (the slope's estimate and variance do not depend on where the intercept is taken).
    np.testing.assert_allclose(joint_c.slope, joint_u.slope, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(joint_c.intercept, joint_u.intercept, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(indep_c.slope, indep_u.slope)
    assert np.abs(indep_c.intercept - indep_u.intercept).max() > 1e-2


def test_mixedlm_close_to_joint_pebs():
    params = simulate_parameters(40, slope_sd=0.3, intercept_sd=0.5, seed=7)
    table = simulate_ratings(params, 30, seed=8)
    mixed = MixedLMCalibrator().fit(table)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pebs = PEBS().fit(table)
    assert mixed.maps_.info["converged"]
    assert np.corrcoef(mixed.maps_.slope, pebs.maps_.slope)[0, 1] > 0.95
    with pytest.raises(ConfigError):
        MixedLMCalibrator().fit(rater_stats(table))


def test_mixedlm_on_a_constant_model_score_is_a_data_error():
    # Every model score 0.5: the design's slope column is all zeros after centring, a singular system.
    rows = [(r, str(k), float((k * 7 + ord(r)) % 10), 0.5) for r in "abcdefgh" for k in range(12)]
    with pytest.raises(DataError, match="mixedlm"):
        MixedLMCalibrator().fit(_frame(rows))


# ---------------------------------------------------------------------------------------------- invariance


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.integers(0, 5), min_size=2, max_size=25),
    slope=st.floats(0.01, 100.0),
    intercept=st.floats(-100.0, 100.0),
    data=st.data(),
)
def test_positive_slope_maps_keep_pair_accuracy(scores, slope, intercept, data):
    n = len(scores)
    model = np.round(np.array(data.draw(st.lists(st.floats(-10, 10), min_size=n, max_size=n))), 3)
    codes = np.zeros(n, dtype=np.int64)
    y = np.asarray(scores, dtype=float)
    raw = _pair_concordance(codes, y, model, 1)
    mapped = _pair_concordance(codes, y, slope * model + intercept, 1)
    assert raw[1] == mapped[1]
    assert raw[0] == pytest.approx(mapped[0])


def test_pebs_leaves_each_raters_pair_accuracy_unchanged(simulated):
    _, table = simulated
    frame = table.frame
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        est = PEBS().fit(table)
    codes, _ = pd.factorize(frame.rater_id, sort=True)
    pred = est.predict(frame.rater_id.to_numpy(), frame.model_score.to_numpy())
    raw = _pair_concordance(codes, frame.score.to_numpy(), frame.model_score.to_numpy(), codes.max() + 1)
    cal = _pair_concordance(codes, frame.score.to_numpy(), pred, codes.max() + 1)
    positive = est.maps_.slope > 0
    assert positive.all()
    np.testing.assert_allclose(cal[0][positive], raw[0][positive])


# ---------------------------------------------------------------------------------------------- guards


def test_nonpositive_shrunk_slope_is_reported_and_can_be_guarded():
    params = simulate_parameters(30, slope=1.0, slope_sd=0.2, intercept_sd=0.2, seed=11)
    table = simulate_ratings(params, 60, seed=12)
    frame = table.frame.copy()
    contrarian = frame.rater_id == params.rater_ids[0]
    frame.loc[contrarian, "score"] = -3.0 * frame.loc[contrarian, "model_score"]  # reverses the model
    with pytest.warns(RuntimeWarning, match="non-positive shrunk slope"):
        kept = PEBS(joint=False).fit(frame)
    assert kept.maps_.info["nonpositive_slope_raters"] == [params.rater_ids[0]]
    assert kept.maps_.slope[0] <= 0
    with pytest.warns(RuntimeWarning, match="replaced by the population map"):
        guarded = PEBS(joint=False, slope_guard="population").fit(frame)
    assert guarded.maps_.slope[0] == pytest.approx(guarded.maps_.population_slope)
    assert (guarded.maps_.slope > 0).all()


def test_sparse_and_single_model_score_raters_get_the_population_map():
    rng = np.random.default_rng(0)
    rows = []
    for j in range(20):
        for i in range(12):
            r = rng.normal()
            rows.append((f"r{j}", str(i), (1 + 0.2 * j / 20) * r + rng.normal(0, 0.3), r))
    rows += [("sparse", str(i), float(i), float(i)) for i in range(3)]  # below n_min
    rows += [("flat", str(i), float(i), 0.5) for i in range(10)]  # one distinct model score
    frame = _frame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        est = PEBS().fit(frame)
    maps = est.maps_
    for rid, status in (("sparse", STATUS_SPARSE), ("flat", STATUS_SINGLE_MODEL_SCORE)):
        j = maps.index_of([rid])[0]
        assert maps.diagnostics["status"][j] == status
        assert maps.slope[j] == pytest.approx(maps.population_slope)
        assert maps.intercept[j] == pytest.approx(maps.population_intercept)
    assert maps.info["n_single_model_score"] == 1
    ols = PerRaterOLS().fit(frame)
    j = ols.maps_.index_of(["flat"])[0]
    assert ols.maps_.slope[j] == pytest.approx(ols.maps_.population_slope)


def test_constant_rater_does_not_get_zero_noise_or_full_weight():
    rng = np.random.default_rng(1)
    rows = [(f"r{j}", str(i), r + rng.normal(0, 0.5), r) for j in range(15) for i, r in enumerate(rng.normal(size=20))]
    rows += [("constant", str(i), 1.0, float(r)) for i, r in enumerate(rng.normal(size=20))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        maps = PEBS().fit(_frame(rows)).maps_
    j = maps.index_of(["constant"])[0]
    assert maps.noise_var[j] > 0
    assert maps.diagnostics["weight_slope"][j] < 1.0
    assert maps.slope[j] > 0  # pulled towards the population slope, not left at 0


# ---------------------------------------------------------------------------------------------- contract


def test_estimators_follow_the_sklearn_contract(simulated):
    _, table = simulated
    for name in CALIBRATORS:
        est = create_calibrator(name, **shared_params(name, group_column="g"))
        assert clone(est).get_params() == est.get_params()
        with pytest.raises(NotFittedError):
            est.predict(["r000000"], np.array([0.0]))
    est = PooledAffine()
    assert est.fit(table) is est
    assert not hasattr(PEBS(), "maps_")


def test_unknown_rater_gets_population_map_and_registry_lists_names(simulated):
    _, table = simulated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        est = PEBS().fit(table)
    pred = est.predict(["nobody"], np.array([2.0]))
    assert pred[0] == pytest.approx(est.maps_.population_slope * 2.0 + est.maps_.population_intercept)
    with pytest.raises(UnknownNameError, match="pebs"):
        create_calibrator("nope")
    with pytest.raises(ConfigError, match="n_min"):
        PEBS(n_min=2).fit(table)


def test_group_affine_fits_one_map_per_group():
    rng = np.random.default_rng(2)
    rows, groups = [], []
    for j in range(10):
        slope = 1.0 if j < 5 else 3.0
        for i, r in enumerate(rng.normal(size=30)):
            rows.append((f"r{j}", str(i), slope * r + rng.normal(0, 0.1), r))
            groups.append("a" if j < 5 else "b")
    frame = _frame(rows).assign(group=groups)
    est = GroupAffine(group_column="group").fit(frame)
    assert est.maps_.slope[0] == pytest.approx(1.0, abs=0.05)
    assert est.maps_.slope[-1] == pytest.approx(3.0, abs=0.05)
    with pytest.raises(ConfigError, match="group_column"):
        GroupAffine().fit(frame)


# ---------------------------------------------------------------------------------------------- offset only


def test_offset_shrinkage_matches_a_hand_computed_case():
    from rewardsmith.calibrate.shrinkage import offset_shrinkage
    from rewardsmith.calibrate.stats import rater_moments

    # Shared slope 2. Rater a: (r, s) = (0, 1), (1, 3), (2, 5) lies on s = 2r + 1 exactly; rater b: (0, 0), (1, 1),
    # (2, 5) has intercept b = mean_s - 2 mean_r = 2 - 2 = 0 and residuals (0, -1, 1) about s = 2r.
    frame = _frame(
        [
            ("a", "1", 1.0, 0.0),
            ("a", "2", 3.0, 1.0),
            ("a", "3", 5.0, 2.0),
            ("b", "1", 0.0, 0.0),
            ("b", "2", 1.0, 1.0),
            ("b", "3", 5.0, 2.0),
        ]
    )
    moments = rater_moments(rater_stats(frame))
    intercept, weight, risk, s2, population, tau2, clipped = offset_shrinkage(moments, 2.0, n_min=3)
    # sigma^2 = RSS / (n - 1): b (0 + 1 + 1) / 2 = 1; a 0, floored at 1% of the median of (0, 1), 0.005
    np.testing.assert_allclose(s2, [0.005, 1.0])
    v = s2 / 3
    assert population == pytest.approx(0.5)  # mean of b_a = 1 and b_b = 0
    assert tau2 == pytest.approx(0.5 - v.mean())  # Var(1, 0) with ddof 1 = 0.5
    w = tau2 / (tau2 + v)
    np.testing.assert_allclose(weight, w)
    np.testing.assert_allclose(intercept, [0.5 + w[0] * 0.5, 0.5 - w[1] * 0.5])
    np.testing.assert_allclose(risk, w**2 * v + (1 - w) ** 2 * tau2)
    assert not clipped


def test_offset_calibrator_keeps_the_pooled_slope_and_recovers_simulated_offsets():
    params = simulate_parameters(200, slope=1.5, intercept=0.5, slope_sd=0.0, intercept_sd=0.8, seed=5)
    frame = simulate_ratings(params, 60, seed=6)
    est = create_calibrator("offset").fit(frame)
    pooled = PooledAffine().fit(frame)
    assert np.allclose(est.maps_.slope, pooled.maps_.population_slope)
    truth = pd.Series(params.intercept, index=params.rater_ids).reindex(est.maps_.rater_ids)
    # Shrunk intercepts track the simulated ones (slopes are equal by design, so offsets are all there is).
    assert np.corrcoef(est.maps_.intercept, truth.to_numpy())[0, 1] > 0.95
    # Pair accuracy is that of the pooled slope's direction: every map is monotone in the model score.
    assert (est.maps_.slope > 0).all()
