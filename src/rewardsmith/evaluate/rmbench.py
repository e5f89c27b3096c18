"""RM-Bench style-substance accuracy matrix ("RM-Bench: Benchmarking Reward Models of
Language Models with Subtlety and Style", arXiv:2410.16184, section 3.3).

Each prompt has three chosen and three rejected responses in the same three styles, indexed
0 = concise, 1 = detailed plain text, 2 = detailed markdown. The 3x3 matrix is

    M[i, j] = mean over prompts of [score(chosen_i) > score(rejected_j)]

with rows the chosen style and columns the rejected style (the layout of the paper's Figure 3 and of its
reference implementation). Then
- normal = mean of the diagonal (chosen and rejected in the same style),
- hard = mean of the strict upper-right triangle, i < j: the chosen response is less styled than the
  rejected one (e.g. a concise correct answer against a detailed markdown wrong one), so a style bias
  works against the right answer,
- easy = mean of the strict lower-left triangle, i > j: the chosen response is the more styled one,
- avg = mean of all nine cells (equal to the mean of easy, normal and hard).
As in the reference implementation a tied score counts as wrong (tie_credit = 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewardsmith.evaluate.metrics import bootstrap_indices, json_float, percentile_interval

STYLE_NAMES: tuple[str, str, str] = ("concise", "detailed_plain", "detailed_markdown")


def rmbench_pair_matrix(
    chosen_scores: ArrayLike, rejected_scores: ArrayLike, tie_credit: float = 0.0
) -> NDArray[np.float64]:
    """Per-prompt comparison tensor C[n, i, j] = 1 if chosen_i beats rejected_j, `tie_credit` if equal,
    else 0. chosen_scores, rejected_scores: (N, S) with S style levels. Returns (N, S, S)."""
    chosen = np.asarray(chosen_scores, dtype=np.float64)
    rejected = np.asarray(rejected_scores, dtype=np.float64)
    if chosen.ndim != 2 or chosen.shape != rejected.shape:
        raise ValueError(f"expected two (N, S) arrays of equal shape, got {chosen.shape} and {rejected.shape}")
    diff = chosen[:, :, None] - rejected[:, None, :]
    return np.where(diff > 0, 1.0, np.where(diff < 0, 0.0, tie_credit))


def _summaries(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """(easy, normal, hard, avg) from accuracy matrices (..., S, S). Returns (..., 4)."""
    size = matrix.shape[-1]
    upper = np.triu(np.ones((size, size), dtype=bool), k=1)
    n_off = size * (size - 1) / 2
    hard = (matrix * upper).sum(axis=(-2, -1)) / n_off
    easy = (matrix * upper.T).sum(axis=(-2, -1)) / n_off
    normal = np.diagonal(matrix, axis1=-2, axis2=-1).mean(axis=-1)
    avg = matrix.mean(axis=(-2, -1))
    return np.stack([easy, normal, hard, avg], axis=-1)


def rmbench_accuracy(
    chosen_scores: ArrayLike,
    rejected_scores: ArrayLike,
    *,
    tie_credit: float = 0.0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """RM-Bench easy / normal / hard / avg accuracy (percentage points) with bootstrap CIs over prompts.

    chosen_scores, rejected_scores: (N, 3) reward scores of the chosen and rejected responses at style
    levels 0 concise, 1 detailed plain, 2 detailed markdown. Conventions in the module docstring: rows of
    the matrix are the chosen style, columns the rejected style; hard = chosen less styled (i < j).
    Returns {"easy", "normal", "hard", "avg"} with `<key>_ci` [low, high] companions, "matrix" (3x3 nested
    list, percentage points, M[i][j] = chosen style i vs rejected style j) and "n" (prompts).
    """
    per_prompt = rmbench_pair_matrix(chosen_scores, rejected_scores, tie_credit)
    n = per_prompt.shape[0]
    if n == 0:
        raise ValueError("no prompts to score")
    matrix = per_prompt.mean(axis=0) * 100.0
    point = _summaries(matrix)
    if n_boot > 0:
        # Resampling counts (n_boot, N) times the flattened per-prompt matrices (N, 9): avoids building an
        # (n_boot, N, 3, 3) array.
        idx = bootstrap_indices(n, n_boot, seed)
        offsets = (idx + np.arange(n_boot)[:, None] * n).ravel()
        counts = np.bincount(offsets, minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)
        size = per_prompt.shape[-1]
        boot_matrices = (counts @ per_prompt.reshape(n, size * size)).reshape(n_boot, size, size)
        replicates = _summaries(boot_matrices / n * 100.0)
    else:
        replicates = np.empty((0, 4))
    out: dict[str, Any] = {}
    for k, name in enumerate(("easy", "normal", "hard", "avg")):
        low, high = percentile_interval(replicates[:, k], confidence)
        out[name] = json_float(point[k])
        out[f"{name}_ci"] = [json_float(low), json_float(high)]
    out["matrix"] = [[float(v) for v in row] for row in matrix]
    out["n"] = int(n)
    return out
