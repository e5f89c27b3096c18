"""WRG / AOG / NTS / PGR on hand-built correctness vectors, per-seed averaging, the hierarchical bootstrap
(seeds, then pairs) and the pairing of its CIs, and length control recomputed in every replicate."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rewardsmith.evaluate.transfer import (
    net_transfer_score,
    paired_differences,
    performance_gap_recovered,
    transfer_metrics,
)


def _vec(n_right: int, n: int) -> np.ndarray:
    return np.arange(n) < n_right


@pytest.fixture
def correct() -> dict[str, dict[str, np.ndarray]]:
    # ID 10 pairs, target t1 5 pairs, target t2 4 pairs.
    return {
        "teacher": {"id": _vec(6, 10), "t1": _vec(3, 5), "t2": _vec(2, 4)},  # 60, 60, 50
        "student": {"id": _vec(7, 10), "t1": _vec(4, 5), "t2": _vec(1, 4)},  # 70, 80, 25
        "naive": {"id": _vec(5, 10), "t1": _vec(4, 5), "t2": _vec(2, 4)},  # 50, 80, 50
        "ceiling": {"id": _vec(9, 10), "t1": _vec(5, 5), "t2": _vec(3, 4)},  # 90, 100, 75
    }


def test_known_answers(correct: dict[str, dict[str, np.ndarray]]) -> None:
    out = transfer_metrics(correct, n_boot=200)
    s = out["student"]
    assert s["id_acc"] == pytest.approx(70.0)
    assert s["ood_acc.t1"] == pytest.approx(80.0)
    assert s["wrg"] == pytest.approx(10.0)
    assert s["aog.t1"] == pytest.approx(20.0)
    assert s["nts.t1"] == pytest.approx(20.0)  # no ID loss: NTS = AOG
    assert s["aog.t2"] == pytest.approx(-25.0)
    assert s["nts.t2"] == pytest.approx(-25.0)
    assert s["pgr.id"] == pytest.approx(10 / 30)
    assert s["pgr.t1"] == pytest.approx(20 / 40)
    assert s["pgr.t2"] == pytest.approx(-25 / 25)
    assert s["n.id"] == 10 and s["n.t1"] == 5
    n = out["naive"]
    assert n["wrg"] == pytest.approx(-10.0)
    assert n["aog.t1"] == pytest.approx(20.0)
    assert n["nts.t1"] == pytest.approx(10.0)  # AOG 20 minus the 10-point ID loss
    assert n["nts.t2"] == pytest.approx(-10.0)
    assert out["ceiling"]["pgr.id"] == pytest.approx(1.0)
    teacher = out["teacher"]
    assert teacher["id_acc"] == pytest.approx(60.0) and "wrg" not in teacher
    json.dumps(out, allow_nan=False)


def test_every_value_has_a_ci_containing_it(correct: dict[str, dict[str, np.ndarray]]) -> None:
    out = transfer_metrics(correct, n_boot=300, seed=1)
    for model, block in out.items():
        for key, value in block.items():
            if key.startswith("n.") or key == "n_seeds" or key.endswith(("_ci", "_undefined", "_seed_std")):
                continue
            low, high = block[f"{key}_ci"]
            assert low - 1e-9 <= value <= high + 1e-9, (model, key)


def test_models_share_resampled_pairs() -> None:
    rng = np.random.default_rng(0)
    teacher_id, target = rng.random(80) < 0.6, rng.random(60) < 0.5
    # The student is right wherever the teacher is on ID, so it never trails in any replicate:
    # NTS replicates equal AOG replicates, and an identical target vector gives AOG exactly 0.
    student_id = teacher_id | (rng.random(80) < 0.3)
    out = transfer_metrics(
        {"teacher": {"id": teacher_id, "t": target}, "student": {"id": student_id, "t": target}},
        ceiling=None,
        n_boot=300,
    )
    s = out["student"]
    assert s["aog.t_ci"] == [0.0, 0.0]
    assert s["nts.t_ci"] == s["aog.t_ci"]
    assert "pgr.id" not in s


def test_nts_ci_resamples_id_and_target_jointly() -> None:
    rng = np.random.default_rng(1)
    data = {
        "teacher": {"id": rng.random(100) < 0.7, "t": rng.random(100) < 0.5},
        "student": {"id": rng.random(100) < 0.6, "t": rng.random(100) < 0.6},
    }
    s = transfer_metrics(data, ceiling=None, n_boot=400)["student"]
    # The ID penalty varies across replicates, so NTS is shifted down and wider than AOG.
    assert s["nts.t"] < s["aog.t"]
    assert s["nts.t_ci"][1] - s["nts.t_ci"][0] > s["aog.t_ci"][1] - s["aog.t_ci"][0]


def test_pgr_guard_on_tiny_gap(correct: dict[str, dict[str, np.ndarray]]) -> None:
    correct["ceiling"]["t2"] = correct["teacher"]["t2"].copy()
    s = transfer_metrics(correct, n_boot=100)["student"]
    assert s["pgr.t2"] is None and s["pgr.t2_ci"] == [None, None]
    assert s["pgr.t2_undefined"] is True
    assert s["pgr.t1_undefined"] is False
    assert math.isnan(performance_gap_recovered(70.0, 60.0, 60.5))
    assert performance_gap_recovered(70.0, 60.0, 60.5, min_gap=0.1) == pytest.approx(20.0)
    # A ceiling below the teacher leaves no gap to recover, whatever its size.
    assert math.isnan(performance_gap_recovered(50.0, 60.0, 55.0))


def test_scalar_functions_broadcast() -> None:
    nts = net_transfer_score(np.array([80.0, 80.0]), 60.0, np.array([70.0, 50.0]), 60.0)
    np.testing.assert_allclose(nts, [20.0, 10.0])


def test_input_checks(correct: dict[str, dict[str, np.ndarray]]) -> None:
    with pytest.raises(ValueError, match="teacher"):
        transfer_metrics(correct, teacher="weak")
    correct["student"]["t1"] = np.ones(7, dtype=bool)
    with pytest.raises(ValueError, match="7 pairs"):
        transfer_metrics(correct)


def test_seeds_are_averaged_per_seed(correct: dict[str, dict[str, np.ndarray]]) -> None:
    # Student seeds: ID 50 and 70 (teacher 60), target t1 80 both times. Per seed NTS = 20 - 10 and 20 - 0,
    # averaged 15; NTS of the seed-averaged student (ID 60) would be 20.
    correct["student"] = {
        "id": np.stack([_vec(5, 10), _vec(7, 10)]),
        "t1": np.stack([_vec(4, 5), _vec(4, 5)]),
        "t2": np.stack([_vec(2, 4), _vec(2, 4)]),
    }
    s = transfer_metrics(correct, n_boot=200)["student"]
    assert s["n_seeds"] == 2
    assert s["wrg"] == pytest.approx(0.0)
    assert s["wrg_seed_std"] == pytest.approx(math.sqrt(200))
    assert s["nts.t1"] == pytest.approx(15.0)
    json.dumps(s, allow_nan=False)


def test_seed_variance_widens_the_interval() -> None:
    rng = np.random.default_rng(3)
    teacher = {"id": rng.random(400) < 0.6}
    steady = np.stack([rng.random(400) < 0.65 for _ in range(5)])
    erratic = np.stack([rng.random(400) < p for p in (0.35, 0.9, 0.4, 0.85, 0.7)])
    out = transfer_metrics(
        {"teacher": teacher, "steady": {"id": steady}, "erratic": {"id": erratic}}, ceiling=None, n_boot=500
    )
    width = {m: out[m]["id_acc_ci"][1] - out[m]["id_acc_ci"][0] for m in ("steady", "erratic")}
    assert width["erratic"] > 3 * width["steady"]


def test_length_controlled_intervals_stay_inside_0_100() -> None:
    # A model right on every chosen-longer pair, with only three chosen-shorter pairs: the old fixed-weight
    # bootstrap printed intervals above 100 here; recomputing both groups per replicate cannot.
    n = 60
    chosen_len = np.r_[np.full(57, 200.0), np.full(3, 50.0)]
    rejected_len = np.full(n, 100.0)
    correct = {"teacher": {"id": np.ones(n, dtype=bool)}, "student": {"id": np.r_[np.ones(57), np.ones(3)]}}
    out = transfer_metrics(correct, ceiling=None, lengths={"id": (chosen_len, rejected_len)}, n_boot=500)
    for model in ("teacher", "student"):
        low, high = out[model]["id_acc_ci"]
        assert out[model]["id_acc"] == pytest.approx(100.0)
        assert 0.0 <= low <= high <= 100.0


def test_paired_differences_flag_significance() -> None:
    rng = np.random.default_rng(4)
    base = np.stack([rng.random(300) < 0.6 for _ in range(3)])
    better = np.stack([b | (rng.random(300) < 0.5) for b in base])
    same = np.stack([rng.random(300) < 0.6 for _ in range(3)])
    out = paired_differences(
        {"naive": {"id": base}, "better": {"id": better}, "same": {"id": same}}, "naive", n_boot=500
    )
    assert out["better"]["d.id"] > 0 and out["better"]["significant.id"] is True
    low, high = out["same"]["d.id_ci"]
    assert (low < 0 < high) is (not out["same"]["significant.id"])


def test_mean_of_differences_over_splits_keeps_seeds_together() -> None:
    """A seed that is good on every split is drawn as one: the CI of the mean over splits reflects that
    seed variance (it does not average away as independent draws per split would)."""
    rng = np.random.default_rng(5)
    splits = ("a", "b", "c", "d")
    base = {s: np.stack([rng.random(400) < 0.6 for _ in range(3)]) for s in splits}
    # Seed 0 of the model is much better on every split, seeds 1 and 2 equal to the base: a seed effect.
    model = {s: np.stack([base[s][0] | (rng.random(400) < 0.6), base[s][1], base[s][2]]) for s in splits}
    out = paired_differences({"base": base, "model": model}, "base", n_boot=800, means={"all": splits})["model"]
    assert out["d.all"] == pytest.approx(np.mean([out[f"d.{s}"] for s in splits]))
    low, high = out["d.all_ci"]
    assert low <= out["d.all"] <= high
    # With three seeds and one of them carrying the whole effect, the mean's CI reaches down near 0.
    assert low < 0.25 * out["d.all"]
    with pytest.raises(ValueError, match="same seeds"):
        paired_differences({"base": base, "model": {"a": model["a"], "b": model["b"][:2]}}, "base", n_boot=10)


def _seed_effects(n: int = 300) -> dict[str, dict[str, np.ndarray]]:
    """Three seeds far apart (per-pair values around 0.2, 0.5 and 0.8 on both splits) shared by naive and anchor;
    anchor is naive plus exactly 0.1 on every pair of every seed, so anchor - naive is 10 points in every seed, on
    every pair and in any resample that draws the same seeds and pairs for both."""
    rng = np.random.default_rng(7)
    naive = {s: np.clip(np.array([[0.2], [0.5], [0.8]]) + 0.05 * rng.standard_normal((3, n)), 0, 0.9) for s in "ab"}
    anchor = {s: v + 0.1 for s, v in naive.items()}
    return {"teacher": {s: np.full(n, 0.5) for s in "ab"}, "naive": naive, "anchor": anchor}


def test_differences_are_paired_over_seeds_and_pairs() -> None:
    """Known answer: a constant per-pair shift gives the degenerate interval [10, 10]. Resampling the seeds of each
    model on its own would set seed 0.2 of one beside seed 0.8 of the other and give an interval tens of points wide
    (each model's own accuracy interval shows that spread), so this fails if seeds are drawn independently."""
    correct = _seed_effects()
    diff = paired_differences(correct, "naive", n_boot=400, means={"both": ("a", "b")})["anchor"]
    for key in ("d.a", "d.b", "d.both"):
        assert diff[key] == pytest.approx(10.0)
        assert diff[f"{key}_ci"] == [pytest.approx(10.0), pytest.approx(10.0)]
    assert diff["significant.a"] is True
    own = transfer_metrics(correct, ceiling=None, id_split="a", n_boot=400)
    for model in ("naive", "anchor"):
        low, high = own[model]["id_acc_ci"]
        assert high - low > 20.0  # the seeds' spread: unpaired, the difference could not be narrower than this


def test_claim_contrasts_are_paired_over_seeds() -> None:
    """The contrasts of the W2S claims use the same draws: WRG of anchor minus WRG of naive is the constant shift."""
    from rewardsmith.w2s.metrics import _draws

    correct = _seed_effects()
    correct = {m: {"id" if s == "a" else "t": v for s, v in c.items()} for m, c in correct.items()}
    point, reps, pairs = _draws(correct, 300, 0)
    np.testing.assert_allclose(reps["anchor"]["wrg"] - reps["naive"]["wrg"], 10.0)
    assert point["anchor"]["aog.t"] - point["naive"]["aog.t"] == pytest.approx(10.0)
    assert pairs == {"wrg": 300, "aog.t": 300, "nts.t": 300}


def test_a_one_seed_model_counts_its_seed_once() -> None:
    """The teacher fills every seed slot to be compared slot by slot, but its own accuracy interval is that of its one
    seed: the plain bootstrap over pairs, not an average of three pair draws (which would be about sqrt(3) narrower)."""
    rng = np.random.default_rng(2)
    teacher = rng.random(400) < 0.6
    students = np.stack([rng.random(400) < 0.6 for _ in range(3)])
    out = transfer_metrics({"teacher": {"id": teacher}, "s": {"id": students}}, ceiling=None, n_boot=2000)
    low, high = out["teacher"]["id_acc_ci"]
    p = teacher.mean()
    plain = 2 * 1.96 * 100 * np.sqrt(p * (1 - p) / 400)  # the normal interval's width for one seed of 400 pairs
    assert high - low == pytest.approx(plain, rel=0.15)


def test_models_with_different_seeds_are_refused() -> None:
    correct = {"teacher": {"id": np.ones(20)}, "a": {"id": np.ones((3, 20))}, "b": {"id": np.ones((2, 20))}}
    with pytest.raises(ValueError, match="same seeds"):
        transfer_metrics(correct, ceiling=None, n_boot=10)
