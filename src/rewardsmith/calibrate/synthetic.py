"""Seeded synthetic rating tables from the normal hierarchical model PEBS assumes (tests and benchmarks).

Rater j has slope a_j and intercept b_j (the value at r = centre) drawn from N((slope, intercept), T); its
n_j ratings are s = a_j (r - centre) + b_j + N(0, sigma_j^2) at model scores r ~ N(r_mean + shift_j, r_sd^2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rewardsmith.data.ratings import RatingTable


@dataclass(frozen=True)
class SyntheticRaters:
    """True per-rater parameters (arrays (J,)) behind a simulated table: the map is slope * r + intercept."""

    rater_ids: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray
    noise_sd: np.ndarray


def simulate_parameters(
    n_raters: int,
    *,
    slope: float = 1.0,
    intercept: float = 0.0,
    slope_sd: float = 0.3,
    intercept_sd: float = 0.5,
    correlation: float = 0.0,
    centre: float = 0.0,
    noise_sd: float = 1.0,
    noise_sd_spread: float = 0.0,
    seed: int = 0,
) -> SyntheticRaters:
    """Draws (slope, intercept at `centre`) per rater from a bivariate normal; returns maps at r = 0.

    noise_sd_spread: log-normal spread of per-rater noise SDs (0 = every rater has noise_sd).
    """
    rng = np.random.default_rng(seed)
    cov = np.array(
        [
            [slope_sd**2, correlation * slope_sd * intercept_sd],
            [correlation * slope_sd * intercept_sd, intercept_sd**2],
        ]
    )
    theta = rng.multivariate_normal([slope, intercept], cov, size=n_raters)
    noise = noise_sd * np.exp(noise_sd_spread * rng.standard_normal(n_raters) - noise_sd_spread**2 / 2)
    ids = np.array([f"r{j:06d}" for j in range(n_raters)])
    return SyntheticRaters(ids, theta[:, 0], theta[:, 1] - theta[:, 0] * centre, noise)


def simulate_ratings(
    params: SyntheticRaters,
    ratings_per_rater: int | np.ndarray,
    *,
    r_mean: float = 0.0,
    r_sd: float = 1.0,
    rater_r_shift_sd: float = 0.0,
    seed: int = 1,
) -> RatingTable:
    """A RatingTable of ratings drawn from the true maps (columns rater_id, item_id, score, model_score).

    ratings_per_rater: an int or (J,) counts. rater_r_shift_sd: SD of a per-rater shift of the mean model
    score (raters who see different items); 0 gives every rater the same distribution.
    """
    rng = np.random.default_rng(seed)
    n_raters = len(params.rater_ids)
    counts = np.broadcast_to(np.asarray(ratings_per_rater, dtype=np.int64), (n_raters,))
    codes = np.repeat(np.arange(n_raters), counts)
    shift = rater_r_shift_sd * rng.standard_normal(n_raters)
    r = r_mean + shift[codes] + r_sd * rng.standard_normal(len(codes))
    s = params.slope[codes] * r + params.intercept[codes] + params.noise_sd[codes] * rng.standard_normal(len(codes))
    item = np.arange(len(codes)) - np.repeat(np.cumsum(counts) - counts, counts)
    frame = pd.DataFrame(
        {"rater_id": params.rater_ids[codes], "item_id": item.astype(str), "score": s, "model_score": r}
    )
    return RatingTable(frame, name="synthetic", source=f"simulate_ratings(seed={seed})", n_rows=len(frame))
