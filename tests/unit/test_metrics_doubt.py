"""Is a model's doubt worth anything (rewardsmith.evaluate.metrics): selective accuracy and the error AUROC."""

from __future__ import annotations

import numpy as np
import pytest

from rewardsmith.data.schema import PreferencePair, Turn
from rewardsmith.evaluate.metrics import doubt_block, error_auroc, selective_accuracy
from rewardsmith.evaluate.protocols import accuracy_block


def test_a_doubt_that_ranks_every_error_first_has_auroc_one_and_keeps_the_sure_pairs() -> None:
    correct = np.array([1, 1, 1, 1, 0, 0, 1, 0.5, 1, 1], dtype=float)
    doubt = np.array([0.1, 0.2, 0.0, 0.3, 0.9, 0.8, 0.4, 0.45, 0.35, 0.25])  # the tie (0.5) is not an error
    assert error_auroc(correct, doubt, n_boot=50).estimate == 1.0
    assert error_auroc(correct, -doubt, n_boot=50).estimate == 0.0
    sel = selective_accuracy(correct, doubt, n_boot=50)
    assert sel["0.5"]["accuracy"] == 100.0 and sel["1"]["accuracy"] == pytest.approx(100 * correct.mean())
    assert sel["0.8"]["accuracy"] == pytest.approx(100 * 7.5 / 8)  # the 8 least doubted: 7 correct and the tie
    # Ties in doubt count one half; a doubt that says nothing sits near 0.5.
    assert error_auroc(correct, np.zeros(10), n_boot=10).estimate == 0.5
    rng = np.random.default_rng(0)
    noise = error_auroc(rng.random(4000) > 0.3, rng.random(4000), n_boot=200)
    assert noise.low < 0.5 < noise.high
    # Nothing to tell apart: no errors.
    assert np.isnan(error_auroc(np.ones(5), np.arange(5.0), n_boot=10).estimate)


def test_the_accuracy_block_judges_minus_the_margin_by_default_and_soft_labels_drop_ties() -> None:
    prompt = (Turn("user", "q"),)
    pairs = [PreferencePair(prompt, f"a{i}", f"b{i}", 1.0) for i in range(6)]
    margins = np.array([3.0, 2.0, 1.0, -0.1, 0.5, -0.2])
    block = accuracy_block(margins, pairs, n_boot=50)
    assert block["doubt"]["kind"] == "-|margin|" and block["doubt"]["error_auroc"] == 1.0
    labelled = [PreferencePair(prompt, f"a{i}", f"b{i}", label) for i, label in enumerate([1, 1, 0.5, 0, 1, 1])]
    given = accuracy_block(margins, labelled, n_boot=50, doubt=np.arange(6.0))
    assert given["doubt"]["kind"] == "members' sd of the margin"
    # Pair 2 (label 0.5) is dropped; pair 3 (label 0, margin -0.1) is right; pair 5 is wrong.
    assert given["doubt"]["selective"]["1"]["accuracy"] == pytest.approx(100 * 4 / 5)
    assert doubt_block([1.0, 0.0], [0.0, 1.0], "x", n_boot=10)["error_auroc"] == 1.0


def test_the_auroc_difference_is_the_difference_of_the_two_aurocs_with_a_joint_ci() -> None:
    from rewardsmith.evaluate.metrics import error_auroc, error_auroc_difference

    rng = np.random.default_rng(3)
    correct_a, correct_b = (rng.random(300) < 0.7).astype(float), (rng.random(300) < 0.6).astype(float)
    informed = (1 - correct_a) + rng.normal(0, 0.8, 300)  # a's doubt knows its errors; b's is noise
    noise = rng.normal(0, 1, 300)
    diff = error_auroc_difference(correct_a, informed, correct_b, noise, n_boot=300)
    a, b = error_auroc(correct_a, informed, n_boot=0), error_auroc(correct_b, noise, n_boot=0)
    assert diff.estimate == pytest.approx(a.estimate - b.estimate) and diff.n == 300
    assert 0 < diff.low < diff.estimate < diff.high  # informed doubt beats noise, and the CI says so
    same = error_auroc_difference(correct_a, informed, correct_a, informed, n_boot=100)
    assert same.estimate == 0 and same.low == 0 and same.high == 0
