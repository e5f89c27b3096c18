"""Weak teachers and the calibration of their soft labels.

A teacher is fitted on the gold pool and gives a margin m = r(chosen) - r(rejected) for any pair. Two kinds:

- `model`: a rewardsmith reward model (a probe on a few MiniLM layers, or a small fine-tuned model) trained with
  the shared Trainer (the pipeline builds it; here only its margins are used);
- `tfidf`: a linear model on TF-IDF features of the two responses (their difference, plus the difference of
  their log lengths), fitted by scikit-learn's LogisticRegression on both orientations of every gold pair. It
  reads words and length, nothing else: a genuinely weak teacher with signal.

Soft labels q = sigmoid(m / T). The temperature T is fitted by cross-fitting on the gold pool: K teachers, each
fitted on K - 1 folds, give every gold pair an out-of-fold margin; T minimises the negative log-likelihood of
the gold preferences under sigmoid(m / T). The teacher fitted on all gold pairs then labels the W2S pool with
that T, so its confidence matches its accuracy (the labels' ECE is reported before and after).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.sparse import csr_matrix, hstack

from rewardsmith.data.schema import PreferencePair
from rewardsmith.evaluate.metrics import expected_calibration_error
from rewardsmith.stats import sigmoid
from rewardsmith.w2s.config import TfidfSettings

# (gold pairs to fit on, pairs to score) -> margins (len(score_pairs),)
FitAndScore = Callable[[Sequence[PreferencePair], Sequence[PreferencePair]], np.ndarray]


def _texts(pairs: Sequence[PreferencePair]) -> tuple[list[str], list[str]]:
    return [p.chosen for p in pairs], [p.rejected for p in pairs]


class TfidfTeacher:
    """Logistic regression on [tfidf(chosen) - tfidf(rejected), log len(chosen) - log len(rejected)] (the length
    term only with settings.length_feature).

    fit(pairs) -> self; margins(pairs) -> (N,) decision values (positive: chosen preferred). Learned state:
    vectorizer_, model_.
    """

    def __init__(self, settings: TfidfSettings | None = None):
        self.settings = settings or TfidfSettings()

    def _features(self, pairs: Sequence[PreferencePair]) -> csr_matrix:
        chosen, rejected = _texts(pairs)
        diff = self.vectorizer_.transform(chosen) - self.vectorizer_.transform(rejected)
        if not self.settings.length_feature:
            return csr_matrix(diff)
        length = np.log1p([len(c) for c in chosen]) - np.log1p([len(r) for r in rejected])
        return hstack([diff, csr_matrix(length[:, None])]).tocsr()

    def fit(self, pairs: Sequence[PreferencePair]) -> TfidfTeacher:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        chosen, rejected = _texts(pairs)
        s = self.settings
        self.vectorizer_ = TfidfVectorizer(
            max_features=s.max_features, ngram_range=(1, s.max_ngram), sublinear_tf=True, min_df=2
        ).fit(chosen + rejected)
        x = self._features(pairs)
        both = _vstack(x, -x)
        y = np.r_[np.ones(x.shape[0]), np.zeros(x.shape[0])]
        self.model_ = LogisticRegression(C=s.c, fit_intercept=False, max_iter=2000).fit(both, y)
        return self

    def margins(self, pairs: Sequence[PreferencePair]) -> np.ndarray:
        return np.asarray(self.model_.decision_function(self._features(pairs)), dtype=np.float64)


def _vstack(a: csr_matrix, b: csr_matrix) -> csr_matrix:
    from scipy.sparse import vstack

    return vstack([a, b]).tocsr()


def tfidf_fit_and_score(settings: TfidfSettings) -> FitAndScore:
    return lambda gold, pairs: TfidfTeacher(settings).fit(gold).margins(pairs)


def fit_temperature(margins: np.ndarray) -> float:
    """T > 0 minimising mean softplus(-m / T): the NLL of gold preferences under sigmoid(m / T).
    margins: (N,) out-of-fold margins of gold pairs (chosen preferred). Bounded to T in [e^-4, e^6]."""
    m = np.asarray(margins, dtype=np.float64)

    def nll(log_t: float) -> float:
        return float(np.mean(np.logaddexp(0.0, -m / np.exp(log_t))))

    return float(np.exp(minimize_scalar(nll, bounds=(-4.0, 6.0), method="bounded").x))


@dataclass
class CalibratedLabels:
    """The W2S pool's soft labels and how they were calibrated."""

    labels: np.ndarray  # (N,) q = sigmoid(m / T)
    raw_labels: np.ndarray  # (N,) sigmoid(m)
    temperature: float
    out_of_fold_accuracy: float  # % of gold pairs the cross-fitted teachers got right
    facts: dict[str, Any]


def cross_fitted_temperature(
    gold: Sequence[PreferencePair], fit_and_score: FitAndScore, folds: int = 5, seed: int = 0
) -> tuple[float, np.ndarray]:
    """(T, out-of-fold margins (len(gold),)) from `folds` teachers each fitted on the other folds."""
    order = np.random.default_rng(seed).permutation(len(gold))
    fold_of = np.empty(len(gold), dtype=int)
    fold_of[order] = np.arange(len(gold)) % folds
    oof = np.zeros(len(gold))
    for f in range(folds):
        train = [gold[int(i)] for i in np.flatnonzero(fold_of != f)]
        held = np.flatnonzero(fold_of == f)
        oof[held] = fit_and_score(train, [gold[int(i)] for i in held])
    return fit_temperature(oof), oof


def calibrate_labels(w2s_margins: np.ndarray, temperature: float, oof_margins: np.ndarray) -> CalibratedLabels:
    """Soft labels of the W2S pool at temperature T, with the gold-pool facts that chose T."""
    raw = sigmoid(w2s_margins)
    q = sigmoid(w2s_margins / temperature)
    oof_q = sigmoid(oof_margins / temperature)
    facts = {
        "temperature": temperature,
        "gold_out_of_fold_accuracy": float(np.mean(oof_margins > 0) * 100.0),
        "gold_out_of_fold_ece_raw": expected_calibration_error(sigmoid(oof_margins)),
        "gold_out_of_fold_ece_calibrated": expected_calibration_error(oof_q),
    }
    return CalibratedLabels(q, raw, temperature, facts["gold_out_of_fold_accuracy"], facts)
