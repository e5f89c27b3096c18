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
   labels: the top `seam_criteria` principal directions u_k of the response differences
   delta_i = e(chosen_i) - e(rejected_i) over the W2S pool. A criterion's verdict on pair i is the
   standardised projection s_ik = <delta_i, u_k> / std_k (the sign of u_k is arbitrary; step 2 fixes it).
2. Aligned weak mastered (selection). The weak teacher, the only aligned judge available, selects the
   criteria whose verdicts agree with its own: rank criteria by |corr(s_k, logit q)| and keep the top
   `seam_selected`; the sign of each correlation orients the criterion.
3. Final label. A ridge logistic regression fitted to the teacher's hard verdicts (q > 0.5) on the
   selected criteria only (a low-capacity read-out whose confidence reflects how well the strong
   model's criteria separate the teacher's verdicts, not the teacher's own, often timid, confidence),
   evaluated out of fold (`seam_folds`
   cross-fitting, so a pair's refined label never comes from a fit that saw its own teacher label), and
   mixed with the teacher in log-odds: logit q' = (1 - seam_mix) logit q + seam_mix * f(s_i).

What is not reproduced: per-sample, instance-specific principles (here the criteria are global
directions shared by all pairs), natural-language explanations, and the weak model reading the
principles (here it only supplies correlations). The refiner is deterministic given its inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewardsmith.registry import Registry

Refiner = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
LABEL_REFINERS: Registry[Refiner] = Registry("label refiner")

_EPS = 1e-4


@dataclass
class SeamSettings:
    seam_criteria: int = 32
    seam_selected: int = 8
    seam_mix: float = 0.5
    seam_folds: int = 5
    seam_l2: float = 1.0


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _EPS, 1.0 - _EPS)
    return np.log(p) - np.log1p(-p)


def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, iters: int = 200) -> np.ndarray:
    """Ridge logistic regression on soft targets y (N,) by Newton steps; x (N, K). Returns (K + 1,) with
    the intercept last."""
    xb = np.hstack([x, np.ones((x.shape[0], 1))])
    w = np.zeros(xb.shape[1])
    reg = l2 * np.eye(xb.shape[1])
    reg[-1, -1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-xb @ w))
        grad = xb.T @ (p - y) + reg @ w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + reg + 1e-9 * np.eye(xb.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def seam_criteria(features: np.ndarray, n_criteria: int) -> np.ndarray:
    """Standardised verdicts (N, K) of the top-K principal directions of chosen-minus-rejected features."""
    delta = (features[:, 0] - features[:, 1]).astype(np.float64)
    centred = delta - delta.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(n_criteria, vt.shape[0])
    scores = delta @ vt[:k].T  # not centred: a verdict of 0 means "no preference along this criterion"
    return scores / (scores.std(axis=0) + 1e-12)


def select_criteria(verdicts: np.ndarray, teacher_labels: np.ndarray, n_selected: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the n_selected criteria most correlated with logit(q), and their signs (+1 / -1)."""
    target = _logit(teacher_labels)
    target = target - target.mean()
    v = verdicts - verdicts.mean(axis=0)
    corr = (v * target[:, None]).sum(axis=0) / (np.sqrt((v**2).sum(axis=0) * (target**2).sum()) + 1e-12)
    order = np.argsort(-np.abs(corr))[:n_selected]
    return order, np.sign(corr[order]) + (corr[order] == 0)


def seam_refine(teacher_labels: np.ndarray, features: np.ndarray, settings: Any = None) -> np.ndarray:
    """SEAM approximation (module docstring). teacher_labels (N,), features (N, 2, H) -> refined (N,)."""
    s = settings if settings is not None else SeamSettings()
    q = np.asarray(teacher_labels, dtype=np.float64)
    verdicts = seam_criteria(np.asarray(features), s.seam_criteria)
    n = q.shape[0]
    folds = max(2, min(s.seam_folds, n))
    fold_of = np.arange(n) % folds
    read_out = np.zeros(n)
    for f in range(folds):
        train, held = fold_of != f, fold_of == f
        idx, signs = select_criteria(verdicts[train], q[train], s.seam_selected)
        x_train = verdicts[train][:, idx] * signs
        w = _fit_logistic(x_train, (q[train] > 0.5).astype(np.float64), s.seam_l2)
        read_out[held] = (verdicts[held][:, idx] * signs) @ w[:-1] + w[-1]
    refined = (1.0 - s.seam_mix) * _logit(q) + s.seam_mix * read_out
    return 1.0 / (1.0 + np.exp(-refined))


LABEL_REFINERS.add("seam", seam_refine)


def keep_teacher_labels(teacher_labels: np.ndarray, features: np.ndarray, settings: Any = None) -> np.ndarray:
    """The identity refiner: the teacher's labels unchanged."""
    return np.asarray(teacher_labels, dtype=np.float64)


LABEL_REFINERS.add("none", keep_teacher_labels)
