"""Evaluation protocols for a scalar reward model: the standard accuracy block on any pair set (with the
reliability data a report plots), and RM-Bench's style matrix where the pairs carry their 3x3 variants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import NonFiniteReward
from rewardsmith.evaluate.metrics import (
    doubt_block,
    evaluate_margins,
    json_float,
    length_correlation,
    pairwise_correct,
    reliability_curve,
    soft_label_correct,
)
from rewardsmith.evaluate.rmbench import rmbench_accuracy
from rewardsmith.stats import sigmoid


def response_lengths(pairs: Sequence[PreferencePair]) -> tuple[np.ndarray, np.ndarray]:
    """Character lengths of chosen (N,) and rejected (N,) responses (the length rule's input)."""
    return (
        np.array([len(p.chosen) for p in pairs], dtype=np.float64),
        np.array([len(p.rejected) for p in pairs], dtype=np.float64),
    )


def gold_labels(pairs: Sequence[PreferencePair]) -> np.ndarray | None:
    """Labels (N,) when any pair has a non-gold label, else None (chosen always preferred)."""
    labels = np.array([p.label for p in pairs], dtype=np.float64)
    return None if np.all(labels == 1.0) else labels


def accuracy_block(
    margins: np.ndarray,
    pairs: Sequence[PreferencePair],
    n_boot: int = 1000,
    seed: int = 0,
    scores: np.ndarray | None = None,
    doubt: np.ndarray | None = None,
    doubt_kind: str = "members' sd of the margin",
) -> dict[str, Any]:
    """The accuracy block of evaluate_margins plus `reliability` (the top-label reliability curve of
    p = sigmoid(margin), for the report's diagram), given the responses' scores (2N,) (chosen and
    rejected interleaved), `length_correlation` (Spearman of reward and response length) with its CI, and `doubt`
    (metrics.doubt_block): selective accuracy and the error AUROC of the model's doubt per pair, by default
    -|margin| (a small margin is a guess), or the doubt given (an ensemble's sd of the margin)."""
    chosen_len, rejected_len = response_lengths(pairs)
    labels = gold_labels(pairs)
    block = evaluate_margins(margins, chosen_len, rejected_len, labels, n_boot=n_boot, seed=seed)
    block["reliability"] = reliability_curve(sigmoid(margins), labels).to_dict()
    if scores is not None:
        corr = length_correlation(scores[0::2], scores[1::2], chosen_len, rejected_len, n_boot=n_boot, seed=seed)
        block["length_correlation"], block["length_correlation_ci"] = json_float(corr.estimate), corr.ci
    if len(margins):
        kind = doubt_kind if doubt is not None else "-|margin|"
        per_pair = np.asarray(doubt if doubt is not None else -np.abs(margins), dtype=np.float64)
        if labels is None:
            correct = pairwise_correct(margins)
        else:
            correct, per_pair = soft_label_correct(margins, labels), per_pair[labels != 0.5]
        if len(correct):
            block["doubt"] = doubt_block(correct, per_pair, kind, n_boot=n_boot, seed=seed)
    return block


class PairScorer(Protocol):
    """What scores pairs for an evaluation: evaluate.scoring.RewardScorer for a model in memory, or any
    rewardsmith.inference.Inference (an ensemble's also gives each pair's doubt: score_pairs_with_doubt)."""

    @property
    def counts(self) -> dict[str, int]: ...

    def score_pairs(
        self, pairs: Sequence[PreferencePair], progress: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]: ...


def evaluate_pairs(
    scorer: PairScorer, pairs: Sequence[PreferencePair], n_boot: int = 1000, progress: str | None = None
) -> tuple[dict[str, Any], np.ndarray]:
    """Scores pairs and returns (the accuracy block with a `truncated` count of this set's texts cut to the
    budget, scores (2N,): chosen and rejected interleaved)."""
    before = dict(scorer.counts)
    with_doubt = getattr(scorer, "score_pairs_with_doubt", None)  # an Inference: an ensemble's doubt, else None
    doubt = None
    try:
        if with_doubt is not None:
            chosen, rejected, doubt = with_doubt(pairs, progress)
        else:
            chosen, rejected = scorer.score_pairs(pairs, progress)
    except NonFiniteReward as bad:  # a NaN is no tie: name the pair and stop
        pair = pairs[bad.position // 2]
        side = "chosen" if bad.position % 2 == 0 else "rejected"
        raise NonFiniteReward(
            bad.position, bad.value, bad.what, f"pair {bad.position // 2 + 1} ({pair.pair_id or 'no id'}), {side}"
        ) from None
    scores = np.empty(2 * len(pairs))
    scores[0::2], scores[1::2] = chosen, rejected
    block = accuracy_block(chosen - rejected, pairs, n_boot, scores=scores, doubt=doubt)
    block["truncated"] = {k: v - before.get(k, 0) for k, v in scorer.counts.items()}
    return block, scores


def has_rmbench_variants(pairs: Sequence[PreferencePair]) -> bool:
    return bool(pairs) and all("chosen_variants" in p.metadata and "rejected_variants" in p.metadata for p in pairs)


def evaluate_rmbench(scorer: PairScorer, pairs: Sequence[PreferencePair]) -> dict[str, Any]:
    """RM-Bench easy / normal / hard accuracy from the 3x3 matrix of style variants of each row."""
    texts: list[PreferencePair] = []
    for p in pairs:
        for c, r in zip(p.metadata["chosen_variants"], p.metadata["rejected_variants"], strict=True):
            texts.append(PreferencePair(p.prompt, c, r, 1.0, p.domain))
    chosen, rejected = scorer.score_pairs(texts)
    n_styles = len(pairs[0].metadata["chosen_variants"])
    return rmbench_accuracy(chosen.reshape(-1, n_styles), rejected.reshape(-1, n_styles))
