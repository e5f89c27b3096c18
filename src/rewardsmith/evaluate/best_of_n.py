"""Best-of-n from N samples, exactly (METHODS.md section 4): the expected value of the sample a selector picks
among n drawn uniformly without replacement from a prompt's N samples, computed in closed form from ranks, not by
Monte Carlo. One function serves PPE's best-of-K curve (bench/suites/ppe_correctness.py: value = correctness) and
`rewardsmith bon` (value = a gold's score, the proxy's own reward, the response's length).

With the N samples sorted by the selector, descending, a tie group at positions [a, b) holds the draw's top with
probability (C(N - a, n) - C(N - b, n)) / C(N, n), and the pick is then uniform inside it (a tie broken at
random, in expectation). For distinct selector values this is E[value of best-of-n] = sum_i C(i - 1, n - 1) /
C(N, n) * v_(i) over the ascending ranks i.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb, log

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


def _comb_table(n: int) -> FloatArray:
    """T[m, k] = C(m, k) for 0 <= m, k <= n (float64; exact for n <= 60, relative error below 1e-15 beyond)."""
    return np.array([[comb(m, k) for k in range(n + 1)] for m in range(n + 1)], dtype=np.float64)


def best_of_n_curve(selector: ArrayLike, values: ArrayLike, ns: Sequence[int]) -> FloatArray:
    """Expected `values` of the sample with the highest `selector` among n drawn uniformly without replacement
    from the N samples of a prompt, a tie at the top broken uniformly at random; one value per n in ns.

    selector, values: (N,). Returns (len(ns),). Invariant to the order of the samples. ValueError for an n outside
    1..N.
    """
    r = np.asarray(selector, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    n_samples = r.size
    if v.shape != r.shape:
        raise ValueError(f"selector and values differ in shape: {r.shape} vs {v.shape}")
    if any(k < 1 or k > n_samples for k in ns):
        raise ValueError(f"n must lie in 1..{n_samples}, got {list(ns)}")
    order = np.argsort(-r, kind="stable")
    r_sorted, v_sorted = r[order], v[order]
    starts = np.concatenate([[0], np.flatnonzero(r_sorted[1:] != r_sorted[:-1]) + 1])
    ends = np.concatenate([starts[1:], [n_samples]])
    group_mean = np.add.reduceat(v_sorted, starts) / (ends - starts)
    table = _comb_table(n_samples)
    k_arr = np.asarray(ns, dtype=np.int64)
    prob = (table[n_samples - starts][:, k_arr] - table[n_samples - ends][:, k_arr]) / table[n_samples, k_arr]
    return np.asarray(group_mean @ prob, dtype=np.float64)


def best_of_n_curves(selector: ArrayLike, values: ArrayLike, ns: Sequence[int]) -> FloatArray:
    """best_of_n_curve per prompt: selector, values (P, N) -> (P, len(ns))."""
    r = np.asarray(selector, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if r.ndim != 2 or r.shape != v.shape:
        raise ValueError(f"selector and values must both be (prompts, samples), got {r.shape} and {v.shape}")
    return (
        np.stack([best_of_n_curve(r[p], v[p], ns) for p in range(r.shape[0])]) if r.shape[0] else np.zeros((0, len(ns)))
    )


def kl_bound(n: int) -> float:
    """KL(best-of-n policy || policy) <= log n - (n - 1) / n (exact when the N samples are distinct)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return log(n) - (n - 1) / n


def powers_of_two(n_max: int) -> list[int]:
    """1, 2, 4, ... up to n_max, and n_max itself when it is not a power of two."""
    if n_max < 1:
        raise ValueError(f"n must be at least 1, got {n_max}")
    out = [1 << k for k in range(n_max.bit_length()) if 1 << k <= n_max]
    return out if out[-1] == n_max else [*out, n_max]
