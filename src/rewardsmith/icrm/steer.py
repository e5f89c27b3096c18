"""Does the model follow a handful of demonstrations? The same held-out pairs scored with no demonstrations,
with N demonstrations of the pairs' own standard, and with the same N demonstrations flipped (the dispreferred
response shown as preferred). A model that follows its demonstrations loses accuracy against the pairs' own
labels under the flipped ones; a static reward model cannot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.evaluate.metrics import pairwise_accuracy
from rewardsmith.icrm.scoring import ICRMScorer


def steering_check(
    scorer: ICRMScorer,
    pairs: Sequence[PreferencePair],
    demo_pool: Sequence[PreferencePair],
    n_demos: int = 8,
    seed: int = 0,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """Accuracy (%, bootstrap CI over pairs) against the pairs' own labels and the mean posterior P(chosen
    preferred) under each condition: "none", "as labelled" and "flipped". demo_pool: pairs of the same standard
    that share no conversation with `pairs`; n_demos of them are drawn once (seeded) and used in both
    demonstrated conditions."""
    rng = np.random.default_rng(seed)
    picks = sorted(rng.choice(len(demo_pool), size=min(n_demos, len(demo_pool)), replace=False).tolist())
    demos = [demo_pool[i] for i in picks]
    conditions = {"none": [], "as labelled": demos, "flipped": [d.swapped() for d in demos]}
    out: dict[str, Any] = {
        "pairs": len(pairs),
        "n_demos": len(demos),
        "demo_pair_ids": [d.pair_id for d in demos],
        "conditions": {},
    }
    for name, scores in zip(conditions, scorer.score_pairs_under(pairs, list(conditions.values())), strict=True):
        acc = pairwise_accuracy(scores.u_chosen - scores.u_rejected, n_boot=n_boot, seed=seed)
        out["conditions"][name] = {"accuracy": acc.estimate, "accuracy_ci": acc.ci, "mean_mu": float(scores.mu.mean())}
    return out
