"""Label refiners: functions that rewrite the teacher's soft labels before the student trains on them.

LABEL_REFINERS maps a name to a refiner `(teacher_labels, features, settings) -> refined labels`:
teacher_labels (N,) are q_i = P_teacher(chosen preferred) on the W2S pool, features (N, 2, H) are the
PRETRAINED strong model's mean-pooled response representations of (chosen, rejected), and the result is
(N,) refined probabilities in (0, 1).

SEAM ("Strong Empowered and Aligned Weak Mastered") is published as an LLM procedure: the pretrained
strong model writes candidate principles/criteria for each sample in natural language, and the aligned
weak model selects the informative ones, whose verdicts give the final label. A 22M-parameter encoder
writes no text, so `seam` keeps the division of labour and replaces text with directions in the strong
model's representation space:

1. Strong empowered (candidate criteria). The pretrained strong model proposes criteria without any
   labels: the top `seam.criteria` principal directions u_k of the response differences
   delta_i = e(chosen_i) - e(rejected_i) over the W2S pool. A criterion's verdict on pair i is the
   standardised projection s_ik = <delta_i, u_k> / std_k (the sign of u_k is arbitrary; step 2 fixes it).
2. Aligned weak mastered (selection). The weak teacher, the only aligned judge available, selects the
   criteria whose verdicts agree with its own: rank criteria by |corr(s_k, logit q)| and keep the top
   `seam.selected`; the sign of each correlation orients the criterion.
3. Final label. A ridge logistic regression (no intercept; each pair enters in both orientations, so the
   read-out is odd) fitted to the teacher's hard verdicts (q > 0.5) on the selected criteria only: a
   low-capacity read-out whose confidence reflects how well the strong model's criteria separate the teacher's
   verdicts, not the teacher's own, often timid, confidence. It is evaluated out of fold (`seam.folds`
   cross-fitting, so a pair's refined label never comes from a fit that saw its own teacher label) and mixed
   with the teacher in log-odds: logit q' = (1 - seam.mix) logit q + seam.mix * f(s_i).

What is not reproduced: per-sample, instance-specific principles (here the criteria are global
directions shared by all pairs), natural-language explanations, and the weak model reading the
principles (here it only supplies correlations). The refiner is deterministic given its inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from rewardsmith.registry import Registry
from rewardsmith.stats import logit, sigmoid
from rewardsmith.w2s.config import SeamSettings

Refiner = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
LABEL_REFINERS: Registry[Refiner] = Registry("label refiner")

_EPS = 1e-4


def seam_criteria(features: np.ndarray, n_criteria: int) -> np.ndarray:
    """Standardised verdicts (N, K) of the top-K principal directions of chosen-minus-rejected features."""
    delta = (features[:, 0] - features[:, 1]).astype(np.float64)
    centred = delta - delta.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(n_criteria, vt.shape[0])
    scores = delta @ vt[:k].T  # not centred: a verdict of 0 means "no preference along this criterion"
    return scores / (scores.std(axis=0) + 1e-12)


class CriteriaSelector(BaseEstimator, TransformerMixin):
    """Keeps the n_selected criteria (columns) most correlated with logit(q), each turned to agree with it.

    fit(X, y, q): X (N, K) verdicts, q (N,) teacher probabilities (y, the hard labels, is not used here).
    Learned state: columns_ (n_selected,) indices, signs_ (n_selected,) +1 / -1.
    """

    def __init__(self, n_selected: int = 8):
        self.n_selected = n_selected

    def fit(self, X: np.ndarray, y: Any = None, q: np.ndarray | None = None) -> CriteriaSelector:
        if q is None:
            raise ValueError("CriteriaSelector.fit needs the teacher probabilities q")
        self.columns_, self.signs_ = select_criteria(np.asarray(X), np.asarray(q), self.n_selected)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "columns_")
        return np.asarray(X)[:, self.columns_] * self.signs_


def select_criteria(verdicts: np.ndarray, teacher_labels: np.ndarray, n_selected: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the n_selected criteria most correlated with logit(q), and their signs (+1 / -1)."""
    target = logit(teacher_labels, _EPS)
    target = target - target.mean()
    v = verdicts - verdicts.mean(axis=0)
    corr = (v * target[:, None]).sum(axis=0) / (np.sqrt((v**2).sum(axis=0) * (target**2).sum()) + 1e-12)
    order = np.argsort(-np.abs(corr))[:n_selected]
    return order, np.sign(corr[order]) + (corr[order] == 0)


def seam_refine(teacher_labels: np.ndarray, features: np.ndarray, settings: SeamSettings | None = None) -> np.ndarray:
    """SEAM approximation (module docstring). teacher_labels (N,), features (N, 2, H) -> refined (N,).

    The read-out is scikit-learn's LogisticRegression (L2, C = 1 / l2, no intercept) on the selected criteria,
    fitted to the teacher's hard verdicts. A preference is antisymmetric, so every pair also enters with its
    sides exchanged (verdicts negated, verdict flipped): both classes are always present and the read-out is an
    odd function of the verdicts. cross_val_predict gives each pair the read-out of a fit that saw neither
    orientation of it (interleaved folds: pair i in fold i mod folds)."""
    s = settings if settings is not None else SeamSettings()
    q = np.asarray(teacher_labels, dtype=np.float64)
    verdicts = seam_criteria(np.asarray(features), s.criteria)
    n = q.shape[0]
    folds = max(2, min(s.folds, n))
    fold_of = np.tile(np.arange(n) % folds, 2)
    cv = [(np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)) for f in range(folds)]
    both = np.vstack([verdicts, -verdicts])
    hard = (np.concatenate([q, 1.0 - q]) > 0.5).astype(int)
    pipeline = Pipeline(
        [
            ("select", CriteriaSelector(s.selected)),
            ("readout", LogisticRegression(C=1.0 / s.l2, fit_intercept=False, max_iter=1000)),
        ]
    )
    read_out = cross_val_predict(
        pipeline, both, hard, cv=cv, method="decision_function", params={"select__q": np.concatenate([q, 1.0 - q])}
    )[:n]
    return sigmoid((1.0 - s.mix) * logit(q, _EPS) + s.mix * read_out)


LABEL_REFINERS.add("seam", seam_refine)


def keep_teacher_labels(teacher_labels: np.ndarray, features: np.ndarray, settings: Any = None) -> np.ndarray:
    """The identity refiner: the teacher's labels unchanged."""
    return np.asarray(teacher_labels, dtype=np.float64)


LABEL_REFINERS.add("none", keep_teacher_labels)
