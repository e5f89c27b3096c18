"""Weak teachers and their label calibration: the TF-IDF teacher learns word preferences, the cross-fitted
temperature makes over-confident labels honest, and a fitted temperature recovers a known one."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rewardsmith.data.schema import PreferencePair, user_prompt
from rewardsmith.stats import sigmoid
from rewardsmith.w2s.config import TfidfSettings
from rewardsmith.w2s.teachers import (
    TfidfTeacher,
    calibrate_labels,
    cross_fitted_temperature,
    fit_temperature,
    tfidf_fit_and_score,
)

GOOD = ["helpful", "careful", "kind", "accurate", "patient", "clear"]
BAD = ["rude", "careless", "wrong", "lazy", "vague", "mean"]
FILLER = ["the", "a", "answer", "is", "here", "and", "so", "it", "goes", "then"]


def _pairs(n: int, seed: int, noise: float = 0.0) -> list[PreferencePair]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        good = " ".join([*rng.choices(FILLER, k=6), rng.choice(GOOD)])
        bad = " ".join([*rng.choices(FILLER, k=6), rng.choice(BAD)])
        if rng.random() < noise:
            good, bad = bad, good
        out.append(PreferencePair(user_prompt(f"q{i}"), good, bad, pair_id=str(i)))
    return out


def test_tfidf_teacher_learns_word_preferences_and_is_antisymmetric() -> None:
    teacher = TfidfTeacher(TfidfSettings(max_ngram=1)).fit(_pairs(200, 0))
    test = _pairs(100, 1)
    m = teacher.margins(test)
    assert np.mean(m > 0) > 0.95
    swapped = teacher.margins([p.swapped() for p in test])
    np.testing.assert_allclose(swapped, -m, atol=1e-9)


def test_fitted_temperature_recovers_a_known_one() -> None:
    rng = np.random.default_rng(0)
    true_margin = rng.normal(0.0, 2.0, 20000)
    won = rng.random(true_margin.size) < sigmoid(true_margin)
    oriented = np.where(won, true_margin, -true_margin)  # margins of the preferred side, as gold pairs give them
    assert fit_temperature(3.0 * oriented) == pytest.approx(3.0, rel=0.05)


def test_cross_fitting_tames_an_overconfident_teacher() -> None:
    gold = _pairs(300, 2, noise=0.25)  # a quarter of the gold labels contradict the words
    fit = tfidf_fit_and_score(TfidfSettings(max_ngram=1, c=100.0))
    temperature, oof = cross_fitted_temperature(gold, fit, folds=5)
    labels = calibrate_labels(fit(gold, _pairs(200, 3)), temperature, oof)
    assert temperature > 1.0
    assert labels.facts["gold_out_of_fold_ece_calibrated"] < labels.facts["gold_out_of_fold_ece_raw"]
    assert np.mean(np.maximum(labels.labels, 1 - labels.labels)) < np.mean(
        np.maximum(labels.raw_labels, 1 - labels.raw_labels)
    )
